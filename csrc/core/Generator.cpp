// RNG for neuron devices.
//
// Random kernels run on the host, and host kernels only accept a CPU
// generator. So each neuron generator owns a CPU generator (its "engine") that
// produces the numbers; the neuron generator is the user-facing handle, tagged
// with the neuron device, that forwards seed/state/offset to its engine. The
// fallback hands the engine to host kernels. The neuron stream of numbers is
// therefore the CPU stream for the same seed: results match CPU bit for bit.
#include "core/Generator.h"
#include "core/Device.h"
#include "runtime/Runtime.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <c10/core/GeneratorImpl.h>

#include <deque>
#include <mutex>

namespace neuron {
namespace {

struct NeuronGenerator final : c10::GeneratorImpl {
  explicit NeuronGenerator(c10::DeviceIndex index, at::Generator engine)
      : c10::GeneratorImpl(c10::Device(kNeuron, index), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
        engine_(std::move(engine)) {}
  explicit NeuronGenerator(c10::DeviceIndex index)
      : NeuronGenerator(index, at::make_generator<at::CPUGeneratorImpl>(c10::default_rng_seed_val)) {}

  void set_current_seed(uint64_t seed) override { engine_.set_current_seed(seed); }
  void set_offset(uint64_t offset) override { engine_.set_offset(offset); }
  uint64_t get_offset() const override { return engine_.get_offset(); }
  uint64_t current_seed() const override { return engine_.current_seed(); }
  uint64_t seed() override { return engine_.seed(); }
  void set_state(const c10::TensorImpl& state) override {
    engine_.set_state(at::Tensor(c10::intrusive_ptr<c10::TensorImpl>::reclaim_copy(
        const_cast<c10::TensorImpl*>(&state))));
  }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    return engine_.get_state().getIntrusivePtr();
  }
  static c10::DeviceType device_type() { return kNeuron; }

  at::Generator engine_;

 private:
  NeuronGenerator* clone_impl() const override {
    return new NeuronGenerator(device_.index(), engine_.clone());
  }
};

} // namespace

at::Generator host_engine(const at::Generator& gen) {
  auto* impl = dynamic_cast<NeuronGenerator*>(gen.unsafeGetGeneratorImpl());
  TORCH_CHECK(impl, "expected a neuron generator, got one for ", gen.device());
  return impl->engine_;
}

const at::Generator& default_generator(c10::DeviceIndex index) {
  static std::once_flag once;
  static std::deque<at::Generator>* gens = nullptr;
  std::call_once(once, [] {
    gens = new std::deque<at::Generator>();
    for (int i = 0; i < rt::device_count(); ++i)
      gens->push_back(at::make_generator<NeuronGenerator>(static_cast<c10::DeviceIndex>(i)));
  });
  if (index == -1) index = current_device();
  rt::check_device(index);
  return (*gens)[index];
}

at::Generator new_generator(c10::DeviceIndex index) {
  if (index == -1) index = current_device();
  rt::check_device(index);
  return at::make_generator<NeuronGenerator>(index);
}

} // namespace neuron
