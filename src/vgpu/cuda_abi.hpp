#pragma once
// The slice of the CUDA driver API (cuda.h, CUDA 12/13) and NVML (nvml.h) that
// libvgpu.so and the simulated driver touch: handle types, the structs whose
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
struct nvmlDevice_st;
struct nvmlEventSet_st;
struct CUfunc_st;
struct CUevent_st;
struct CUgraph_st;
struct CUgraphExec_st;
struct CUgraphNode_st;
struct CUgraphEdgeData_st;
struct CUlaunchAttribute_st;

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

inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
inline constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
inline constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
inline constexpr CUresult CUDA_ERROR_INVALID_DEVICE = 101;
inline constexpr CUresult CUDA_ERROR_INVALID_CONTEXT = 201;
inline constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;
inline constexpr CUresult CUDA_ERROR_NOT_READY = 600;
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

using CUpointer_attribute = int;
inline constexpr CUpointer_attribute CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9;

using CUmemPool_attribute = int;
inline constexpr CUmemPool_attribute CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5;

inline constexpr unsigned int CUDA_ARRAY3D_DEFERRED_MAPPING = 0x80;

using CUmemLocationType = int;
inline constexpr CUmemLocationType CU_MEM_LOCATION_TYPE_INVALID = 0;
inline constexpr CUmemLocationType CU_MEM_LOCATION_TYPE_DEVICE = 1;
inline constexpr CUmemLocationType CU_MEM_LOCATION_TYPE_HOST = 2;  // CUDA 12.2+

// Managed memory, for CUDA_OVERSUBSCRIBE (spill.hpp).
inline constexpr unsigned int CU_MEM_ATTACH_GLOBAL = 0x1;
using CUmem_advise = int;
inline constexpr CUmem_advise CU_MEM_ADVISE_SET_PREFERRED_LOCATION = 3;
inline constexpr CUmem_advise CU_MEM_ADVISE_SET_ACCESSED_BY = 5;
inline constexpr int CU_DEVICE_CPU = -1;
inline constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900;

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

// ---- NVML ------------------------------------------------------------------

using nvmlReturn_t = int;
using nvmlDevice_t = ::nvmlDevice_st*;
using nvmlEventSet_t = ::nvmlEventSet_st*;
inline constexpr nvmlReturn_t NVML_SUCCESS = 0;
inline constexpr nvmlReturn_t NVML_ERROR_UNINITIALIZED = 1;
inline constexpr nvmlReturn_t NVML_ERROR_INVALID_ARGUMENT = 2;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
inline constexpr nvmlReturn_t NVML_ERROR_NO_PERMISSION = 4;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_FOUND = 6;
inline constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
inline constexpr nvmlReturn_t NVML_ERROR_DRIVER_NOT_LOADED = 9;
inline constexpr nvmlReturn_t NVML_ERROR_TIMEOUT = 10;
inline constexpr nvmlReturn_t NVML_ERROR_LIBRARY_NOT_FOUND = 12;
inline constexpr nvmlReturn_t NVML_ERROR_FUNCTION_NOT_FOUND = 13;
inline constexpr nvmlReturn_t NVML_ERROR_GPU_IS_LOST = 15;
inline constexpr nvmlReturn_t NVML_ERROR_RESET_REQUIRED = 16;
inline constexpr nvmlReturn_t NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18;
inline constexpr nvmlReturn_t NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25;
inline constexpr nvmlReturn_t NVML_ERROR_UNKNOWN = 999;
inline constexpr unsigned NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96;
inline constexpr unsigned NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96;
inline constexpr unsigned NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80;
inline constexpr unsigned NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE = 32;
inline constexpr unsigned NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE = 16;
// usedGpuMemory when the driver cannot say (nvml.h: NVML_VALUE_NOT_AVAILABLE, -1).
inline constexpr unsigned long long NVML_VALUE_NOT_AVAILABLE_ULL = ~0ull;

struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct nvmlMemory_v2_t {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
};
// NVML_STRUCT_VERSION(Memory, 2)
inline constexpr unsigned int nvmlMemory_v2 =
    static_cast<unsigned int>(sizeof(nvmlMemory_v2_t)) | (2u << 24);

struct nvmlProcessInfo_t {  // v2 and v3 share this layout
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

// What the unversioned nvmlDevice{Compute,Graphics}RunningProcesses fill.
struct nvmlProcessInfo_v1_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
};

// nvmlDeviceGetPciInfo_v3.
struct nvmlPciInfo_t {
  char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];  // "%04X:%02X:%02X.0"
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];  // "%08X:%02X:%02X.0"
};

// nvmlDeviceGetUtilizationRates: percent of the last sample period.
struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};

// nvmlDeviceGetProcessUtilization: one sample per process; timeStamp in
// microseconds of CLOCK_REALTIME.
struct nvmlProcessUtilizationSample_t {
  unsigned int pid;
  unsigned long long timeStamp;
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
};

// Events (nvmlEventSetCreate, nvmlDeviceRegisterEvents, nvmlEventSetWait_v2).
// nvml.h spells the event types as macros.
inline constexpr unsigned long long nvmlEventTypeXidCriticalError = 0x0000000000000008ull;
// The _v2 layout; the unversioned nvmlEventSetWait fills the first three fields.
struct nvmlEventData_t {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;    // the Xid, for nvmlEventTypeXidCriticalError (999: unknown)
  unsigned int gpuInstanceId;      // MIG; 0xFFFFFFFF otherwise
  unsigned int computeInstanceId;  // MIG; 0xFFFFFFFF otherwise
};

}  // namespace hami::cuda
