#pragma once
// The slice of the CUDA driver API (cuda.h, CUDA 12/13) that libvgpu.so and
// the simulated driver touch (NVML's is nvml/nvml_abi.hpp): handle types, the structs whose
// fields we read, the constants we compare against. Written from the public
// headers so the library builds without a CUDA toolkit; tests/vgpu/abi_check.cpp
// compares every size, offset and value here with the real cuda.h wherever a
// toolkit is installed.
//
// Handle types are pointers to the same incomplete structs cuda.h names, so a
// CUcontext here and there is one type.
//
//   using namespace hami::cuda;
//   CUresult rc = real.cuMemAlloc_v2(&ptr, bytes);

#include <cstddef>
#include <cstdint>

struct CUctx_st;
struct CUstream_st;
struct CUarray_st;
struct CUmipmappedArray_st;
struct CUmemPoolHandle_st;
struct CUexecAffinityParam_st;
struct CUctxCreateParams_st;
struct CUfunc_st;
struct CUevent_st;
struct CUgraph_st;
struct CUgraphExec_st;
struct CUgraphNode_st;
struct CUgraphEdgeData_st;
struct CUlaunchAttribute_st;
struct CUmod_st;
struct CUlib_st;
struct CUkern_st;

namespace hami::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = ::CUctx_st*;
using CUstream = ::CUstream_st*;
using CUarray = ::CUarray_st*;
using CUmipmappedArray = ::CUmipmappedArray_st*;
using CUmemoryPool = ::CUmemPoolHandle_st*;
using CUmemGenericAllocationHandle = unsigned long long;
using cuuint64_t = uint64_t;
using CUexecAffinityParam = ::CUexecAffinityParam_st;  // only ever passed by pointer
using CUctxCreateParams = ::CUctxCreateParams_st;      // only ever passed by pointer
using CUfunction = ::CUfunc_st*;
using CUevent = ::CUevent_st*;
using CUgraph = ::CUgraph_st*;
using CUgraphExec = ::CUgraphExec_st*;
using CUgraphNode = ::CUgraphNode_st*;
using CUgraphEdgeData = ::CUgraphEdgeData_st;      // only ever passed by pointer
using CUlaunchAttribute = ::CUlaunchAttribute_st;  // only ever passed by pointer
using CUmodule = ::CUmod_st*;
using CUlibrary = ::CUlib_st*;
using CUkernel = ::CUkern_st*;
using CUjit_option = int;
using CUlibraryOption = int;

inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
inline constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
inline constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
inline constexpr CUresult CUDA_ERROR_INVALID_DEVICE = 101;
inline constexpr CUresult CUDA_ERROR_INVALID_IMAGE = 200;
inline constexpr CUresult CUDA_ERROR_INVALID_CONTEXT = 201;
inline constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;
inline constexpr CUresult CUDA_ERROR_NOT_READY = 600;
inline constexpr CUresult CUDA_ERROR_UNSUPPORTED_LIMIT = 215;
inline constexpr CUresult CUDA_ERROR_ILLEGAL_STATE = 401;
inline constexpr CUresult CUDA_ERROR_NOT_SUPPORTED = 801;

// cuGetProcAddress flags and results.
inline constexpr cuuint64_t CU_GET_PROC_ADDRESS_DEFAULT = 0;
inline constexpr cuuint64_t CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1 << 0;
inline constexpr cuuint64_t CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 1 << 1;
using CUdriverProcAddressQueryResult = int;
inline constexpr int CU_GET_PROC_ADDRESS_SUCCESS = 0;
inline constexpr int CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1;
inline constexpr int CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2;

// Kernel launches, events, stream capture.
struct CUlaunchConfig {
  unsigned int gridDimX;
  unsigned int gridDimY;
  unsigned int gridDimZ;
  unsigned int blockDimX;
  unsigned int blockDimY;
  unsigned int blockDimZ;
  unsigned int sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute* attrs;
  unsigned int numAttrs;
};
// The special stream handles (cuda.h defines them as casts of 0x1 and 0x2).
inline constexpr uintptr_t CU_STREAM_LEGACY_VALUE = 0x1;
inline constexpr uintptr_t CU_STREAM_PER_THREAD_VALUE = 0x2;
inline constexpr unsigned int CU_EVENT_DEFAULT = 0;
using CUstreamCaptureStatus = int;
inline constexpr CUstreamCaptureStatus CU_STREAM_CAPTURE_STATUS_NONE = 0;
using CUstreamCaptureMode = int;
inline constexpr CUstreamCaptureMode CU_STREAM_CAPTURE_MODE_GLOBAL = 0;
inline constexpr CUstreamCaptureMode CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1;
inline constexpr CUstreamCaptureMode CU_STREAM_CAPTURE_MODE_RELAXED = 2;

using CUpointer_attribute = int;
inline constexpr CUpointer_attribute CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9;

using CUmemPool_attribute = int;
inline constexpr CUmemPool_attribute CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5;

inline constexpr unsigned int CUDA_ARRAY3D_DEFERRED_MAPPING = 0x80;

using CUmemLocationType = int;
inline constexpr CUmemLocationType CU_MEM_LOCATION_TYPE_INVALID = 0;
inline constexpr CUmemLocationType CU_MEM_LOCATION_TYPE_DEVICE = 1;
inline constexpr CUmemLocationType CU_MEM_LOCATION_TYPE_HOST = 2;       // CUDA 12.2+
inline constexpr CUmemLocationType CU_MEM_LOCATION_TYPE_HOST_NUMA = 3;  // CUDA 12.2+

// Managed memory, for CUDA_OVERSUBSCRIBE (spill.hpp).
inline constexpr unsigned int CU_MEM_ATTACH_GLOBAL = 0x1;
using CUmem_advise = int;
inline constexpr CUmem_advise CU_MEM_ADVISE_SET_PREFERRED_LOCATION = 3;
inline constexpr CUmem_advise CU_MEM_ADVISE_SET_ACCESSED_BY = 5;
inline constexpr int CU_DEVICE_CPU = -1;
inline constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900;
inline constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901;
// Per-context limits that commit device memory (cuCtxSetLimit).
using CUlimit = int;
inline constexpr CUlimit CU_LIMIT_STACK_SIZE = 0x00;
inline constexpr CUlimit CU_LIMIT_PRINTF_FIFO_SIZE = 0x01;
inline constexpr CUlimit CU_LIMIT_MALLOC_HEAP_SIZE = 0x02;
using CUdevice_attribute = int;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39;
// Graph memory: what captured stream-ordered allocations and memory-alloc
// nodes make real when a graph is uploaded or first launched.
using CUgraphNodeType = int;
inline constexpr CUgraphNodeType CU_GRAPH_NODE_TYPE_KERNEL = 0;
inline constexpr CUgraphNodeType CU_GRAPH_NODE_TYPE_GRAPH = 4;
inline constexpr CUgraphNodeType CU_GRAPH_NODE_TYPE_MEM_ALLOC = 10;
inline constexpr CUgraphNodeType CU_GRAPH_NODE_TYPE_MEM_FREE = 11;
using CUgraphMem_attribute = int;
inline constexpr CUgraphMem_attribute CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT = 0;
inline constexpr CUgraphMem_attribute CU_GRAPH_MEM_ATTR_USED_MEM_HIGH = 1;
inline constexpr CUgraphMem_attribute CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT = 2;
inline constexpr CUgraphMem_attribute CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH = 3;
// VMM handles shared between processes.
using CUmemAllocationHandleType = int;
inline constexpr CUmemAllocationHandleType CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 0x1;

struct CUuuid {
  char bytes[16];
};

struct CUmemLocation {
  CUmemLocationType type;
  int id;
};

// We read `location` only; the rest is carried as opaque bytes of the right size.
struct CUmemAllocationProp {
  int type;
  int requestedHandleTypes;
  CUmemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
};

struct CUmemAccessDesc {
  CUmemLocation location;
  int flags;
};
struct CUmemPoolProps {
  int allocType;
  CUmemAllocationHandleType handleTypes;
  CUmemLocation location;
  void* win32SecurityAttributes;
  size_t maxSize;
  unsigned short usage;
  unsigned char reserved[54];
};
struct CUDA_MEM_ALLOC_NODE_PARAMS {
  CUmemPoolProps poolProps;
  const CUmemAccessDesc* accessDescs;
  size_t accessDescCount;
  size_t bytesize;
  CUdeviceptr dptr;
};
struct CUDA_GRAPH_INSTANTIATE_PARAMS {
  cuuint64_t flags;
  CUstream hUploadStream;
  CUgraphNode hErrNode_out;
  int result_out;
};
using CUarray_format = int;

struct CUDA_ARRAY_DESCRIPTOR {
  size_t Width;
  size_t Height;
  CUarray_format Format;
  unsigned int NumChannels;
};

struct CUDA_ARRAY3D_DESCRIPTOR {
  size_t Width;
  size_t Height;
  size_t Depth;
  CUarray_format Format;
  unsigned int NumChannels;
  unsigned int Flags;
};

struct CUDA_ARRAY_MEMORY_REQUIREMENTS {
  size_t size;
  size_t alignment;
  unsigned int reserved[4];
};

}  // namespace hami::cuda
