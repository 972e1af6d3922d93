// torch.profiler on neuron: a Kineto activity profiler registered for PrivateUse1, so
// profile(activities=[CPU, PrivateUse1]) shows each neuron kernel with its device time, linked to the
// op that ran it (key_averages' neuron columns, the Chrome trace's device rows), as CUDA's kernels are.
//
// Kernels run synchronously on the host, so a kernel's device time is the wall time of the op that ran
// it on the core's (synchronous) stream. Which ops are kernels: an op with a neuron tensor (or a neuron
// device argument) that is not a view and inside which no other neuron kernel ran; composite ops
// (linear -> addmm) thus report their leaf, and a host kernel's own CPU-alias calls do not count.
// Nothing of this runs unless a profiling session with PrivateUse1 activities is active.
// Kineto's activity headers format with fmt, which libtorch does not export: compile it here (header-only).
#define FMT_HEADER_ONLY 1
#ifndef USE_KINETO
#define USE_KINETO 1  // the torch wheel is built with Kineto; its headers gate the plugin API on this
#endif

#include "core/Device.h"

#include <ATen/core/function_schema.h>
#include <ATen/record_function.h>
#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>
#include <torch/csrc/profiler/stubs/base.h>

#include <IActivityProfiler.h>
#include <libkineto.h>
#include <time_since_epoch.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace neuron::profiler {
namespace {

struct Kernel {
  std::string name;
  int64_t start_ns;
  int64_t end_ns;
  int device;
  int64_t correlation;
  int32_t thread;
};

// Kineto's correlation ids of the ops being profiled on this thread (pushed at op entry).
thread_local std::vector<uint64_t> t_correlation;

struct Frame {
  int64_t start_ns;
  int device;  // -1: no neuron tensor
  bool child_kernel = false;
};
thread_local std::vector<Frame> t_frames;

std::mutex g_mu;
std::vector<Kernel> g_kernels;  // of the active session

int64_t now_ns() { return libkineto::timeSinceEpoch(std::chrono::system_clock::now()); }

int neuron_device_of(const at::RecordFunction& fn) {
  for (const auto& v : fn.inputs()) {
    if (v.isTensor()) {
      const auto& t = v.toTensor();
      if (t.defined() && t.device().type() == kNeuron) return t.device().index();
    } else if (v.isTensorList()) {
      for (const auto& t : v.toTensorList()) {
        const at::Tensor& tt = t;
        if (tt.defined() && tt.device().type() == kNeuron) return tt.device().index();
      }
    } else if (v.isDevice() && v.toDevice().type() == kNeuron) {
      return v.toDevice().has_index() ? v.toDevice().index() : current_device();
    }
  }
  return -1;
}

// A view (an output aliasing an input without writing it) does no work on the device.
bool is_view(const at::RecordFunction& fn) {
  thread_local std::unordered_map<std::string, bool> cache;
  auto op = fn.operator_name();
  if (!op) return false;
  auto key = op->name + "." + op->overload_name;
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  bool view = false;
  if (auto schema = fn.operator_schema()) {
    for (const auto& ret : schema->returns())
      if (ret.alias_info() && !ret.alias_info()->isWrite()) view = true;
  }
  cache.emplace(key, view);
  return view;
}

std::unique_ptr<at::ObserverContext> on_enter(const at::RecordFunction& fn) {
  t_frames.push_back({now_ns(), neuron_device_of(fn)});
  return nullptr;
}

void on_exit(const at::RecordFunction& fn, at::ObserverContext*) {
  if (t_frames.empty()) return;  // entered before the session started
  Frame frame = t_frames.back();
  t_frames.pop_back();
  bool kernel = frame.device >= 0 && !frame.child_kernel && fn.scope() != at::RecordScope::USER_SCOPE &&
                !is_view(fn);
  if ((kernel || frame.child_kernel) && !t_frames.empty()) t_frames.back().child_kernel = true;
  if (!kernel) return;
  Kernel k{std::string(fn.name()) + " kernel", frame.start_ns, now_ns(), frame.device,
           t_correlation.empty() ? 0 : static_cast<int64_t>(t_correlation.back()),
           static_cast<int32_t>(libkineto::systemThreadId())};
  std::lock_guard<std::mutex> g(g_mu);
  g_kernels.push_back(std::move(k));
}

class Session final : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    {
      std::lock_guard<std::mutex> g(g_mu);
      g_kernels.clear();
    }
    handle_ = at::addGlobalCallback(at::RecordFunctionCallback(&on_enter, &on_exit).needsInputs(true));
    status_ = libkineto::TraceStatus::RECORDING;
  }
  void stop() override {
    if (handle_) at::removeCallback(handle_);
    handle_ = 0;
    status_ = libkineto::TraceStatus::PROCESSING;
  }
  std::vector<std::string> errors() override { return {}; }
  void pushCorrelationId(uint64_t id) override { t_correlation.push_back(id); }
  void popCorrelationId() override {
    if (!t_correlation.empty()) t_correlation.pop_back();
  }
  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, [](int32_t) -> const libkineto::ITraceActivity* { return nullptr; }, 0, 0);
  }
  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked,
                    int64_t, int64_t) override {
    std::vector<Kernel> kernels;
    {
      std::lock_guard<std::mutex> g(g_mu);
      kernels.swap(g_kernels);
    }
    buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    buffer_->span = libkineto::TraceSpan(0, 0, "neuron");
    buffer_->gpuOpCount = static_cast<int>(kernels.size());
    for (const auto& k : kernels) {
      buffer_->emplace_activity(buffer_->span, libkineto::ActivityType::CONCURRENT_KERNEL, k.name);
      auto& act = *buffer_->activities.back();
      act.startTime = k.start_ns;
      act.endTime = k.end_ns;
      act.id = static_cast<int32_t>(k.correlation);
      act.device = k.device;
      act.resource = 0;  // the core's one (synchronous) stream
      act.threadId = k.thread;
      act.linked = k.correlation ? linked(static_cast<int32_t>(k.correlation)) : nullptr;
      act.flow.id = k.correlation;
      act.flow.type = libkineto::kLinkAsyncCpuGpu;
      act.flow.start = false;
      act.addMetadataQuoted("device", "neuron:" + std::to_string(k.device));
      act.log(logger);
      devices_.insert(k.device);
    }
    status_ = libkineto::TraceStatus::READY;
  }
  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override { return nullptr; }
  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> out;
    for (int d : devices_) out.push_back({0, d, d, "neuron:" + std::to_string(d) + " stream 0"});
    return out;
  }
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return std::move(buffer_); }

 private:
  at::CallbackHandle handle_ = 0;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
  std::set<int> devices_;
};

class NeuronActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override { return activities_; }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<libkineto::ActivityType>& types,
                                                                 const libkineto::Config&) override {
    if (!types.count(libkineto::ActivityType::CONCURRENT_KERNEL)) return nullptr;
    return std::make_unique<Session>();
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t, int64_t,
                                                                 const std::set<libkineto::ActivityType>& types,
                                                                 const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_{"neuron"};
  std::set<libkineto::ActivityType> activities_{libkineto::ActivityType::CONCURRENT_KERNEL};
};

REGISTER_PRIVATEUSE1_PROFILER(NeuronActivityProfiler);

// The legacy profiler, torch.autograd.profiler.profile(use_device="neuron") without use_kineto, times each
// op with device events through these stubs (CUDA's record a cudaEvent on the stream at op entry and exit).
// The core runs kernels synchronously on the host, so an event is the time it was recorded and the device
// time between two is the wall time between them; without the stubs every op raised "PrivateUse1 used in
// profiler but not enabled" inside the profiler's callback and the table showed nonsense.
struct LegacyStubs final : torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device, torch::profiler::impl::ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    if (device) *device = static_cast<c10::DeviceIndex>(current_device());
    if (cpu_ns) *cpu_ns = c10::getTime();
    *event = std::make_shared<int64_t>(now_ns());
  }
  float elapsed(const torch::profiler::impl::ProfilerVoidEventStub* start,
                const torch::profiler::impl::ProfilerVoidEventStub* end) const override {
    if (!start || !end || !*start || !*end) return 0.f;
    auto ns = *static_cast<const int64_t*>(end->get()) - *static_cast<const int64_t*>(start->get());
    return static_cast<float>(ns) / 1000.f;  // microseconds, as CUDA's stubs return
  }
  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}
  bool enabled() const override { return true; }
  void onEachDevice(std::function<void(int)> op) const override { op(current_device()); }
  void synchronize() const override {}  // kernels have finished when their op returns
};

const bool g_legacy_stubs_registered = [] {
  static LegacyStubs stubs;
  torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  return true;
}();

} // namespace
} // namespace neuron::profiler
