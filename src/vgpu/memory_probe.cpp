#include "vgpu/memory_probe.hpp"

#include <unistd.h>

#include <new>
#include <vector>

#include "vgpu/real_driver.hpp"
#include "vgpu/runtime.hpp"

namespace hami::vgpu {

using namespace hami::cuda;  // NOLINT

ProcessMemoryProbe::Sample ProcessMemoryProbe::sample(Runtime& rt, int index) noexcept {
  Sample s;
  if (index < 0 || !nvml_available()) return s;
  const RealNvml& nv = real_nvml();
  {
    std::lock_guard lock(init_mu_);
    if (!tried_) {
      tried_ = true;
      // Kept initialised for the process's life: NVML counts init/shutdown pairs.
      ready_ = nv.nvmlInit_v2() == NVML_SUCCESS;
    }
  }
  if (!ready_) return s;
  nvmlDevice_t h = nullptr;
  if (nv.nvmlDeviceGetHandleByUUID(rt.devices().uuid(index).c_str(), &h) != NVML_SUCCESS) return s;
  if (nv.nvmlDeviceGetMemoryInfo != nullptr) {
    nvmlMemory_t m{};
    if (nv.nvmlDeviceGetMemoryInfo(h, &m) == NVML_SUCCESS) s.device = m.used;
  }
  if (nv.nvmlDeviceGetComputeRunningProcesses_v3 == nullptr) return s;
  try {
    std::vector<nvmlProcessInfo_t> procs(64);
    unsigned n = static_cast<unsigned>(procs.size());
    nvmlReturn_t rc = nv.nvmlDeviceGetComputeRunningProcesses_v3(h, &n, procs.data());
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE) {
      procs.resize(n + 16);
      n = static_cast<unsigned>(procs.size());
      rc = nv.nvmlDeviceGetComputeRunningProcesses_v3(h, &n, procs.data());
    }
    if (rc != NVML_SUCCESS) return s;
    const auto me = static_cast<unsigned>(::getpid());
    const auto host = static_cast<unsigned>(rt.own_host_pid());
    for (unsigned i = 0; i < n && i < procs.size(); ++i) {
      if (procs[i].pid == me || (host != 0 && procs[i].pid == host)) {
        s.process = s.process.value_or(0) + procs[i].usedGpuMemory;
      }
    }
  } catch (const std::bad_alloc&) {
  }
  return s;
}

uint64_t ProcessMemoryProbe::measure(Runtime& rt, int index, FunctionRef<CUresult()> call,
                                     CUresult* rc) noexcept {
  std::lock_guard lock(measure_mu_);
  const Sample before = sample(rt, index);
  *rc = call();
  if (*rc != CUDA_SUCCESS) return 0;
  return grown(before, sample(rt, index)).value_or(0);
}

std::optional<uint64_t> ProcessMemoryProbe::grown(const Sample& before,
                                                  const Sample& after) noexcept {
  // Listed after: exact ("absent before" is a process that had nothing yet).
  if (after.process) {
    const uint64_t b = before.process.value_or(0);
    return *after.process > b ? *after.process - b : 0;
  }
  if (before.device && after.device) {
    return *after.device > *before.device ? *after.device - *before.device : 0;
  }
  return std::nullopt;
}

void ProcessMemoryProbe::reset() noexcept {
  new (&measure_mu_) std::mutex();  // a parent thread may have held them at fork
  new (&init_mu_) std::mutex();
  tried_ = false;
  ready_ = false;
}

}  // namespace hami::vgpu
