#include "vgpu/spill.hpp"

#include <algorithm>
#include <atomic>

#include <sched.h>

#include "common/log.hpp"
#include "vgpu/real_driver.hpp"

namespace hami::vgpu::spill {

using namespace hami::cuda;  // NOLINT

namespace {

// Once per process: an operator reading the log learns why it got slower.
void announce(const char* what, size_t bytes) {
  static std::atomic<bool> said{false};
  if (said.exchange(true, std::memory_order_relaxed)) return;
  log::warn(
      "the GPU has no room for a %s of %zu bytes within the container's limit: placing it and "
      "later ones in host memory (CUDA_OVERSUBSCRIBE); kernels reading them run at host-memory "
      "bandwidth",
      what, bytes);
}

// CUDA 12.2+ drivers name locations (and CUDA 13's cuda.h knows no other
// form); older ones take a device ordinal, CU_DEVICE_CPU for the host.
CUresult advise(const RealCuda& cu, CUdeviceptr p, size_t bytes, CUmem_advise advice,
                CUmemLocation where) {
  if (cu.cuMemAdvise_v2 != nullptr) return cu.cuMemAdvise_v2(p, bytes, advice, where);
  const CUdevice device = where.type == CU_MEM_LOCATION_TYPE_HOST ? CU_DEVICE_CPU : where.id;
  return call_real(cu.cuMemAdvise, p, bytes, advice, device);
}

}  // namespace

size_t reserve_for(size_t total) noexcept {
  return std::min<size_t>(size_t{1} << 30, total / 16);
}

bool leaves_too_little(size_t bytes, int ordinal) noexcept {
  const RealCuda& cu = real_cuda();
  if (ordinal >= 0) {
    CUdevice current = -1;
    if (cu.cuCtxGetDevice == nullptr || cu.cuCtxGetDevice(&current) != CUDA_SUCCESS ||
        current != ordinal) {
      return false;
    }
  }
  size_t free = 0;
  size_t total = 0;
  if (call_real(cu.cuMemGetInfo_v2, &free, &total) != CUDA_SUCCESS) return false;
  return free < bytes || free - bytes < reserve_for(total);
}

CUresult linear(CUdeviceptr* dptr, size_t bytes) noexcept {
  const RealCuda& cu = real_cuda();
  if (cu.cuMemAllocManaged == nullptr || dptr == nullptr ||
      (cu.cuMemAdvise == nullptr && cu.cuMemAdvise_v2 == nullptr)) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUdevice ordinal = -1;
  if (cu.cuCtxGetDevice == nullptr || cu.cuCtxGetDevice(&ordinal) != CUDA_SUCCESS) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUdeviceptr p = 0;
  CUresult rc = cu.cuMemAllocManaged(&p, bytes, CU_MEM_ATTACH_GLOBAL);
  if (rc != CUDA_SUCCESS) return rc;
  // Without its preferred location on the host, the driver would migrate the
  // pages to a GPU that has no room for them on first touch.
  rc = advise(cu, p, bytes, CU_MEM_ADVISE_SET_PREFERRED_LOCATION,
              CUmemLocation{CU_MEM_LOCATION_TYPE_HOST, 0});
  if (rc == CUDA_SUCCESS) {
    rc = advise(cu, p, bytes, CU_MEM_ADVISE_SET_ACCESSED_BY,
                CUmemLocation{CU_MEM_LOCATION_TYPE_DEVICE, ordinal});
  }
  if (rc != CUDA_SUCCESS) {
    log::error(
        "cannot place %zu bytes in host memory for device %d (cuMemAdvise: error %d); "
        "the allocation fails with out of memory",
        bytes, ordinal, rc);
    call_real(cu.cuMemFree_v2, p);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  announce("buffer", bytes);
  *dptr = p;
  return CUDA_SUCCESS;
}

CUresult vmm(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp& prop,
             unsigned long long flags) noexcept {
  const RealCuda& cu = real_cuda();
  // Host memory on the NUMA node of the CPU asking, else anywhere on the host;
  // first with the program's handle types and flags, then without them.
  // PyTorch asks for a file descriptor it exports only when a tensor is sent
  // to another process (driver 580 refuses that for the plain host location,
  // not for a NUMA node), and for flags that are device memory's: memory that
  // exists beats a handle or a flag nobody may use.
  unsigned cpu = 0;
  unsigned node = 0;
  if (getcpu(&cpu, &node) != 0) node = 0;
  const CUmemLocation places[] = {{CU_MEM_LOCATION_TYPE_HOST_NUMA, static_cast<int>(node)},
                                  {CU_MEM_LOCATION_TYPE_HOST, 0}};
  CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
  for (int plain = 0; plain < 2 && rc != CUDA_SUCCESS; ++plain) {
    CUmemAllocationProp host = prop;
    host.allocFlags.compressionType = 0;  // compression is device memory's
    if (plain == 1) {
      host.requestedHandleTypes = 0;
      host.allocFlags = {};
    }
    for (const CUmemLocation& place : places) {
      host.location = place;
      rc = call_real(cu.cuMemCreate, handle, size, &host, flags);
      if (rc == CUDA_SUCCESS) break;
    }
  }
  if (rc == CUDA_SUCCESS) {
    announce("memory handle", size);
  } else {
    log::error(
        "cannot place a memory handle of %zu bytes in host memory (cuMemCreate: error %d; "
        "asked for handle types %d, RDMA %d, usage %d, flags %llu); the allocation fails with "
        "out of memory",
        size, rc, prop.requestedHandleTypes, prop.allocFlags.gpuDirectRDMACapable,
        prop.allocFlags.usage, flags);
  }
  return rc;
}

CUresult free_stream_ordered(CUdeviceptr dptr, CUstream stream) noexcept {
  const RealCuda& cu = real_cuda();
  CUstreamCaptureStatus capturing = CU_STREAM_CAPTURE_STATUS_NONE;
  if (cu.cuStreamIsCapturing != nullptr &&
      cu.cuStreamIsCapturing(stream, &capturing) == CUDA_SUCCESS &&
      capturing != CU_STREAM_CAPTURE_STATUS_NONE) {
    log::error(
        "cuMemFreeAsync of host-placed memory (CUDA_OVERSUBSCRIBE) inside a stream "
        "capture is not supported; free it outside the capture");
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  const CUresult rc = call_real(cu.cuCtxSynchronize);
  if (rc != CUDA_SUCCESS) return rc;
  return call_real(cu.cuMemFree_v2, dptr);
}

}  // namespace hami::vgpu::spill
