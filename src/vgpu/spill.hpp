#pragma once
// Virtual device memory (CUDA_OVERSUBSCRIBE=true, set by the device plugin when
// deviceMemoryScaling > 1): an allocation the container's limit allows but the
// GPU cannot back physically (the driver answered CUDA_ERROR_OUT_OF_MEMORY) is
// made again in host memory the GPU can use, and charged as before. The
// allocation hooks (memory_hooks.cpp) call these on that error path only, so a
// process without the variable runs exactly the code it ran before.
//
//   rc = real cuMemAlloc_v2(...);
//   if (rc == CUDA_ERROR_OUT_OF_MEMORY && rt->oversubscribe() &&
//       spill::linear(dptr, bytes) == CUDA_SUCCESS)  // charged, counted as spilled
//
// Spilled memory stays in host memory until freed (docs/libvgpu.md says what
// that costs).

#include <cstddef>

#include "vgpu/cuda_abi.hpp"

namespace hami::vgpu::spill {

// Linear memory (cuMemAlloc, cuMemAllocPitch, the stream-ordered allocators):
// managed memory whose preferred location is the host, mapped for the current
// context's device so its kernels reach it without page faults. The driver's
// error if that fails (then nothing is left allocated).
cuda::CUresult linear(cuda::CUdeviceptr* dptr, size_t bytes) noexcept;

// Virtual memory management (cuMemCreate; PyTorch's expandable segments): the
// same properties with the location moved to the host (CUDA 12.2+), which
// cuMemMap and cuMemSetAccess then map for the device as the program asks.
cuda::CUresult vmm(cuda::CUmemGenericAllocationHandle* handle, size_t size,
                   const cuda::CUmemAllocationProp& prop, unsigned long long flags) noexcept;

// cuMemFreeAsync of a spilled stream-ordered allocation: the memory is managed,
// not the pool's, so it is freed with cuMemFree once the context's queued work
// (which may still use it) is done. Inside a stream capture that cannot be
// recorded: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, nothing freed.
cuda::CUresult free_stream_ordered(cuda::CUdeviceptr dptr, cuda::CUstream stream) noexcept;

}  // namespace hami::vgpu::spill
