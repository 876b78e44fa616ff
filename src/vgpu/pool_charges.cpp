#include "vgpu/pool_charges.hpp"

#include <new>

#include "vgpu/capture_state.hpp"
#include "vgpu/real_driver.hpp"
#include "vgpu/runtime.hpp"

namespace hami::vgpu {
namespace {

bool reserved_of(cuda::CUmemoryPool pool, uint64_t* out) {
  const auto& cu = real_cuda();
  if (cu.cuMemPoolGetAttribute == nullptr) return false;
  // The driver counts this query as unsafe during a capture: it must not
  // invalidate one (capture_state.hpp).
  capture::RelaxedMode relaxed;
  cuda::cuuint64_t v = 0;
  if (cu.cuMemPoolGetAttribute(pool, cuda::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v) !=
      cuda::CUDA_SUCCESS) {
    return false;
  }
  *out = v;
  return true;
}

}  // namespace

PoolCharges::Outcome PoolCharges::reconcile(Runtime& rt, cuda::CUmemoryPool pool, int dev,
                                            bool may_refuse) noexcept {
  uint64_t reserved = 0;
  if (!reserved_of(pool, &reserved)) return kUnsupported;
  std::lock_guard lock(mu_);
  Pool* p = nullptr;
  try {
    p = &pools_[pool];
  } catch (const std::bad_alloc&) {
    return kUnsupported;
  }
  if (p->device < 0) p->device = dev;
  any_.store(true, std::memory_order_release);
  if (reserved > p->charged) {
    if (!rt.reserve(p->device, region::UsageKind::kData, reserved - p->charged)) {
      if (may_refuse) return kRefused;
      // Already committed by the driver (a free cannot be undone): record it.
      rt.force_charge(p->device, region::UsageKind::kData, reserved - p->charged);
    }
  } else {
    rt.release(p->device, region::UsageKind::kData, p->charged - reserved);
  }
  p->charged = reserved;
  return kCharged;
}

bool PoolCharges::shrink_all(Runtime& rt) noexcept {
  if (!any_.load(std::memory_order_acquire)) return false;
  std::lock_guard lock(mu_);
  bool shrank = false;
  for (auto& [pool, p] : pools_) {
    uint64_t reserved = 0;
    if (reserved_of(pool, &reserved) && reserved < p.charged) {
      rt.release(p.device, region::UsageKind::kData, p.charged - reserved);
      p.charged = reserved;
      shrank = true;
    }
  }
  return shrank;
}

void PoolCharges::forget(Runtime& rt, cuda::CUmemoryPool pool) noexcept {
  std::lock_guard lock(mu_);
  auto it = pools_.find(pool);
  if (it == pools_.end()) return;
  rt.release(it->second.device, region::UsageKind::kData, it->second.charged);
  pools_.erase(it);
}

void PoolCharges::reset() noexcept {
  new (&mu_) std::recursive_mutex();
  pools_.clear();
  any_.store(false);
}

}  // namespace hami::vgpu
