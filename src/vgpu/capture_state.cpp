#include "vgpu/capture_state.hpp"

#include "vgpu/real_driver.hpp"

namespace hami::vgpu::capture {

namespace detail {
std::atomic<int> g_captures{0};
}

cuda::CUresult begun(cuda::CUresult rc) noexcept {
  if (rc == cuda::CUDA_SUCCESS) detail::g_captures.fetch_add(1, std::memory_order_relaxed);
  return rc;
}

cuda::CUresult ended(cuda::CUresult rc) noexcept {
  // The driver's answer for a stream that was not capturing: nothing ended.
  if (rc == cuda::CUDA_ERROR_ILLEGAL_STATE) return rc;
  int n = detail::g_captures.load(std::memory_order_relaxed);
  while (n > 0 && !detail::g_captures.compare_exchange_weak(n, n - 1, std::memory_order_relaxed)) {
  }
  return rc;
}

bool stream_capturing(cuda::CUstream s, bool ptsz) noexcept {
  const auto& cu = real_cuda();
  auto is_capturing = ptsz ? cu.cuStreamIsCapturing_ptsz : cu.cuStreamIsCapturing;
  cuda::CUstreamCaptureStatus status = cuda::CU_STREAM_CAPTURE_STATUS_NONE;
  if (is_capturing == nullptr || is_capturing(s, &status) != cuda::CUDA_SUCCESS) return true;
  return status != cuda::CU_STREAM_CAPTURE_STATUS_NONE;
}

RelaxedMode::RelaxedMode() noexcept {
  if (!active()) return;
  const auto& cu = real_cuda();
  if (cu.cuThreadExchangeStreamCaptureMode == nullptr) return;
  previous_ = cuda::CU_STREAM_CAPTURE_MODE_RELAXED;
  swapped_ = cu.cuThreadExchangeStreamCaptureMode(&previous_) == cuda::CUDA_SUCCESS;
}

RelaxedMode::~RelaxedMode() {
  if (swapped_) real_cuda().cuThreadExchangeStreamCaptureMode(&previous_);
}

}  // namespace hami::vgpu::capture
