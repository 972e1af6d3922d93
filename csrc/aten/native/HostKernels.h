// The hottest elementwise ops run the host's own compute kernels directly on
// device memory, with no host aliases and no boxing.
//
// Most ATen ops reach the boxed fallback (Fallback.cpp), which wraps every
// argument in a CPU alias and adopts every result: correct for any op, but a
// few microseconds per call, which dominates small ops (the add of two
// 8-element tensors costs ~2.5 us on the CPU). The ops below are structured
// TensorIterator ops, whose CPU implementation is split into a device-neutral
// part (meta: shapes, type promotion, output allocation through a virtual
// hook) and a compute stub looked up by device type. So a neuron kernel is
// just: the same structured class with outputs allocated on the core, whose
// compute then runs the stub's CPU kernel. Device memory is host RAM, so the
// CPU kernel computes on it in place; TensorIterator does the device checks
// and raises CUDA's mixed-device errors.
//
// One CPU behaviour has no PrivateUse1 counterpart: for CPU tensors,
// TensorIterator casts inputs of another dtype to the common dtype (CPU
// kernels need one dtype). Calls with mixed dtypes therefore take the boxed
// fallback, except Python numbers, which are cast here exactly as the CPU
// path casts them (not for bf16/fp16, whose CPU kernels read the number at
// full precision).
//
// ISA-neutral: nothing here names a CPU variant. After meta() the iterator is
// marked as a host iterator (OnHost below), so the structured kernel's own
// impl(), compiled inside libtorch, calls its compute stub for the CPU and
// libtorch picks its variant for this machine (AVX2/AVX512 on x86-64,
// NEON/SVE on aarch64), exactly as for a CPU tensor.
//
// This header holds the kernel templates; aten/RegisterHostKernels.cpp
// registers them per op.
#pragma once

#include "aten/native/Fallback.h"
#include "aten/native/Native.h"
#include "aten/native/OpSignatures.h"
#include "aten/native/OpTracking.h"
#include "core/Allocator.h"
#include "core/Device.h"
#include "core/HostBridge.h"

#include <ATen/EmptyTensor.h>
#include <ATen/Operators.h>
#include <ATen/ScalarOps.h>
#include <ATen/TensorIterator.h>
#include <ATen/native/Activation.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/Pow.h>
#include <ATen/native/UnaryOps.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/add_native.h>
#include <ATen/ops/cos_native.h>
#include <ATen/ops/div_native.h>
#include <ATen/ops/exp_native.h>
#include <ATen/ops/log_native.h>
#include <ATen/ops/maximum_native.h>
#include <ATen/ops/minimum_native.h>
#include <ATen/ops/mul_native.h>
#include <ATen/ops/neg_native.h>
#include <ATen/ops/pow_native.h>
#include <ATen/ops/reciprocal_native.h>
#include <ATen/ops/rsqrt_native.h>
#include <ATen/ops/sigmoid_native.h>
#include <ATen/ops/silu_backward_native.h>
#include <ATen/ops/silu_native.h>
#include <ATen/ops/sin_native.h>
#include <ATen/ops/sqrt_native.h>
#include <ATen/ops/sub_native.h>
#include <ATen/ops/tanh_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <type_traits>

namespace neuron::host_kernels {

inline at::Tensor device_empty(at::IntArrayRef sizes, at::IntArrayRef strides, const at::TensorOptions& options) {
  auto stride = strides.empty() ? std::nullopt : std::optional<at::IntArrayRef>(strides);
  return native::empty_on_core(native::index_of(options.device_opt()), sizes, stride,
                               options.dtype().toScalarType(), options.memory_format_opt());
}

// A structured kernel that computes on the host once meta() has checked devices and placed its output
// on the core. The operands' bytes are host-addressable device memory (the host kernel path exists only
// for such a runtime, see docs/runtime.md), so marking every operand and the iterator as CPU makes
// impl() call the stub's CPU kernel; the tensors themselves stay neuron tensors.
// The operands are opened through the host bridge for the computation (strict mode checks it).
template <class Kernel>
struct OnHost : Kernel {
  HostAccess access;
  void compute_on_host() {
    for (int i = 0; i < this->ntensors(); ++i) access.open(this->tensor_base(i));
    for (auto& operand : this->operands_) operand.device = c10::Device(c10::DeviceType::CPU);
    this->common_device_ = c10::Device(c10::DeviceType::CPU);
  }
};

// A structured kernel whose output is a fresh tensor on the core.
template <class Kernel>
struct Functional final : OnHost<Kernel> {
  at::Tensor out;
  void set_output_strided(int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides, at::TensorOptions options)
      override {
    set_output_raw_strided(i, sizes, strides, options);
  }
  void set_output_raw_strided(int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides, at::TensorOptions options)
      override {
    out = device_empty(sizes, strides, options);
    Kernel::set_output_raw_strided(i, sizes, strides, options);
  }
  const at::Tensor& maybe_get_output(int64_t) override { return out; }
};

// A structured kernel writing into its first argument.
template <class Kernel>
struct InPlace final : OnHost<Kernel> {
  explicit InPlace(const at::Tensor& self) : self(self) {}
  const at::Tensor& self;
  void set_output_strided(int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides, at::TensorOptions options)
      override {
    set_output_raw_strided(i, sizes, strides, options);
  }
  void set_output_raw_strided(int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides, at::TensorOptions options)
      override {
    TORCH_CHECK(options.dtype() == self.dtype(), "Bad in-place call: input tensor dtype ", self.dtype(),
                " and output tensor dtype ", options.dtype(), " should match");
    TORCH_CHECK(options.device() == self.device(), "Bad in-place call: input tensor device ", self.device(),
                " and output tensor device ", options.device(), " should match");
    TORCH_CHECK(sizes == self.sizes(), "Bad in-place call: input tensor size ", self.sizes(),
                " and output tensor size ", sizes, " should match");
    Kernel::set_output_raw_strided(i, sizes, strides, options);
  }
  const at::Tensor& maybe_get_output(int64_t) override { return self; }
};

// The CPU kernels need every operand in one dtype (see the top of the file);
// results with a Neuron dtype rule (float64, int64: aten/native/NeuronDtypeRules.h)
// are the fallback's to police.
inline bool one_dtype(const at::TensorIteratorBase& iter) {
  auto dtype = iter.dtype(0);
  for (int i = 1; i < iter.ntensors(); ++i)
    if (iter.dtype(i) != dtype) return false;
  if (dtype == at::kDouble) return fp64_mode() == kFp64Exact;  // warn/error look at inputs too
  return dtype != at::kLong || !dtype_rules::result_has_rule(dtype);
}

// The common case of the ops that run their CPU kernel on host aliases outside the boxed fallback
// (MatMul.cpp, HostAliasOps.cpp): at least one tensor, every one a strided neuron tensor of one core, all in
// one floating dtype without a Neuron dtype rule (float32, bfloat16, float16). Every other call takes the
// boxed fallback, whose checks, dtype rules and messages apply. `tensors`: tensors or pointers to them.
inline const at::Tensor& tensor_of(const at::Tensor& t) { return t; }
inline const at::Tensor& tensor_of(const at::Tensor* t) { return *t; }
template <class Tensors>
bool on_host_alias_path(const Tensors& tensors) {
  auto it = tensors.begin();
  if (it == tensors.end()) return false;
  const at::Tensor& first = tensor_of(*it);
  if (first.device().type() != kNeuron) return false;
  const auto dtype = first.scalar_type();
  if (dtype != at::kFloat && dtype != at::kBFloat16 && dtype != at::kHalf) return false;
  for (; it != tensors.end(); ++it) {
    const at::Tensor& t = tensor_of(*it);
    if (t.device() != first.device() || t.scalar_type() != dtype || t.layout() != at::kStrided) return false;
  }
  return true;
}
inline bool on_host_alias_path(std::initializer_list<const at::Tensor*> tensors) {
  return on_host_alias_path<std::initializer_list<const at::Tensor*>>(tensors);
}

// Each call is one eager op signature on Trainium (aten/native/OpSignatures.h) and one op of the op tracking
// (aten/native/OpTracking.h); a call that takes the boxed fallback instead is recorded there.
template <class Op, class... Args>
void record_signature(const Args&... args) {
  static auto* op = new op_signatures::Op(std::string(Op::name) + (Op::overload_name[0] ? "." : "") + Op::overload_name);
  static auto* site = new op_tracking::Site(op->name);
  op_tracking::record(*site);
  op_signatures::Hasher h(op->name_hash);
  ([&] {
    if constexpr (std::is_same_v<Args, at::Tensor>) h.add(args);
    if constexpr (std::is_same_v<Args, std::optional<at::Tensor>>) {
      if (args) h.add(*args);  // the fallback hashes a given optional tensor, and nothing for None
    }
    if constexpr (std::is_same_v<Args, at::ITensorListRef>) {
      for (const at::Tensor& t : args) h.add(t);  // a list: every tensor of it, as the fallback
    }
  }(), ...);
  op_signatures::record(*op, h);
}

// A Python number (a CPU "wrapped number") in `like`'s dtype, when the CPU path
// would compute with exactly that; otherwise undefined. Never for a bool: the op's
// checks must see it (x - True raises on CPU).
inline at::Tensor number_as(const at::Tensor& number, const at::Tensor& like) {
  if (!number.unsafeGetTensorImpl()->is_wrapped_number() || number.scalar_type() == like.scalar_type())
    return {};
  auto dtype = like.scalar_type();
  if (at::isReducedFloatingType(dtype) || at::result_type(like, number) != dtype) return {};
  c10::Scalar value;
  switch (number.scalar_type()) {
    case at::kDouble: value = *number.const_data_ptr<double>(); break;
    case at::kLong: value = *number.const_data_ptr<int64_t>(); break;
    case at::kComplexDouble: value = *number.const_data_ptr<c10::complex<double>>(); break;
    default: return {};
  }
  at::Tensor cast = at::detail::scalar_tensor_static(value, dtype, at::kCPU);
  cast.unsafeGetTensorImpl()->set_wrapped_number(true);
  return cast;
}

inline void fallback_on_stack(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  neuron::fallback(op, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), stack);
}

template <class Op, class... Args>
decltype(auto) boxed_fallback(Args&&... args) {
  return at::native::call_fallback_fn<&fallback_on_stack, Op>::call(std::forward<Args>(args)...);
}

// A non-scalar CPU tensor among the operands: TensorIterator would raise CUDA's bare mixed-device error; the
// boxed fallback raises it naming the argument, as TorchNeuron does.
template <class... Args>
bool has_host_operand(const Args&... args) {
  return ([&] {
    if constexpr (std::is_same_v<Args, at::Tensor>) return args.defined() && args.is_cpu() && args.dim() > 0;
    return false;
  }() || ...);
}

template <class Kernel, class Op, class... Args>
at::Tensor functional(const Args&... args) {
  if (has_host_operand(args...)) return boxed_fallback<Op>(args...);
  Functional<Kernel> k;
  k.meta(args...);
  if (!one_dtype(k)) return boxed_fallback<Op>(args...);  // which records the call itself
  record_signature<Op>(args...);
  k.compute_on_host();
  k.impl(args..., k.out);
  return std::move(k.out);
}

template <class Kernel, class Op, class... Rest>
at::Tensor& inplace(at::Tensor& self, const Rest&... rest) {
  if (has_host_operand(self, rest...)) return boxed_fallback<Op>(self, rest...);
  InPlace<Kernel> k(self);
  k.meta(self, rest...);
  if (!one_dtype(k)) return boxed_fallback<Op>(self, rest...);
  record_signature<Op>(self, rest...);
  k.compute_on_host();
  k.impl(self, rest..., self);
  return self;
}

template <class Kernel, class Op, class... Rest>
at::Tensor binary(const at::Tensor& self, const at::Tensor& other, const Rest&... rest) {
  at::Tensor number = number_as(other, self);
  if (number.defined()) {
    Functional<Kernel> k;
    k.meta(self, number, rest...);
    if (one_dtype(k)) {
      record_signature<Op>(self, other, rest...);
      k.compute_on_host();
      k.impl(self, number, rest..., k.out);
      return std::move(k.out);
    }
    return boxed_fallback<Op>(self, other, rest...);
  }
  return functional<Kernel, Op>(self, other, rest...);
}

template <class Kernel, class Op, class... Rest>
at::Tensor& binary_(at::Tensor& self, const at::Tensor& other, const Rest&... rest) {
  at::Tensor number = number_as(other, self);
  if (number.defined()) {
    InPlace<Kernel> k(self);
    k.meta(self, number, rest...);
    if (one_dtype(k)) {
      record_signature<Op>(self, other, rest...);
      k.compute_on_host();
      k.impl(self, number, rest..., self);
      return self;
    }
    return boxed_fallback<Op>(self, other, rest...);
  }
  return inplace<Kernel, Op>(self, other, rest...);
}

} // namespace neuron::host_kernels
