#pragma once
// CudaEventTimer: the limiter's GpuTimer on CUDA events. Events are created in
// the context current at the launch (a context's events can only be recorded
// on its own streams), pooled, and reused; they are never made in a context
// other than the one the sample's launch runs in, so a sample never crosses
// contexts. When a context goes away, its events go with it: forget_context()
// drops them without calling into the driver for a dead context.
//
//   CudaEventTimer timer;
//   LaunchLimiter lim(options, timer);

#include <array>
#include <cstdint>
#include <mutex>

#include "vgpu/cuda_abi.hpp"
#include "vgpu/limiter/gpu_timer.hpp"

namespace hami::vgpu {

class CudaEventTimer final : public limiter::GpuTimer {
 public:
  Event record(uintptr_t stream) noexcept override;
  Poll elapsed(Event from, Event to, int64_t* ns) noexcept override;
  void release(Event e) noexcept override;
  bool reached(Event e) noexcept override;
  // Every event of `ctx` becomes unusable (nullptr: of every context).
  void forget_context(cuda::CUcontext ctx) noexcept;

 private:
  struct Slot {
    cuda::CUevent event = nullptr;
    cuda::CUcontext ctx = nullptr;
    uint32_t generation = 1;  // bumped when the slot's event is dropped
    bool in_use = false;
  };
  static constexpr size_t kSlots = 96;
  // Event handles carry slot and generation, so a stale one is recognised.
  static Event encode(size_t slot, uint32_t generation) {
    return (static_cast<Event>(generation) << 8) | (slot + 1);
  }
  Slot* decode(Event e) noexcept;  // nullptr when stale

  std::mutex mu_;
  std::array<Slot, kSlots> slots_{};
};

}  // namespace hami::vgpu
