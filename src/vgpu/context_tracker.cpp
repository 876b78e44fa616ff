#include "vgpu/context_tracker.hpp"

#include <unistd.h>

#include <vector>

#include "common/bytes.hpp"
#include "common/log.hpp"
#include "vgpu/real_driver.hpp"
#include "vgpu/runtime.hpp"

namespace hami::vgpu {

using namespace hami::cuda;  // NOLINT

ContextTracker::Sample ContextTracker::sample(Runtime& rt, int index) noexcept {
  Sample s;
  if (index < 0 || !nvml_available()) return s;
  const RealNvml& nv = real_nvml();
  if (!nvml_tried_) {
    nvml_tried_ = true;
    // Kept initialised for the process's life: NVML counts init/shutdown pairs.
    nvml_ready_ = nv.nvmlInit_v2() == NVML_SUCCESS;
  }
  if (!nvml_ready_) return s;
  nvmlDevice_t h = nullptr;
  if (nv.nvmlDeviceGetHandleByUUID(rt.devices().uuid(index).c_str(), &h) != NVML_SUCCESS) return s;
  if (nv.nvmlDeviceGetMemoryInfo) {
    nvmlMemory_t m{};
    if (nv.nvmlDeviceGetMemoryInfo(h, &m) == NVML_SUCCESS) s.device = m.used;
  }
  if (nv.nvmlDeviceGetComputeRunningProcesses_v3) {
    try {
      std::vector<nvmlProcessInfo_t> procs(64);
      unsigned n = static_cast<unsigned>(procs.size());
      nvmlReturn_t rc = nv.nvmlDeviceGetComputeRunningProcesses_v3(h, &n, procs.data());
      if (rc == NVML_ERROR_INSUFFICIENT_SIZE) {
        procs.resize(n + 16);
        n = static_cast<unsigned>(procs.size());
        rc = nv.nvmlDeviceGetComputeRunningProcesses_v3(h, &n, procs.data());
      }
      if (rc == NVML_SUCCESS) {
        const auto me = static_cast<unsigned>(::getpid());
        const auto host = static_cast<unsigned>(rt.own_host_pid());
        s.process = 0;  // listed or not, NVML answered: absent means nothing yet
        bool found = false;
        for (unsigned i = 0; i < n && i < procs.size(); ++i) {
          if (procs[i].pid == me || (host != 0 && procs[i].pid == host)) {
            s.process = *s.process + procs[i].usedGpuMemory;
            found = true;
          }
        }
        if (!found) s.process.reset();
      }
    } catch (...) {
    }
  }
  return s;
}

uint64_t ContextTracker::context_bytes(const Sample& before, const Sample& after) noexcept {
  // Per process is exact; "absent before, present after" is a fresh process.
  if (after.process) {
    const uint64_t b = before.process.value_or(0);
    return *after.process > b ? *after.process - b : 0;
  }
  if (before.device && after.device) {
    return *after.device > *before.device ? *after.device - *before.device : 0;
  }
  return 0;
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
  const Sample before = sample(rt, index);
  const CUresult rc = real_retain(pctx, dev);
  if (rc != CUDA_SUCCESS) return rc;
  const uint64_t bytes = context_bytes(before, sample(rt, index));
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
  const Sample before = sample(rt, index);
  const CUresult rc = create();
  if (rc != CUDA_SUCCESS || pctx == nullptr || *pctx == nullptr) return rc;
  const uint64_t bytes = context_bytes(before, sample(rt, index));
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
  nvml_ready_ = false;
  nvml_tried_ = false;
}

}  // namespace hami::vgpu
