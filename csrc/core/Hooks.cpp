// PrivateUse1 hooks: what ATen asks of an accelerator (availability, device
// count, generators, pinned memory, storage resize).
#include "core/Allocator.h"
#include "core/Device.h"
#include "core/Generator.h"
#include "runtime/Runtime.h"

#include <ATen/detail/PrivateUse1HooksInterface.h>

namespace neuron {

namespace {

struct NeuronHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return rt::device_count() > 0; }  // starts the runtime
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  void init() const override {}
  c10::DeviceIndex deviceCount() const override { return static_cast<c10::DeviceIndex>(rt::device_count()); }
  void setCurrentDevice(c10::DeviceIndex d) const override { set_current_device(d); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    auto old = current_device();
    set_current_device(d);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override { return exchangeDevice(d); }

  const at::Generator& getDefaultGenerator(c10::DeviceIndex index) const override {
    return default_generator(index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex index) const override { return new_generator(index); }

  at::Device getDeviceFromPtr(void* data) const override {
    int d = rt::device_of(data);
    TORCH_CHECK(d >= 0, "pointer ", data, " is not neuron device memory");
    return {kNeuron, static_cast<c10::DeviceIndex>(d)};
  }
  bool isPinnedPtr(const void* data) const override { return is_pinned(data); }
  c10::Allocator* getPinnedMemoryAllocator() const override { return pinned_allocator(); }

  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    resize_bytes(storage.unsafeGetStorageImpl(), newsize);
  }
};

struct Register {
  Register() { at::RegisterPrivateUse1HooksInterface(new NeuronHooks()); }
} g_register;

} // namespace
} // namespace neuron
