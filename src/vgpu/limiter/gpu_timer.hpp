#pragma once
// GpuTimer: the one thing the limiter needs from the GPU, the time between two
// points of a stream as the GPU saw them. In libvgpu.so it is CUDA events
// (cuda_event_timer.hpp); the limiter's tests drive it from a simulated GPU.
//
//   Event a = timer.record(stream);   // before a launch
//   ... launch ...
//   bool idle = timer.reached(a);     // the GPU got to `a` before the launch arrived
//   Event b = timer.record(stream);   // after it
//   int64_t ns;
//   if (timer.elapsed(a, b, &ns) == GpuTimer::Poll::kReady) use(ns);
//   timer.release(a); timer.release(b);

#include <cstdint>

namespace hami::vgpu::limiter {

class GpuTimer {
 public:
  using Event = uintptr_t;  // 0: none
  enum class Poll { kPending, kReady, kFailed };

  virtual ~GpuTimer() = default;
  // Marks the current point of `stream`; 0 when no mark can be made (then
  // nothing is measured, and nothing else changes).
  virtual Event record(uintptr_t stream) noexcept = 0;
  // Whether the GPU has reached `e` already (false when it cannot be told).
  // Asked right after a launch that followed the mark: reached means the
  // stream was idle, and the mark holds the host's time to the launch too.
  virtual bool reached(Event e) noexcept = 0;
  // GPU time from `from` to `to` once `to` has been reached.
  virtual Poll elapsed(Event from, Event to, int64_t* ns) noexcept = 0;
  virtual void release(Event e) noexcept = 0;
};

}  // namespace hami::vgpu::limiter
