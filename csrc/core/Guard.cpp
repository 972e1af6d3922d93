// Device guard: current device per thread, streams and events.
//
// Emulated kernels run synchronously on the calling thread, so every stream is
// always idle and an event is complete as soon as it is recorded. Streams and
// events still exist and behave per the CUDA contract (ids, current stream per
// device, event timing), because FSDP2, autograd and DataLoader use them.
#include "core/Device.h"
#include "runtime/Runtime.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <array>
#include <atomic>
#include <chrono>

namespace neuron {
namespace {

thread_local c10::DeviceIndex t_current_device = -1;  // -1: the process default (a launched rank's own core)

constexpr int kMaxDevices = 512;
constexpr int kStreamsPerPool = 32;
thread_local std::array<c10::StreamId, kMaxDevices> t_current_stream{};  // 0 = default stream
std::atomic<uint32_t> g_next_stream{0};

struct Event {
  c10::DeviceIndex device;
  std::chrono::steady_clock::time_point when;
  bool recorded = false;
};

struct NeuronGuardImpl final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kNeuron; }

  c10::Device exchangeDevice(c10::Device d) const override {
    auto old = getDevice();
    if (d.index() != old.index()) setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return {kNeuron, current_device()}; }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kNeuron, "expected a neuron device, got ", d);
    set_current_device(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override { t_current_device = d.index(); }

  c10::Stream getStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::UNSAFE, d, t_current_stream[d.index()]);
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool /*high_priority*/) const override {
    auto id = static_cast<c10::StreamId>(1 + g_next_stream++ % kStreamsPerPool);
    return c10::Stream(c10::Stream::UNSAFE, d, id);
  }
  c10::Stream getNewStream(c10::Device d, int priority) const override {
    return getStreamFromGlobalPool(d, priority < 0);
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    auto old = getStream(s.device());
    t_current_stream[s.device_index()] = s.id();
    return old;
  }

  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    delete static_cast<Event*>(event);
  }
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
                "Event device index ", device_index, " does not match recording stream's device index ",
                stream.device_index(), ".");
    auto* e = static_cast<Event*>(*event);
    if (!e) {
      e = new Event{stream.device_index()};
      *event = e;
    }
    e->when = std::chrono::steady_clock::now();
    e->recorded = true;
  }
  void block(void*, const c10::Stream&) const override {}  // the work before it is already done
  bool queryEvent(void*) const override { return true; }
  void synchronizeEvent(void*) const override {}
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    auto* a = static_cast<Event*>(start);
    auto* b = static_cast<Event*>(end);
    TORCH_CHECK(a && b && a->recorded && b->recorded,
                "Both events must be recorded before calculating elapsed time.");
    return std::chrono::duration<double, std::milli>(b->when - a->when).count();
  }

  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(rt::device_count());
  }
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream& s) const override { rt::synchronize(s.device_index()); }
  void synchronizeDevice(const c10::DeviceIndex d) const override { rt::synchronize(d); }
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}
};

} // namespace

c10::DeviceIndex current_device() {
  return t_current_device >= 0 ? t_current_device : static_cast<c10::DeviceIndex>(rt::default_device());
}

void set_current_device(c10::DeviceIndex index) {
  rt::check_device(index);
  rt::check_attached(index);  // a launched rank may not make a sibling rank's core current
  t_current_device = index;
}

C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuardImpl);

} // namespace neuron
