// libnvidia-ml.so.1 double: devices in physical order (NVML ignores
// CUDA_VISIBLE_DEVICES), memory as the shared simulator state has it, and
// per-process usage, optionally with untranslated PIDs.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>

#include "sim_core.hpp"
#include "vgpu/cuda_abi.hpp"

using namespace hami::cuda;  // NOLINT

namespace {

std::atomic<int> g_refs{0};

simgpu::Device* device(nvmlDevice_t h) {
  auto* d = reinterpret_cast<simgpu::Device*>(h);
  simgpu::State& st = simgpu::state();
  if (d < st.devices || d >= st.devices + st.device_count) return nullptr;
  return d;
}

int index_of(const simgpu::Device* d) {
  return static_cast<int>(d - simgpu::state().devices);
}

nvmlReturn_t ready() {
  if (simgpu::should_fail("nvml")) return NVML_ERROR_UNKNOWN;
  return g_refs.load() > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

}  // namespace

extern "C" {

nvmlReturn_t nvmlInit_v2() {
  if (simgpu::should_fail("nvmlInit_v2")) return NVML_ERROR_UNKNOWN;
  simgpu::state();
  ++g_refs;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlInit() {
  return nvmlInit_v2();
}
nvmlReturn_t nvmlInitWithFlags(unsigned int) {
  return nvmlInit_v2();
}

nvmlReturn_t nvmlShutdown() {
  if (g_refs.load() == 0) return NVML_ERROR_UNINITIALIZED;
  --g_refs;
  return NVML_SUCCESS;
}

const char* nvmlErrorString(nvmlReturn_t rc) {
  return rc == NVML_SUCCESS ? "Success" : "Error";
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (nvmlReturn_t rc = ready(); rc != NVML_SUCCESS) return rc;
  *count = simgpu::state().device_count;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* h) {
  if (nvmlReturn_t rc = ready(); rc != NVML_SUCCESS) return rc;
  if (index >= simgpu::state().device_count) return NVML_ERROR_INVALID_ARGUMENT;
  *h = reinterpret_cast<nvmlDevice_t>(&simgpu::state().devices[index]);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* h) {
  if (nvmlReturn_t rc = ready(); rc != NVML_SUCCESS) return rc;
  simgpu::State& st = simgpu::state();
  for (uint32_t i = 0; i < st.device_count; ++i) {
    if (std::strcmp(st.devices[i].uuid, uuid) == 0) {
      *h = reinterpret_cast<nvmlDevice_t>(&st.devices[i]);
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t h, char* uuid, unsigned int length) {
  if (nvmlReturn_t rc = ready(); rc != NVML_SUCCESS) return rc;
  simgpu::Device* d = device(h);
  if (d == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (std::strlen(d->uuid) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::snprintf(uuid, length, "%s", d->uuid);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t h, unsigned int* index) {
  if (nvmlReturn_t rc = ready(); rc != NVML_SUCCESS) return rc;
  simgpu::Device* d = device(h);
  if (d == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *index = static_cast<unsigned>(index_of(d));
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t h, char* name, unsigned int length) {
  if (nvmlReturn_t rc = ready(); rc != NVML_SUCCESS) return rc;
  simgpu::Device* d = device(h);
  if (d == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  std::snprintf(name, length, "%s", d->name);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t h, nvmlMemory_t* m) {
  if (nvmlReturn_t rc = ready(); rc != NVML_SUCCESS) return rc;
  simgpu::Device* d = device(h);
  if (d == nullptr || m == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  m->total = d->total;
  m->used = simgpu::device_used(index_of(d));
  m->free = m->total - m->used;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t h, nvmlMemory_v2_t* m) {
  if (nvmlReturn_t rc = ready(); rc != NVML_SUCCESS) return rc;
  simgpu::Device* d = device(h);
  if (d == nullptr || m == nullptr || m->version != nvmlMemory_v2)
    return NVML_ERROR_INVALID_ARGUMENT;
  m->total = d->total;
  m->reserved = 0;
  m->used = simgpu::device_used(index_of(d));
  m->free = m->total - m->used;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t h, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
  if (nvmlReturn_t rc = ready(); rc != NVML_SUCCESS) return rc;
  simgpu::Device* d = device(h);
  if (d == nullptr || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const int dev = index_of(d);
  unsigned n = 0;
  for (simgpu::Proc& p : simgpu::state().procs) {
    const int32_t pid = p.pid.load();
    const uint64_t used = pid > 0 ? p.used[dev].load() : 0;
    if (used == 0) continue;
    if (infos != nullptr && n < *count) {
      infos[n] = nvmlProcessInfo_t{static_cast<unsigned>(pid + simgpu::nvml_pid_offset()), used,
                                   0xFFFFFFFF, 0xFFFFFFFF};
    }
    ++n;
  }
  const bool fits = n <= *count;
  *count = n;
  return fits ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
}

}  // extern "C"
