// The virtual GPU: what the container may use looks like the whole device.
// For a device with a limit, every API reports
//   total = min(limit, physical total)
//   used  = the container's charged usage (all its processes)
//   free  = min(total - used, physically free)   (never below zero)
// so cuMemGetInfo, cuDeviceTotalMem, nvmlDeviceGetMemoryInfo (v1, v2) and
// nvidia-smi agree. Devices without a limit report the driver's own numbers.
// Under CUDA_OVERSUBSCRIBE the limit is the device's size whatever the GPU
// holds (total = limit, free = total - used): what does not fit is spilled.
#include <algorithm>
#include <type_traits>

#include "vgpu/hook_decls.hpp"
#include "vgpu/real_driver.hpp"
#include "vgpu/runtime.hpp"

namespace hami::cuda {
namespace {

using vgpu::Runtime;

struct View {
  uint64_t total;
  uint64_t used;
  uint64_t free;
};

View virtual_view(uint64_t limit, uint64_t usage, uint64_t real_total, uint64_t real_free,
                  bool oversubscribe) {
  View v;
  v.total = oversubscribe ? limit : std::min(limit, real_total);
  v.used = std::min(usage, v.total);
  v.free = oversubscribe ? v.total - v.used : std::min(v.total - v.used, real_free);
  return v;
}

// NVML v1 and v2 differ only in v2's `reserved`, which is the driver's and
// outside the container's share.
template <class Memory>
nvmlReturn_t nvml_memory_info(nvmlReturn_t (*real)(nvmlDevice_t, Memory*), nvmlDevice_t device,
                              Memory* memory) {
  if (real == nullptr) return NVML_ERROR_FUNCTION_NOT_FOUND;
  const nvmlReturn_t rc = real(device, memory);
  Runtime* rt = Runtime::accounting();
  if (rc != NVML_SUCCESS || rt == nullptr || memory == nullptr) return rc;
  const int dev = rt->devices().index_for_nvml(device);
  const uint64_t limit = rt->limit(dev);
  if (limit == 0) return rc;
  rt->pools().shrink_all(*rt);
  rt->settle(dev);  // may find a resized limit, which the next query shows
  const View v =
      virtual_view(limit, rt->usage(dev), memory->total, memory->free, rt->oversubscribe());
  memory->total = v.total;
  memory->used = v.used;
  memory->free = v.free;
  if constexpr (std::is_same_v<Memory, nvmlMemory_v2_t>) memory->reserved = 0;
  return rc;
}

}  // namespace

extern "C" {

CUresult cuMemGetInfo_v2(size_t* free, size_t* total) noexcept {
  const auto& cu = vgpu::real_cuda();
  if (cu.cuMemGetInfo_v2 == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  const CUresult rc = cu.cuMemGetInfo_v2(free, total);
  Runtime* rt = Runtime::accounting();
  if (rc != CUDA_SUCCESS || rt == nullptr || free == nullptr || total == nullptr) return rc;
  const int dev = rt->current_device(nullptr);
  const uint64_t limit = rt->limit(dev);
  if (limit == 0) return rc;
  rt->pools().shrink_all(*rt);  // pools release memory at synchronisations we do not see
  rt->settle(dev);              // may find a resized limit
  const uint64_t now_limit = rt->limit(dev);
  if (now_limit == 0) return rc;
  const View v = virtual_view(now_limit, rt->usage(dev), *total, *free, rt->oversubscribe());
  *total = v.total;
  *free = v.free;
  return rc;
}

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) noexcept {
  const auto& cu = vgpu::real_cuda();
  if (cu.cuDeviceTotalMem_v2 == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  const CUresult rc = cu.cuDeviceTotalMem_v2(bytes, dev);
  Runtime* rt = Runtime::accounting();
  if (rc != CUDA_SUCCESS || rt == nullptr || bytes == nullptr) return rc;
  const uint64_t limit = rt->limit(rt->devices().index_for_ordinal(dev));
  if (limit != 0) *bytes = rt->oversubscribe() ? limit : std::min<uint64_t>(limit, *bytes);
  return rc;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) noexcept {
  return nvml_memory_info(vgpu::real_nvml().nvmlDeviceGetMemoryInfo, device, memory);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) noexcept {
  return nvml_memory_info(vgpu::real_nvml().nvmlDeviceGetMemoryInfo_v2, device, memory);
}

}  // extern "C"
}  // namespace hami::cuda
