#pragma once
// This process's device memory as the driver itself reports it (NVML), for the
// allocations whose size we cannot know from their arguments: a context, a
// CUDA array. Sample before and after the driver call; the difference is what
// it committed. Where NVML does not list this process (a PID namespace it does
// not translate), the whole GPU's used memory stands in, which is exact unless
// another process allocates at that very moment.
//
//   auto before = probe.sample(rt, dev);
//   real_create(...);
//   uint64_t bytes = ProcessMemoryProbe::grown(before, probe.sample(rt, dev)).value_or(estimate);

#include <cstdint>
#include <mutex>
#include <optional>

#include "common/function_ref.hpp"
#include "vgpu/cuda_abi.hpp"

namespace hami::vgpu {

class Runtime;

class ProcessMemoryProbe {
 public:
  struct Sample {
    std::optional<uint64_t> process;  // this process on that GPU
    std::optional<uint64_t> device;   // the whole GPU's used memory
  };

  Sample sample(Runtime& rt, int index) noexcept;
  // What was committed between two samples; nullopt if NVML could not tell.
  static std::optional<uint64_t> grown(const Sample& before, const Sample& after) noexcept;
  // Runs `call` between two samples of device `index`, holding mutex(), and
  // returns what it committed (0 when it failed, *rc says, or when NVML
  // cannot tell).
  uint64_t measure(Runtime& rt, int index, FunctionRef<cuda::CUresult()> call,
                   cuda::CUresult* rc) noexcept;
  // Held by callers around sample-create-sample so two measurements in one
  // process do not count each other.
  std::mutex& mutex() noexcept { return measure_mu_; }
  void reset() noexcept;

 private:
  std::mutex measure_mu_;
  std::mutex init_mu_;
  bool tried_ = false;
  bool ready_ = false;
};

}  // namespace hami::vgpu
