#include "vgpu/context_tracker.hpp"

#include <new>

#include "common/bytes.hpp"
#include "common/log.hpp"
#include "vgpu/real_driver.hpp"
#include "vgpu/runtime.hpp"

namespace hami::vgpu {

using namespace hami::cuda;  // NOLINT

uint64_t ContextTracker::measured(Runtime& rt, int index, FunctionRef<CUresult()> create,
                                  CUresult* rc) noexcept {
  // Without NVML the context cannot be measured; it goes uncharged (docs/libvgpu.md).
  return rt.probe().measure(rt, index, create, rc);
}

bool ContextTracker::charge(Runtime& rt, int index, uint64_t bytes) noexcept {
  if (bytes == 0) return true;
  if (rt.reserve(index, region::UsageKind::kContext, bytes)) {
    log::info("device %d: context charged %s", index, format_bytes(bytes).c_str());
    return true;
  }
  log::warn("device %d: a new CUDA context (%s) does not fit under the limit of %s; refused", index,
            format_bytes(bytes).c_str(), format_bytes(rt.limit(index)).c_str());
  return false;
}

CUresult ContextTracker::retain_primary(Runtime& rt, CUcontext* pctx, CUdevice dev,
                                        RetainFn real_retain, DeviceFn real_release) noexcept {
  if (dev < 0 || dev >= kMaxOrdinals) return real_retain(pctx, dev);
  const int index = rt.devices().index_for_ordinal(dev);
  std::lock_guard lock(mu_);
  Primary& p = primary_[dev];
  if (p.refs > 0) {
    const CUresult rc = real_retain(pctx, dev);
    if (rc == CUDA_SUCCESS) ++p.refs;
    return rc;
  }
  CUresult rc = CUDA_SUCCESS;
  const uint64_t bytes = measured(
      rt, index, [&] { return real_retain(pctx, dev); }, &rc);
  if (rc != CUDA_SUCCESS) return rc;
  if (!charge(rt, index, bytes)) {
    real_release(dev);
    if (pctx != nullptr) *pctx = nullptr;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  p.refs = 1;
  p.charged = Allocation{index, region::UsageKind::kContext, bytes};
  p.ctx = pctx != nullptr ? *pctx : nullptr;
  return rc;
}

CUresult ContextTracker::release_primary(Runtime& rt, CUdevice dev,
                                         DeviceFn real_release) noexcept {
  if (dev < 0 || dev >= kMaxOrdinals) return real_release(dev);
  std::lock_guard lock(mu_);
  const CUresult rc = real_release(dev);
  Primary& p = primary_[dev];
  if (rc == CUDA_SUCCESS && p.refs > 0 && --p.refs == 0) {
    rt.release(p.charged);
    release_limits(rt, p.ctx);
    p.charged = {};
  }
  return rc;
}

CUresult ContextTracker::reset_primary(Runtime& rt, CUdevice dev, DeviceFn real_reset) noexcept {
  if (dev < 0 || dev >= kMaxOrdinals) return real_reset(dev);
  std::lock_guard lock(mu_);
  const CUresult rc = real_reset(dev);
  Primary& p = primary_[dev];
  // Reset destroys the context and everything allocated in it, whatever the
  // retain count; the next retain creates (and is charged for) a new one.
  if (rc == CUDA_SUCCESS) {
    rt.release(p.charged);
    release_limits(rt, p.ctx);
    p = Primary{};
    rt.forget_allocations(rt.devices().index_for_ordinal(dev));
  }
  return rc;
}

CUresult ContextTracker::create(Runtime& rt, CUcontext* pctx, CUdevice dev,
                                FunctionRef<CUresult()> create, DestroyFn real_destroy) noexcept {
  const int index = rt.devices().index_for_ordinal(dev);
  std::lock_guard lock(mu_);
  CUresult rc = CUDA_SUCCESS;
  const uint64_t bytes = measured(rt, index, create, &rc);
  if (rc != CUDA_SUCCESS || pctx == nullptr || *pctx == nullptr) return rc;
  if (!charge(rt, index, bytes)) {
    real_destroy(*pctx);
    *pctx = nullptr;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  created_.insert(reinterpret_cast<uint64_t>(*pctx),
                  Allocation{index, region::UsageKind::kContext, bytes});
  return rc;
}

CUresult ContextTracker::destroy(Runtime& rt, CUcontext ctx, DestroyFn real_destroy) noexcept {
  const auto key = reinterpret_cast<uint64_t>(ctx);
  auto charged = created_.erase(key);
  const CUresult rc = real_destroy(ctx);
  if (rc != CUDA_SUCCESS) {
    if (charged) created_.insert(key, *charged);
    return rc;
  }
  if (charged) rt.release(*charged);
  std::lock_guard lock(mu_);
  release_limits(rt, ctx);
  return rc;
}

void ContextTracker::release_limits(Runtime& rt, CUcontext ctx) noexcept {
  auto it = limits_.find(ctx);
  if (it == limits_.end()) return;
  rt.release(it->second.device, region::UsageKind::kContext, it->second.stack + it->second.heap);
  limits_.erase(it);
}

CUresult ContextTracker::set_limit(Runtime& rt, CUlimit limit, size_t value,
                                   SetLimitFn real_set) noexcept {
  const auto& cu = real_cuda();
  CUcontext ctx = nullptr;
  CUdevice ordinal = -1;
  size_t now = 0;
  if ((limit != CU_LIMIT_STACK_SIZE && limit != CU_LIMIT_MALLOC_HEAP_SIZE) ||
      cu.cuCtxGetCurrent == nullptr || cu.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || ctx == nullptr ||
      cu.cuCtxGetLimit == nullptr || cu.cuCtxGetLimit(&now, limit) != CUDA_SUCCESS)
    return real_set(limit, value);
  const int index = rt.current_device(&ordinal);
  // Bytes per unit of the limit: the stack is per resident thread.
  uint64_t per_unit = 1;
  if (limit == CU_LIMIT_STACK_SIZE) {
    int sms = 0;
    int threads = 0;
    if (cu.cuDeviceGetAttribute == nullptr ||
        cu.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, ordinal) !=
            CUDA_SUCCESS ||
        cu.cuDeviceGetAttribute(&threads, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
                                ordinal) != CUDA_SUCCESS ||
        sms <= 0 || threads <= 0)
      return real_set(limit, value);
    per_unit = uint64_t(sms) * uint64_t(threads);
  }
  std::lock_guard lock(mu_);
  LimitCharges* lc = nullptr;
  try {
    auto [it, fresh] = limits_.try_emplace(ctx);
    lc = &it->second;
    if (fresh)
      *lc = LimitCharges{index, limit == CU_LIMIT_STACK_SIZE ? now : 0,
                         limit == CU_LIMIT_MALLOC_HEAP_SIZE ? now : 0, 0, 0};
  } catch (const std::bad_alloc&) {
    return real_set(limit, value);
  }
  size_t& start = limit == CU_LIMIT_STACK_SIZE ? lc->stack_start : lc->heap_start;
  if (start == 0) start = now;
  uint64_t& charged = limit == CU_LIMIT_STACK_SIZE ? lc->stack : lc->heap;
  uint64_t want = value > start ? (value - start) * per_unit : 0;
  // The driver keeps a heap it has made, whatever the limit says later.
  if (limit == CU_LIMIT_MALLOC_HEAP_SIZE && want < charged) want = charged;
  if (want > charged && !rt.reserve(index, region::UsageKind::kContext, want - charged)) {
    log::warn(
        "device %d: cuCtxSetLimit(%s, %zu) would take %s, more than the limit of %s allows; "
        "refused",
        index, limit == CU_LIMIT_STACK_SIZE ? "CU_LIMIT_STACK_SIZE" : "CU_LIMIT_MALLOC_HEAP_SIZE",
        value, format_bytes(want - charged).c_str(), format_bytes(rt.limit(index)).c_str());
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  const CUresult rc = real_set(limit, value);
  if (rc != CUDA_SUCCESS) {
    if (want > charged) rt.release(index, region::UsageKind::kContext, want - charged);
    return rc;
  }
  if (want < charged) rt.release(index, region::UsageKind::kContext, charged - want);
  charged = want;
  return rc;
}

void ContextTracker::reset() noexcept {
  new (&mu_) std::mutex();  // a parent thread may have held it at fork
  primary_.fill(Primary{});
  created_.clear();
  limits_.clear();
}

}  // namespace hami::vgpu
