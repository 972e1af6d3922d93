// The boxed fallback: any ATen op without a dedicated neuron kernel runs on
// its host (CPU) kernel, zero-copy.
//
// Arguments are swapped for CPU aliases of the same memory (core/HostBridge.cpp), the
// op is redispatched to the CPU kernel, and results come back as neuron
// tensors: in-place and out= results are the caller's own tensors, views are
// re-wrapped on the device storage they alias, fresh outputs are adopted.
#include "aten/native/Fallback.h"
#include "aten/native/NeuronDtypeRules.h"
#include "aten/native/OpSignatures.h"
#include "aten/native/OpTracking.h"
#include "aten/native/SchemaCache.h"
#include "aten/native/UnsupportedLayouts.h"
#include "core/Device.h"
#include "core/Generator.h"
#include "core/HostBridge.h"
#include "runtime/Runtime.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/SmallVector.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace neuron {
namespace {

struct OpInfo {
  explicit OpInfo(std::string op_name) : op(std::move(op_name)), name(op.name), site(name) {}
  op_signatures::Op op;                   // its calls and signatures, as Trainium's eager mode compiles them
  const std::string& name;
  op_tracking::Site site;                 // get_executed_ops() / get_fallback_ops()
  std::vector<size_t> generator_args;     // Optional[Generator] arguments
  std::vector<size_t> mutable_args;       // arguments the op may write (in-place, out=)
  bool allows_host_tensors = false;       // CUDA accepts CPU index tensors for these
  bool fp32_integer_datapath = false;     // Neuron computes its integer results in fp32
  bool returns_alias = false;             // a result may be a view of an argument (it must see the argument)
  std::atomic<int64_t> calls{0};          // fallback calls (the emulator's own count)
};

bool is_neuron(const at::Tensor& t) { return t.defined() && t.device().type() == kNeuron; }

std::mutex g_ops_mu;
std::unordered_map<std::string, OpInfo*>& registry() {
  static auto* m = new std::unordered_map<std::string, OpInfo*>();
  return *m;
}


OpInfo* build_info(const c10::FunctionSchema& schema) {
  std::string name = schema.name();
  if (!schema.overload_name().empty()) name += "." + schema.overload_name();
  auto* info = new OpInfo(std::move(name));
  const auto& args = schema.arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    auto type = args[i].type();
    if (auto opt = type->cast<c10::OptionalType>()) type = opt->getElementType();
    if (type->kind() == c10::TypeKind::GeneratorType) info->generator_args.push_back(i);
    if (args[i].alias_info() && args[i].alias_info()->isWrite()) info->mutable_args.push_back(i);
  }
  for (const auto& ret : schema.returns())
    if (ret.alias_info()) info->returns_alias = true;
  static const std::unordered_set<std::string> host_ok = {
      "aten::index", "aten::index_put", "aten::index_put_", "aten::_index_put_impl_",
      "aten::_unsafe_index", "aten::_unsafe_index_put"};
  info->allows_host_tensors = host_ok.count(schema.name()) > 0;
  info->fp32_integer_datapath = dtype_rules::computes_integers_in_fp32(schema.name());
  return info;
}

// Every fallback call looks its op up: the per-thread cache (SchemaCache.h) in front of the registry, which
// is keyed by name and locked.
OpInfo* op_info(const c10::OperatorHandle& op) {
  return cached_by_schema<OpInfo, 512>(op, [](const c10::OperatorHandle& op) {
    const auto& schema = op.schema();
    std::string name = schema.name() + "." + schema.overload_name();
    std::lock_guard<std::mutex> g(g_ops_mu);
    auto& reg = registry();
    auto rit = reg.find(name);
    return rit != reg.end() ? rit->second : (reg[name] = build_info(schema));
  });
}

// Per-call state: which device storages were aliased, and as what.
struct Call {
  OpInfo* info;
  c10::optional<c10::DeviceIndex> device;
  const at::Tensor* first_neuron = nullptr;
  const at::Tensor* first_host = nullptr;  // the first non-scalar CPU tensor, argument first_host_arg
  std::string first_host_arg;              // "arg1", "arg0[2]" (a list's element), as TorchNeuron names it
  // Inline capacity for a typical op, so a call allocates nothing for its bookkeeping.
  // device StorageImpl -> host alias storage (one per storage, so aliasing is preserved)
  c10::SmallVector<std::pair<c10::StorageImpl*, c10::Storage>, 4> aliases;
  // host StorageImpl -> device storage (aliases, and fresh outputs once adopted)
  c10::SmallVector<std::pair<c10::StorageImpl*, c10::Storage>, 6> to_device;
  // argument tensors and their host aliases, for write-back of metadata
  c10::SmallVector<std::pair<at::Tensor, at::Tensor>, 2> written;

  void see(const at::Tensor& t, size_t arg, int64_t element = -1) {
    if (!t.defined()) return;
    if (t.device().type() == kNeuron) {
      if (!device) {
        device = t.device().index();
        first_neuron = &t;
      } else if (*device != t.device().index()) {
        mismatch(*first_neuron, t);
      }
    } else if (t.is_cpu() && t.dim() > 0 && !first_host) {
      first_host = &t;
      first_host_arg = "arg" + std::to_string(arg) + (element >= 0 ? "[" + std::to_string(element) + "]" : "");
    }
  }

  [[noreturn]] void mismatch(const at::Tensor& a, const at::Tensor& b) {
    TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ",
                a.device(), " and ", b.device(), "! (when running ", info->name,
                " on neuron). Move the tensors to one device first, e.g. with .to(\"", a.device(), "\").");
  }

  // A non-scalar CPU tensor among neuron tensors: CUDA's message, with TorchNeuron's naming the argument.
  [[noreturn]] void host_mismatch() {
    const c10::Device neuron(kNeuron, out_device());
    TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ", neuron,
                " and cpu! (when running ", info->name, " on neuron). Non-scalar tensor ", first_host_arg,
                " is on cpu device, expected neuron: only 0-dim CPU tensors mix with neuron tensors. Move the "
                "tensors to one device first, e.g. with .to(\"", neuron, "\").");
  }

  at::Tensor to_host(const at::Tensor& t) {
    if (!is_neuron(t)) return t;
    auto* impl = t.storage().unsafeGetStorageImpl();
    for (auto& [dev, host] : aliases) {
      if (dev == impl) return tensor_over(t, host);
    }
    c10::Storage host = host_storage(t.storage());
    aliases.emplace_back(impl, host);
    to_device.emplace_back(host.unsafeGetStorageImpl(), t.storage());
    return tensor_over(t, host);
  }

  c10::DeviceIndex out_device() const { return device ? *device : current_device(); }

  at::Tensor to_device_tensor(const at::Tensor& h) {
    if (!h.defined() || !h.is_cpu()) return h;
    for (auto& [arg, alias] : written) {
      if (alias.unsafeGetTensorImpl() == h.unsafeGetTensorImpl()) return arg;
    }
    auto* impl = h.storage().unsafeGetStorageImpl();
    for (auto& [host, dev] : to_device) {
      if (host == impl) return tensor_over(h, dev);
    }
    c10::Storage dev = storage_to_device(h.storage(), out_device());
    to_device.emplace_back(impl, dev);
    return tensor_over(h, dev);
  }

  // A host kernel may resize an out= argument (new host allocation) or
  // restride it; carry that back to the caller's neuron tensor.
  void write_back(at::Tensor& arg, const at::Tensor& alias) {
    auto* dev_storage = arg.storage().unsafeGetStorageImpl();
    if (alias.storage().data() != dev_storage->data() || alias.storage().nbytes() != dev_storage->nbytes()) {
      c10::Storage fresh = storage_to_device(alias.storage(), arg.device().index());
      dev_storage->set_data_ptr_noswap(std::move(fresh.unsafeGetStorageImpl()->mutable_data_ptr()));
      dev_storage->set_nbytes(alias.storage().nbytes());
    }
    auto* impl = arg.unsafeGetTensorImpl();
    if (arg.sizes() != alias.sizes() || arg.strides() != alias.strides() ||
        arg.storage_offset() != alias.storage_offset()) {
      impl->set_sizes_and_strides(alias.sizes(), alias.strides(), alias.storage_offset());
    }
  }
};

// Pass 1: find the call's device and reject mixed devices as CUDA does; hash the op signature.
void find_device(Call& call, const torch::jit::Stack& stack, size_t begin, size_t nargs) {
  op_signatures::Hasher signature(call.info->op.name_hash);
  for (size_t i = begin; i < begin + nargs; ++i) {
    const c10::IValue& v = stack[i];
    const size_t arg = i - begin;
    if (v.isTensor()) {
      call.see(v.toTensor(), arg);
      signature.add(v.toTensor());
    } else if (v.isTensorList()) {
      int64_t j = 0;
      for (const at::Tensor& t : v.toTensorList()) call.see(t, arg, j++), signature.add(t);
    } else if (v.isList()) {
      int64_t j = 0;
      for (const c10::IValue& e : v.toListRef()) {
        if (e.isTensor()) call.see(e.toTensor(), arg, j), signature.add(e.toTensor());
        ++j;
      }
    } else if (v.isDevice() && v.toDevice().type() == kNeuron && !call.device) {
      call.device = v.toDevice().has_index() ? v.toDevice().index() : current_device();
    }
  }
  if (call.device && call.first_host && !call.info->allows_host_tensors) call.host_mismatch();
  if (call.device) {
    op_signatures::record(call.info->op, signature);
    op_tracking::record(call.info->site);
  }
}

// A list argument (e.g. Tensor?[] indices) with its neuron tensors swapped for host aliases.
c10::IValue list_to_host(Call& call, const c10::IValue& v) {
  auto list = v.toList();
  bool any = false;
  for (const c10::IValue& e : list)
    if (e.isTensor() && is_neuron(e.toTensor())) any = true;
  if (!any) return v;
  c10::impl::GenericList hosts(list.elementType());
  for (const c10::IValue& e : list) hosts.push_back(e.isTensor() ? c10::IValue(call.to_host(e.toTensor())) : e);
  return hosts;
}

// Pass 2: swap neuron tensors (and devices, and generators) for their host counterparts; remember the
// arguments the op may write, to carry resizes back.
void arguments_to_host(Call& call, torch::jit::Stack& stack, size_t begin, size_t nargs) {
  const auto& mut = call.info->mutable_args;
  const int fp64 = fp64_mode();
  const bool fp64_check = fp64 == kFp64Warn || fp64 == kFp64Error;
  // Neuron computes float64 in float32: its inputs (a copy may have kept float64 bytes) and its Python
  // scalars enter the op at float32 precision, or `torch.full(s, 3.14, dtype=torch.float64) == 3.14` would be
  // False here and True on Trainium. A written input is rounded in place (the op overwrites it anyway),
  // any other is rounded into a copy.
  const bool fp64_as_fp32 = fp64 == kFp64AsFloat32 && !dtype_rules::t_in_compiled_graph;
  bool fp64_tensor = false;
  auto host_input = [&](const at::Tensor& t, bool is_mut) {
    at::Tensor h = call.to_host(t);
    if (!fp64_as_fp32 || t.scalar_type() != at::kDouble || !is_neuron(t)) return h;
    fp64_tensor = true;
    if (is_mut) return h.copy_(h.to(at::kFloat));
    if (call.info->returns_alias) return h;  // a view must see its base; views move bytes, compute nothing
    return h.to(at::kFloat).to(at::kDouble);
  };
  for (size_t i = 0; i < nargs; ++i) {
    c10::IValue& v = stack[begin + i];
    bool is_mut = std::find(mut.begin(), mut.end(), i) != mut.end();
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (!is_neuron(t)) continue;
      if (fp64_check) dtype_rules::check_fp64_input(call.info->name, t);
      at::Tensor h = host_input(t, is_mut);
      if (is_mut) call.written.emplace_back(t, h);
      v = std::move(h);
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> hosts;
      for (const at::Tensor& t : v.toTensorList()) {
        if (fp64_check) dtype_rules::check_fp64_input(call.info->name, t);
        at::Tensor h = host_input(t, is_mut);
        if (is_mut && is_neuron(t)) call.written.emplace_back(t, h);
        hosts.push_back(std::move(h));
      }
      v = std::move(hosts);
    } else if (v.isList()) {
      v = list_to_host(call, v);
    } else if (v.isDevice() && v.toDevice().type() == kNeuron) {
      v = c10::Device(c10::DeviceType::CPU);
    }
  }
  if (fp64_tensor)
    for (size_t i = 0; i < nargs; ++i) {
      c10::IValue& v = stack[begin + i];
      if (v.isDouble()) v = static_cast<double>(static_cast<float>(v.toDouble()));
    }
  // Random ops draw from the CPU's default generator (left unset), as on Trainium, where they take
  // TorchNeuron's CPU fallback: torch.manual_seed(s) gives the CPU's numbers, one stream for both devices.
  // An explicit neuron generator draws through its engine (core/Generator.cpp).
  for (size_t i : call.info->generator_args) {
    c10::IValue& v = stack[begin + i];
    if (v.isGenerator() && v.toGenerator().device().type() == kNeuron) v = host_engine(v.toGenerator());
  }
}

// Pass 3: the host kernel's results as neuron tensors.
void results_to_device(Call& call, torch::jit::Stack& stack, size_t nret) {
  for (auto& [arg, alias] : call.written) call.write_back(arg, alias);
  auto result = [&](const at::Tensor& h) {
    if (!h.defined()) return h;
    if (h.layout() != at::kStrided) reject_layout(call.info->name, h.layout());
    if (dtype_rules::result_has_rule(h.scalar_type()))
      dtype_rules::apply_to_result(call.info->name, h, call.info->fp32_integer_datapath);
    return call.to_device_tensor(h);
  };
  for (size_t i = stack.size() - nret; i < stack.size(); ++i) {
    c10::IValue& v = stack[i];
    if (v.isTensor()) {
      v = result(v.toTensor());
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> outs;
      for (const at::Tensor& t : v.toTensorList()) outs.push_back(result(t));
      v = std::move(outs);
    } else if (v.isList()) {
      auto list = v.toList();
      c10::impl::GenericList outs(list.elementType());
      for (const c10::IValue& e : list) outs.push_back(e.isTensor() ? c10::IValue(result(e.toTensor())) : e);
      v = std::move(outs);
    }
  }
}

} // namespace

void fallback(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  Call call{op_info(op)};
  call.info->calls.fetch_add(1, std::memory_order_relaxed);
  const auto& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  const size_t begin = stack->size() - nargs;
  find_device(call, *stack, begin, nargs);
  arguments_to_host(call, *stack, begin, nargs);
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  results_to_device(call, *stack, schema.returns().size());
}

std::vector<std::pair<std::string, int64_t>> fallback_counts() {
  std::lock_guard<std::mutex> g(g_ops_mu);
  std::vector<std::pair<std::string, int64_t>> out;
  for (auto& [k, v] : registry())
    if (v->calls.load()) out.emplace_back(v->name, v->calls.load());
  return out;
}

void reset_fallback_counts() {
  std::lock_guard<std::mutex> g(g_ops_mu);
  for (auto& [k, v] : registry()) v->calls.store(0);
}

} // namespace neuron
