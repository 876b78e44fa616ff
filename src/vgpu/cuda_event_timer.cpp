#include "vgpu/cuda_event_timer.hpp"

#include "vgpu/real_driver.hpp"

namespace hami::vgpu {

using cuda::CUcontext;
using cuda::CUDA_SUCCESS;

CudaEventTimer::Slot* CudaEventTimer::decode(Event e) noexcept {
  const size_t slot = static_cast<size_t>(e & 0xff);
  if (slot == 0 || slot > kSlots) return nullptr;
  Slot& s = slots_[slot - 1];
  return s.generation == static_cast<uint32_t>(e >> 8) && s.event != nullptr ? &s : nullptr;
}

limiter::GpuTimer::Event CudaEventTimer::record(uintptr_t stream) noexcept {
  const RealCuda& cu = real_cuda();
  if (cu.cuCtxGetCurrent == nullptr || cu.cuEventCreate == nullptr || cu.cuEventRecord == nullptr)
    return 0;
  CUcontext ctx = nullptr;
  if (cu.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || ctx == nullptr) return 0;
  std::lock_guard lock(mu_);
  Slot* pick = nullptr;
  size_t index = 0;
  for (size_t i = 0; i < kSlots; ++i) {
    Slot& s = slots_[i];
    if (s.in_use) continue;
    if (s.event != nullptr && s.ctx == ctx) {
      pick = &s;
      index = i;
      break;
    }
    if (s.event == nullptr && pick == nullptr) {
      pick = &s;
      index = i;
    }
  }
  if (pick == nullptr) return 0;
  if (pick->event == nullptr) {
    if (cu.cuEventCreate(&pick->event, cuda::CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
      pick->event = nullptr;
      return 0;
    }
    pick->ctx = ctx;
  }
  if (cu.cuEventRecord(pick->event, reinterpret_cast<cuda::CUstream>(stream)) != CUDA_SUCCESS) {
    // Most likely its context is gone (a primary context released to zero);
    // the handle is not ours to destroy then, so the slot is simply dropped.
    *pick = Slot{nullptr, nullptr, pick->generation + 1, false};
    return 0;
  }
  pick->in_use = true;
  return encode(index, pick->generation);
}

limiter::GpuTimer::Poll CudaEventTimer::elapsed(Event from, Event to, int64_t* ns) noexcept {
  const RealCuda& cu = real_cuda();
  cuda::CUevent a = nullptr;
  cuda::CUevent b = nullptr;
  {
    std::lock_guard lock(mu_);
    Slot* sa = decode(from);
    Slot* sb = decode(to);
    if (sa == nullptr || sb == nullptr) return Poll::kFailed;
    a = sa->event;
    b = sb->event;
  }
  const cuda::CUresult q = call_real(cu.cuEventQuery, b);
  if (q == cuda::CUDA_ERROR_NOT_READY) return Poll::kPending;
  if (q != CUDA_SUCCESS) return Poll::kFailed;
  float ms = 0;
  auto elapsed_fn =
      cu.cuEventElapsedTime_v2 != nullptr ? cu.cuEventElapsedTime_v2 : cu.cuEventElapsedTime;
  if (call_real(elapsed_fn, &ms, a, b) != CUDA_SUCCESS || ms < 0) return Poll::kFailed;
  *ns = static_cast<int64_t>(static_cast<double>(ms) * 1e6);
  return Poll::kReady;
}

bool CudaEventTimer::reached(Event e) noexcept {
  cuda::CUevent ev = nullptr;
  {
    std::lock_guard lock(mu_);
    Slot* s = decode(e);
    if (s == nullptr) return false;
    ev = s->event;
  }
  return call_real(real_cuda().cuEventQuery, ev) == CUDA_SUCCESS;
}

void CudaEventTimer::release(Event e) noexcept {
  std::lock_guard lock(mu_);
  if (Slot* s = decode(e)) s->in_use = false;
}

void CudaEventTimer::forget_context(CUcontext ctx) noexcept {
  std::lock_guard lock(mu_);
  for (Slot& s : slots_) {
    if (s.event == nullptr || (ctx != nullptr && s.ctx != ctx)) continue;
    // The context and its events are gone; destroying them would be an error.
    s = Slot{nullptr, nullptr, s.generation + 1, false};
  }
}

}  // namespace hami::vgpu
