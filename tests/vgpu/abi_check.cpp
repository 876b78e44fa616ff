// Our ABI declarations (src/vgpu/cuda_abi.hpp, hooks.def) against the real
// cuda.h of an installed CUDA toolkit: struct sizes and offsets, constants,
// and every hooked or called function's parameter list (count, sizes,
// pointer-ness). Everything is checked at compile time; a mismatch does not build.
#include <array>
#include <cstddef>
#include <cstdio>
#include <type_traits>

#include "vgpu/cuda_abi.hpp"

// Our function types, generated from the one list, before cuda.h's macros
// (cuGetProcAddress -> cuGetProcAddress_v2, ...) can rename anything.
namespace ours {
using namespace hami::cuda;  // NOLINT
#define CU_HOOK(name, params) using name = CUresult(*) params;
#define CU_REAL(name, params) using name = CUresult(*) params;
#include "vgpu/hooks.def"
// Constants cuda.h spells as macros, captured before it is included.
constexpr unsigned kDeferredMapping = hami::cuda::CUDA_ARRAY3D_DEFERRED_MAPPING;
constexpr int kDeviceCpu = hami::cuda::CU_DEVICE_CPU;
}  // namespace ours

#include <cuda.h>
#undef cuGetProcAddress
#undef cuDevicePrimaryCtxRelease
#undef cuDevicePrimaryCtxReset
#undef cuMemAdvise
#undef cuGraphInstantiate

namespace {

template <class F>
struct Sig;
template <class R, class... A>
struct Sig<R (*)(A...)> {
  static constexpr size_t arity = sizeof...(A);
  static constexpr size_t ret = sizeof(R);
  static constexpr std::array<size_t, sizeof...(A)> sizes{sizeof(A)...};
  static constexpr std::array<bool, sizeof...(A)> pointers{std::is_pointer_v<A>...};
};

template <class A, class B>
constexpr bool same_abi() {
  if (Sig<A>::arity != Sig<B>::arity || Sig<A>::ret != Sig<B>::ret) return false;
  for (size_t i = 0; i < Sig<A>::arity; ++i) {
    if (Sig<A>::sizes[i] != Sig<B>::sizes[i] || Sig<A>::pointers[i] != Sig<B>::pointers[i]) {
      return false;
    }
  }
  return true;
}

#define SAME(ours_name, real_fn)                                   \
  static_assert(same_abi<ours::ours_name, decltype(&::real_fn)>(), \
                #ours_name " does not match cuda.h's " #real_fn);

SAME(cuGetProcAddress_v2, cuGetProcAddress_v2)
SAME(cuMemAlloc_v2, cuMemAlloc_v2)
SAME(cuMemAllocPitch_v2, cuMemAllocPitch_v2)
SAME(cuMemAllocManaged, cuMemAllocManaged)
SAME(cuMemFree_v2, cuMemFree_v2)
SAME(cuMemAllocAsync, cuMemAllocAsync)
SAME(cuMemAllocAsync_ptsz, cuMemAllocAsync)  // per-thread variants share the signature
SAME(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync)
SAME(cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync)
SAME(cuMemFreeAsync, cuMemFreeAsync)
SAME(cuMemFreeAsync_ptsz, cuMemFreeAsync)
SAME(cuMemCreate, cuMemCreate)
SAME(cuMemPoolTrimTo, cuMemPoolTrimTo)
SAME(cuMemPoolDestroy, cuMemPoolDestroy)
SAME(cuDeviceGetMemPool, cuDeviceGetMemPool)
SAME(cuMemPoolGetAttribute, cuMemPoolGetAttribute)
SAME(cuMemRelease, cuMemRelease)
SAME(cuArrayCreate_v2, cuArrayCreate_v2)
SAME(cuArray3DCreate_v2, cuArray3DCreate_v2)
SAME(cuArrayDestroy, cuArrayDestroy)
SAME(cuMipmappedArrayCreate, cuMipmappedArrayCreate)
SAME(cuMipmappedArrayDestroy, cuMipmappedArrayDestroy)
SAME(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain)
SAME(cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxRelease_v2)
SAME(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2)  // v1: same parameters
SAME(cuDevicePrimaryCtxReset_v2, cuDevicePrimaryCtxReset_v2)
SAME(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset_v2)
SAME(cuCtxCreate_v4, cuCtxCreate_v4)
SAME(cuCtxDestroy_v2, cuCtxDestroy_v2)
SAME(cuMemGetInfo_v2, cuMemGetInfo_v2)
SAME(cuDeviceTotalMem_v2, cuDeviceTotalMem_v2)
SAME(cuCtxGetDevice, cuCtxGetDevice)
SAME(cuDeviceGetCount, cuDeviceGetCount)
SAME(cuDeviceGetUuid_v2, cuDeviceGetUuid_v2)
SAME(cuPointerGetAttribute, cuPointerGetAttribute)
SAME(cuArrayGetMemoryRequirements, cuArrayGetMemoryRequirements)
SAME(cuMipmappedArrayGetMemoryRequirements, cuMipmappedArrayGetMemoryRequirements)
SAME(cuLaunchKernel, cuLaunchKernel)
SAME(cuLaunchKernel_ptsz, cuLaunchKernel)
SAME(cuLaunchKernelEx, cuLaunchKernelEx)
SAME(cuLaunchKernelEx_ptsz, cuLaunchKernelEx)
SAME(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel)
SAME(cuLaunchCooperativeKernel_ptsz, cuLaunchCooperativeKernel)
SAME(cuGraphLaunch, cuGraphLaunch)
SAME(cuGraphLaunch_ptsz, cuGraphLaunch)
SAME(cuGraphExecDestroy, cuGraphExecDestroy)
SAME(cuStreamBeginCapture_v2, cuStreamBeginCapture_v2)
SAME(cuStreamBeginCapture_v2_ptsz, cuStreamBeginCapture_v2)
SAME(cuStreamBeginCaptureToGraph, cuStreamBeginCaptureToGraph)
SAME(cuStreamBeginCaptureToGraph_ptsz, cuStreamBeginCaptureToGraph)
SAME(cuStreamEndCapture, cuStreamEndCapture)
SAME(cuStreamEndCapture_ptsz, cuStreamEndCapture)
SAME(cuCtxGetCurrent, cuCtxGetCurrent)
SAME(cuMemAdvise_v2, cuMemAdvise_v2)
SAME(cuCtxSynchronize, cuCtxSynchronize)
SAME(cuStreamIsCapturing, cuStreamIsCapturing)
SAME(cuStreamIsCapturing_ptsz, cuStreamIsCapturing)
SAME(cuEventCreate, cuEventCreate)
SAME(cuEventDestroy_v2, cuEventDestroy_v2)
SAME(cuEventRecord, cuEventRecord)
SAME(cuEventQuery, cuEventQuery)
SAME(cuEventElapsedTime_v2, cuEventElapsedTime_v2)
SAME(cuEventElapsedTime, cuEventElapsedTime_v2)  // v1: same parameters
SAME(cuMemMap, cuMemMap)
SAME(cuMemUnmap, cuMemUnmap)
SAME(cuMemImportFromShareableHandle, cuMemImportFromShareableHandle)
SAME(cuMemGetAllocationPropertiesFromHandle, cuMemGetAllocationPropertiesFromHandle)
SAME(cuCtxSetLimit, cuCtxSetLimit)
SAME(cuCtxGetLimit, cuCtxGetLimit)
SAME(cuDeviceGetAttribute, cuDeviceGetAttribute)
SAME(cuModuleLoad, cuModuleLoad)
SAME(cuModuleLoadData, cuModuleLoadData)
SAME(cuModuleLoadDataEx, cuModuleLoadDataEx)
SAME(cuModuleLoadFatBinary, cuModuleLoadFatBinary)
SAME(cuModuleUnload, cuModuleUnload)
SAME(cuLibraryLoadData, cuLibraryLoadData)
SAME(cuLibraryLoadFromFile, cuLibraryLoadFromFile)
SAME(cuLibraryUnload, cuLibraryUnload)
SAME(cuLibraryGetKernel, cuLibraryGetKernel)
SAME(cuKernelGetFunction, cuKernelGetFunction)
SAME(cuLibraryGetModule, cuLibraryGetModule)
SAME(cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags)
SAME(cuGraphInstantiateWithParams, cuGraphInstantiateWithParams)
SAME(cuGraphInstantiateWithParams_ptsz, cuGraphInstantiateWithParams)
SAME(cuGraphUpload, cuGraphUpload)
SAME(cuGraphUpload_ptsz, cuGraphUpload)
SAME(cuDeviceGraphMemTrim, cuDeviceGraphMemTrim)
SAME(cuDeviceGetGraphMemAttribute, cuDeviceGetGraphMemAttribute)
SAME(cuGraphGetNodes, cuGraphGetNodes)
SAME(cuGraphNodeGetType, cuGraphNodeGetType)
SAME(cuGraphMemAllocNodeGetParams, cuGraphMemAllocNodeGetParams)
SAME(cuGraphChildGraphNodeGetGraph, cuGraphChildGraphNodeGetGraph)
SAME(cuThreadExchangeStreamCaptureMode, cuThreadExchangeStreamCaptureMode)

// Prototypes that CUDA 13's cuda.h no longer declares (the driver still exports
// them for older binaries): the CUDA 12 signatures, spelled out.
using LegacyGetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t);
using LegacyCtxCreateV2 = CUresult (*)(CUcontext*, unsigned int, CUdevice);
using LegacyCtxCreateV3 = CUresult (*)(CUcontext*, CUexecAffinityParam*, int, unsigned int,
                                       CUdevice);
static_assert(same_abi<ours::cuGetProcAddress, LegacyGetProcAddress>());
static_assert(same_abi<ours::cuCtxCreate_v2, LegacyCtxCreateV2>());
static_assert(same_abi<ours::cuCtxCreate_v3, LegacyCtxCreateV3>());
// The ordinal form of cuMemAdvise, which CUDA 13 renames to the location form.
using LegacyMemAdvise = CUresult (*)(CUdeviceptr, size_t, CUmem_advise, CUdevice);
static_assert(same_abi<ours::cuMemAdvise, LegacyMemAdvise>());
// The CUDA 11 instantiation, still exported under both names.
using LegacyInstantiate = CUresult (*)(CUgraphExec*, CUgraph, CUgraphNode*, char*, size_t);
static_assert(same_abi<ours::cuGraphInstantiate, LegacyInstantiate>());
static_assert(same_abi<ours::cuGraphInstantiate_v2, LegacyInstantiate>());

namespace h = hami::cuda;

static_assert(sizeof(h::CUresult) == sizeof(::CUresult));
static_assert(sizeof(h::CUdevice) == sizeof(::CUdevice));
static_assert(sizeof(h::CUdeviceptr) == sizeof(::CUdeviceptr));
static_assert(std::is_same_v<h::CUcontext, ::CUcontext>);
static_assert(std::is_same_v<h::CUstream, ::CUstream>);
static_assert(std::is_same_v<h::CUarray, ::CUarray>);
static_assert(std::is_same_v<h::CUmipmappedArray, ::CUmipmappedArray>);
static_assert(std::is_same_v<h::CUmemoryPool, ::CUmemoryPool>);
static_assert(sizeof(h::CUmemGenericAllocationHandle) == sizeof(::CUmemGenericAllocationHandle));

static_assert(h::CUDA_SUCCESS == ::CUDA_SUCCESS);
static_assert(h::CUDA_ERROR_INVALID_VALUE == ::CUDA_ERROR_INVALID_VALUE);
static_assert(h::CUDA_ERROR_OUT_OF_MEMORY == ::CUDA_ERROR_OUT_OF_MEMORY);
static_assert(h::CUDA_ERROR_NOT_INITIALIZED == ::CUDA_ERROR_NOT_INITIALIZED);
static_assert(h::CUDA_ERROR_INVALID_DEVICE == ::CUDA_ERROR_INVALID_DEVICE);
static_assert(h::CUDA_ERROR_INVALID_CONTEXT == ::CUDA_ERROR_INVALID_CONTEXT);
static_assert(h::CUDA_ERROR_NOT_FOUND == ::CUDA_ERROR_NOT_FOUND);
static_assert(h::CUDA_ERROR_NOT_SUPPORTED == ::CUDA_ERROR_NOT_SUPPORTED);
static_assert(h::CU_GET_PROC_ADDRESS_DEFAULT == ::CU_GET_PROC_ADDRESS_DEFAULT);
static_assert(h::CU_GET_PROC_ADDRESS_LEGACY_STREAM == ::CU_GET_PROC_ADDRESS_LEGACY_STREAM);
static_assert(h::CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM ==
              ::CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
static_assert(h::CU_GET_PROC_ADDRESS_SUCCESS == ::CU_GET_PROC_ADDRESS_SUCCESS);
static_assert(h::CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND == ::CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
static_assert(h::CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT ==
              ::CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
static_assert(h::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL == ::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL);
static_assert(h::CU_MEM_LOCATION_TYPE_DEVICE == ::CU_MEM_LOCATION_TYPE_DEVICE);
static_assert(h::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT == ::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
static_assert(ours::kDeferredMapping == CUDA_ARRAY3D_DEFERRED_MAPPING);
static_assert(h::CU_MEM_LOCATION_TYPE_INVALID == ::CU_MEM_LOCATION_TYPE_INVALID);
static_assert(h::CU_MEM_LOCATION_TYPE_HOST == ::CU_MEM_LOCATION_TYPE_HOST);
static_assert(h::CU_MEM_ATTACH_GLOBAL == ::CU_MEM_ATTACH_GLOBAL);
static_assert(h::CU_MEM_ADVISE_SET_PREFERRED_LOCATION == ::CU_MEM_ADVISE_SET_PREFERRED_LOCATION);
static_assert(h::CU_MEM_ADVISE_SET_ACCESSED_BY == ::CU_MEM_ADVISE_SET_ACCESSED_BY);
static_assert(ours::kDeviceCpu == CU_DEVICE_CPU);
static_assert(h::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED == ::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);

static_assert(h::CUDA_ERROR_NOT_READY == ::CUDA_ERROR_NOT_READY);
static_assert(h::CU_EVENT_DEFAULT == ::CU_EVENT_DEFAULT);
static_assert(h::CU_STREAM_CAPTURE_STATUS_NONE == ::CU_STREAM_CAPTURE_STATUS_NONE);
static_assert(std::is_same_v<h::CUfunction, ::CUfunction>);
static_assert(std::is_same_v<h::CUevent, ::CUevent>);
static_assert(std::is_same_v<h::CUgraphExec, ::CUgraphExec>);
static_assert(sizeof(h::CUlaunchConfig) == sizeof(::CUlaunchConfig));
static_assert(offsetof(h::CUlaunchConfig, sharedMemBytes) ==
              offsetof(::CUlaunchConfig, sharedMemBytes));
static_assert(offsetof(h::CUlaunchConfig, hStream) == offsetof(::CUlaunchConfig, hStream));
static_assert(offsetof(h::CUlaunchConfig, numAttrs) == offsetof(::CUlaunchConfig, numAttrs));

static_assert(sizeof(h::CUuuid) == sizeof(::CUuuid));
static_assert(sizeof(h::CUmemLocation) == sizeof(::CUmemLocation));
static_assert(sizeof(h::CUmemAllocationProp) == sizeof(::CUmemAllocationProp));
static_assert(offsetof(h::CUmemAllocationProp, location) ==
              offsetof(::CUmemAllocationProp, location));
static_assert(offsetof(h::CUmemAllocationProp, allocFlags) ==
              offsetof(::CUmemAllocationProp, allocFlags));
static_assert(sizeof(h::CUDA_ARRAY_DESCRIPTOR) == sizeof(::CUDA_ARRAY_DESCRIPTOR));
static_assert(offsetof(h::CUDA_ARRAY_DESCRIPTOR, Format) ==
              offsetof(::CUDA_ARRAY_DESCRIPTOR, Format));
static_assert(offsetof(h::CUDA_ARRAY_DESCRIPTOR, NumChannels) ==
              offsetof(::CUDA_ARRAY_DESCRIPTOR, NumChannels));
static_assert(sizeof(h::CUDA_ARRAY3D_DESCRIPTOR) == sizeof(::CUDA_ARRAY3D_DESCRIPTOR));
static_assert(offsetof(h::CUDA_ARRAY3D_DESCRIPTOR, Depth) ==
              offsetof(::CUDA_ARRAY3D_DESCRIPTOR, Depth));
static_assert(offsetof(h::CUDA_ARRAY3D_DESCRIPTOR, Flags) ==
              offsetof(::CUDA_ARRAY3D_DESCRIPTOR, Flags));
static_assert(sizeof(h::CUDA_ARRAY_MEMORY_REQUIREMENTS) ==
              sizeof(::CUDA_ARRAY_MEMORY_REQUIREMENTS));
static_assert(std::is_same_v<h::CUmodule, ::CUmodule>);
static_assert(std::is_same_v<h::CUlibrary, ::CUlibrary>);
static_assert(std::is_same_v<h::CUkernel, ::CUkernel>);
static_assert(std::is_same_v<h::CUgraph, ::CUgraph>);
static_assert(std::is_same_v<h::CUgraphNode, ::CUgraphNode>);
static_assert(h::CUDA_ERROR_INVALID_IMAGE == ::CUDA_ERROR_INVALID_IMAGE);
static_assert(h::CUDA_ERROR_UNSUPPORTED_LIMIT == ::CUDA_ERROR_UNSUPPORTED_LIMIT);
static_assert(h::CUDA_ERROR_ILLEGAL_STATE == ::CUDA_ERROR_ILLEGAL_STATE);
static_assert(h::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED == ::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
static_assert(h::CU_STREAM_CAPTURE_MODE_GLOBAL == ::CU_STREAM_CAPTURE_MODE_GLOBAL);
static_assert(h::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL == ::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
static_assert(h::CU_STREAM_CAPTURE_MODE_RELAXED == ::CU_STREAM_CAPTURE_MODE_RELAXED);
static_assert(h::CU_LIMIT_STACK_SIZE == ::CU_LIMIT_STACK_SIZE);
static_assert(h::CU_LIMIT_PRINTF_FIFO_SIZE == ::CU_LIMIT_PRINTF_FIFO_SIZE);
static_assert(h::CU_LIMIT_MALLOC_HEAP_SIZE == ::CU_LIMIT_MALLOC_HEAP_SIZE);
static_assert(h::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT ==
              ::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
static_assert(h::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR ==
              ::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
static_assert(h::CU_GRAPH_NODE_TYPE_KERNEL == ::CU_GRAPH_NODE_TYPE_KERNEL);
static_assert(h::CU_GRAPH_NODE_TYPE_GRAPH == ::CU_GRAPH_NODE_TYPE_GRAPH);
static_assert(h::CU_GRAPH_NODE_TYPE_MEM_ALLOC == ::CU_GRAPH_NODE_TYPE_MEM_ALLOC);
static_assert(h::CU_GRAPH_NODE_TYPE_MEM_FREE == ::CU_GRAPH_NODE_TYPE_MEM_FREE);
static_assert(h::CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT == ::CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT);
static_assert(h::CU_GRAPH_MEM_ATTR_USED_MEM_HIGH == ::CU_GRAPH_MEM_ATTR_USED_MEM_HIGH);
static_assert(h::CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT ==
              ::CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT);
static_assert(h::CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH == ::CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH);
static_assert(h::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ==
              ::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
static_assert(sizeof(h::CUmemAccessDesc) == sizeof(::CUmemAccessDesc));
static_assert(sizeof(h::CUmemPoolProps) == sizeof(::CUmemPoolProps));
static_assert(offsetof(h::CUmemPoolProps, location) == offsetof(::CUmemPoolProps, location));
static_assert(offsetof(h::CUmemPoolProps, usage) == offsetof(::CUmemPoolProps, usage));
static_assert(sizeof(h::CUDA_MEM_ALLOC_NODE_PARAMS) == sizeof(::CUDA_MEM_ALLOC_NODE_PARAMS));
static_assert(offsetof(h::CUDA_MEM_ALLOC_NODE_PARAMS, bytesize) ==
              offsetof(::CUDA_MEM_ALLOC_NODE_PARAMS, bytesize));
static_assert(offsetof(h::CUDA_MEM_ALLOC_NODE_PARAMS, dptr) ==
              offsetof(::CUDA_MEM_ALLOC_NODE_PARAMS, dptr));
static_assert(sizeof(h::CUDA_GRAPH_INSTANTIATE_PARAMS) == sizeof(::CUDA_GRAPH_INSTANTIATE_PARAMS));
static_assert(offsetof(h::CUDA_GRAPH_INSTANTIATE_PARAMS, result_out) ==
              offsetof(::CUDA_GRAPH_INSTANTIATE_PARAMS, result_out));
static_assert(::CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD == 2);
static_assert(::CU_AD_FORMAT_FLOAT == 0x20 && ::CU_AD_FORMAT_HALF == 0x10 &&
              ::CU_AD_FORMAT_UNSIGNED_INT8 == 0x01);

}  // namespace

int main() {
  // cuda.h's special stream handles are casts, so they are compared at run time.
  if (reinterpret_cast<uintptr_t>(CU_STREAM_LEGACY) != h::CU_STREAM_LEGACY_VALUE ||
      reinterpret_cast<uintptr_t>(CU_STREAM_PER_THREAD) != h::CU_STREAM_PER_THREAD_VALUE) {
    std::printf("special stream handles differ from cuda.h\n");
    return 1;
  }
  std::printf("libvgpu ABI declarations match cuda.h %d\n", CUDA_VERSION);
  return 0;
}
