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
// The GPU is not filled to the last byte first: when an allocation would leave
// the device less than a reserve (kReserve below), it goes to the host at once,
// because the driver needs device memory of its own later (streams, lazily
// loaded kernels, local memory) and fails those with errors programs do not
// survive (cuDNN: CUDNN_STATUS_INTERNAL_ERROR from a stream it could not make).
//
// Spilled memory stays in host memory until freed (docs/virtual-memory.md
// says what that costs).

#include <cstddef>

#include "vgpu/cuda_abi.hpp"

namespace hami::vgpu::spill {

// Device memory kept free for the driver: a sixteenth of the GPU, at most 1 GiB.
size_t reserve_for(size_t total) noexcept;

// Whether placing `bytes` on the current context's device would leave it less
// than its reserve (the driver's own free figure; false when it cannot say).
// `ordinal` >= 0 names the device the allocation is for: another device than
// the current context's is not judged (false).
bool leaves_too_little(size_t bytes, int ordinal = -1) noexcept;

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
