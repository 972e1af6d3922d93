// RNG for neuron devices.
//
// Eager random ops on neuron draw from the CPU's default generator, as on Trainium, where TorchNeuron
// registers no random op and they take its CPU fallback (aten/native/Fallback.cpp leaves their generator
// argument unset). Each core's generator, as TorchNeuron's, holds a Philox-style state: a seed and an
// offset, 16 bytes (torch.neuron.get_rng_state), so a state saved here restores on Trainium and back.
// Its numbers serve bf16 stochastic rounding and random ops given an explicit neuron generator: each use
// takes the next offset and draws from a CPU engine seeded from (seed, offset), so the 16-byte state
// determines every later number.
#include "core/Generator.h"
#include "core/Device.h"
#include "runtime/Runtime.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/core/TensorImpl.h>

#include <cstring>
#include <deque>
#include <mutex>

namespace neuron {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

struct NeuronGenerator final : c10::GeneratorImpl {
  explicit NeuronGenerator(c10::DeviceIndex index, uint64_t seed = c10::default_rng_seed_val, uint64_t offset = 0)
      : c10::GeneratorImpl(c10::Device(kNeuron, index), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
        seed_(seed), offset_(offset), engine_(at::make_generator<at::CPUGeneratorImpl>(seed)) {}

  void set_current_seed(uint64_t seed) override {
    seed_ = seed;
    offset_ = 0;
  }
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override {
    uint64_t random = c10::detail::getNonDeterministicRandom(true);
    set_current_seed(random);
    return random;
  }
  // [seed: uint64][offset: int64], as TorchNeuron's (and CUDA's) Philox generators.
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    auto state = at::detail::empty_cpu({16}, at::kByte, std::nullopt, std::nullopt, std::nullopt, std::nullopt);
    auto* bytes = state.mutable_data_ptr<uint8_t>();
    const auto offset = static_cast<int64_t>(offset_);
    std::memcpy(bytes, &seed_, 8);
    std::memcpy(bytes + 8, &offset, 8);
    return state.getIntrusivePtr();
  }
  // 16 bytes, or 8 (a seed alone, offset 0), as TorchNeuron accepts.
  void set_state(const c10::TensorImpl& state) override {
    const auto n = state.numel();
    TORCH_CHECK(state.dtype() == at::kByte && (n == 16 || n == 8),
                "a neuron RNG state is a uint8 tensor of 16 bytes (seed, offset) or 8 (seed); got ", n,
                " elements of ", state.dtype().name(),
                ". (States saved by this plugin before it used TorchNeuron's format were 5056 bytes: they do not load.)");
    const auto* bytes = static_cast<const uint8_t*>(state.data());
    std::memcpy(&seed_, bytes, 8);
    int64_t offset = 0;
    if (n == 16) std::memcpy(&offset, bytes + 8, 8);
    offset_ = static_cast<uint64_t>(offset);
  }
  static c10::DeviceType device_type() { return kNeuron; }

  // The CPU engine of the next use: seeded from (seed, offset), then the offset moves on.
  at::Generator next_engine() {
    std::lock_guard<std::mutex> g(mutex_);
    {
      std::lock_guard<std::mutex> e(engine_.mutex());
      engine_.set_current_seed(splitmix64(seed_ ^ splitmix64(offset_)));
    }
    ++offset_;
    return engine_;
  }

 private:
  uint64_t seed_;
  uint64_t offset_;
  at::Generator engine_;

  NeuronGenerator* clone_impl() const override { return new NeuronGenerator(device_.index(), seed_, offset_); }
};

} // namespace

at::Generator host_engine(const at::Generator& gen) {
  auto* impl = dynamic_cast<NeuronGenerator*>(gen.unsafeGetGeneratorImpl());
  TORCH_CHECK(impl, "expected a neuron generator, got one for ", gen.device());
  return impl->next_engine();
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
