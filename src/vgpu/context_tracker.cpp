#include "vgpu/context_tracker.hpp"

#include "common/bytes.hpp"
#include "common/log.hpp"
#include "vgpu/real_driver.hpp"
#include "vgpu/runtime.hpp"

namespace hami::vgpu {

using namespace hami::cuda;  // NOLINT

uint64_t ContextTracker::measured(Runtime& rt, int index, FunctionRef<CUresult()> create,
                                  CUresult* rc) noexcept {
  std::lock_guard lock(rt.probe().mutex());
  const auto before = rt.probe().sample(rt, index);
  *rc = create();
  if (*rc != CUDA_SUCCESS) return 0;
  // Without NVML the context cannot be measured; it goes uncharged (docs/libvgpu.md).
  return ProcessMemoryProbe::grown(before, rt.probe().sample(rt, index)).value_or(0);
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
  return rc;
}

void ContextTracker::reset() noexcept {
  new (&mu_) std::mutex();  // a parent thread may have held it at fork
  primary_.fill(Primary{});
  created_.clear();
}

}  // namespace hami::vgpu
