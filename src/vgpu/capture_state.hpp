#pragma once
// Stream captures under way in this process, and a guard that keeps the
// library's own driver calls from breaking them.
//
// While a stream captures, the driver refuses "potentially unsafe" calls
// (cuMemAlloc, cuEventQuery, cuMemPoolGetAttribute, cuCtxSetLimit, ...) from
// the capturing thread, and from every thread for a capture in global mode,
// and invalidates the capture (tests/gpu/results/driver-facts-h100.txt lists
// what driver 580 allows). A call the program makes is the program's
// business; one the library adds must never cost the program its capture.
// So, while any capture is under way, the library's own queries run with the
// calling thread's capture interaction mode set to relaxed (as PyTorch does
// around cudaMalloc), and work that a capture cannot take (timing samples)
// is skipped.
//
//   capture::begun(rc);                   // in the cuStreamBeginCapture hooks
//   if (capture::active() && capture::stream_capturing(s, ptsz)) return real();
//   { capture::RelaxedMode relaxed; real.cuMemPoolGetAttribute(...); }

#include <atomic>

#include "vgpu/cuda_abi.hpp"

namespace hami::vgpu::capture {

namespace detail {
extern std::atomic<int> g_captures;
}

// Whether any stream of this process may be capturing (one load).
inline bool active() noexcept {
  return detail::g_captures.load(std::memory_order_relaxed) != 0;
}

// Counts a capture that began (rc == CUDA_SUCCESS) or ended (any answer but
// "not capturing"); returns rc.
cuda::CUresult begun(cuda::CUresult rc) noexcept;
cuda::CUresult ended(cuda::CUresult rc) noexcept;

// Whether stream `s` captures now; when the driver cannot say, true (the
// caller then keeps out of the way).
bool stream_capturing(cuda::CUstream s, bool ptsz) noexcept;

// Sets this thread's capture interaction mode to relaxed for its lifetime,
// only while a capture is under way (otherwise it costs one load).
class RelaxedMode {
 public:
  RelaxedMode() noexcept;
  ~RelaxedMode();
  RelaxedMode(const RelaxedMode&) = delete;
  RelaxedMode& operator=(const RelaxedMode&) = delete;

 private:
  bool swapped_ = false;
  cuda::CUstreamCaptureMode previous_ = cuda::CU_STREAM_CAPTURE_MODE_GLOBAL;
};

}  // namespace hami::vgpu::capture
