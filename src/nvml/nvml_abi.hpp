#pragma once
// The slice of NVML (nvml.h) that the daemons, libvgpu.so and the simulated
// NVML touch: handle types, return codes, the structs whose fields we read,
// the constants we compare against. Written from the public header so nothing
// needs the NVIDIA headers to build; tests/nvml/nvml_abi_check.cpp compares
// every size, offset and value here with the real nvml.h wherever one is
// installed.
//
//   using namespace hami::nvml::abi;
//   auto get = reinterpret_cast<nvmlReturn_t (*)(unsigned, nvmlDevice_t*)>(
//       dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
//   nvmlDevice_t h = nullptr;
//   if (get(0, &h) == NVML_SUCCESS) ...

#include <cstddef>
#include <cstdint>

// The same incomplete structs nvml.h names, so a handle here and there is one type.
struct nvmlDevice_st;
struct nvmlEventSet_st;
struct nvmlGpuInstance_st;
struct nvmlComputeInstance_st;

namespace hami::nvml::abi {

using nvmlReturn_t = int;
using nvmlDevice_t = ::nvmlDevice_st*;
using nvmlEventSet_t = ::nvmlEventSet_st*;
using nvmlGpuInstance_t = ::nvmlGpuInstance_st*;
using nvmlComputeInstance_t = ::nvmlComputeInstance_st*;
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
inline constexpr nvmlReturn_t NVML_ERROR_IN_USE = 19;
inline constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_RESOURCES = 23;
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

// Topology (nvmlDeviceGetTopologyCommonAncestor): the closest PCIe ancestor
// two GPUs share, closest first (nvmlGpuTopologyLevel_t).
inline constexpr int NVML_TOPOLOGY_INTERNAL = 0;     // the same board
inline constexpr int NVML_TOPOLOGY_SINGLE = 10;      // one PCIe switch
inline constexpr int NVML_TOPOLOGY_MULTIPLE = 20;    // several PCIe switches, no host bridge
inline constexpr int NVML_TOPOLOGY_HOSTBRIDGE = 30;  // one host bridge
inline constexpr int NVML_TOPOLOGY_NODE = 40;        // host bridges of one NUMA node
inline constexpr int NVML_TOPOLOGY_SYSTEM = 50;      // across NUMA nodes (SMP interconnect)

// nvmlDeviceGetP2PStatus: what is asked (nvmlGpuP2PCapsIndex_t) and the answer
// (nvmlGpuP2PStatus_t).
inline constexpr int NVML_P2P_CAPS_INDEX_READ = 0;
inline constexpr int NVML_P2P_CAPS_INDEX_WRITE = 1;
inline constexpr int NVML_P2P_CAPS_INDEX_NVLINK = 2;
inline constexpr int NVML_P2P_CAPS_INDEX_ATOMICS = 3;
inline constexpr int NVML_P2P_CAPS_INDEX_PCI = 4;
inline constexpr int NVML_P2P_STATUS_OK = 0;
inline constexpr int NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED = 1;
inline constexpr int NVML_P2P_STATUS_GPU_NOT_SUPPORTED = 2;
inline constexpr int NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED = 3;
inline constexpr int NVML_P2P_STATUS_DISABLED_BY_REGKEY = 4;
inline constexpr int NVML_P2P_STATUS_NOT_SUPPORTED = 5;
inline constexpr int NVML_P2P_STATUS_UNKNOWN = 6;

// NVLink (nvmlDeviceGetNvLinkState, nvmlDeviceGetNvLinkRemotePciInfo_v2,
// nvmlDeviceGetNvLinkRemoteDeviceType). nvml.h spells the link count as a macro.
inline constexpr unsigned NVML_NVLINK_MAX_LINKS = 18;
inline constexpr int NVML_FEATURE_DISABLED = 0;  // nvmlEnableState_t
inline constexpr int NVML_FEATURE_ENABLED = 1;
inline constexpr int NVML_NVLINK_DEVICE_TYPE_GPU = 0;  // nvmlIntNvLinkDeviceType_t
inline constexpr int NVML_NVLINK_DEVICE_TYPE_IBMNPU = 1;
inline constexpr int NVML_NVLINK_DEVICE_TYPE_SWITCH = 2;
inline constexpr int NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF;

// Multi-Instance GPU (MIG). A MIG-enabled GPU is cut into GPU instances (GIs:
// memory slices and compute slices, at a placement) holding compute instances
// (CIs: the GI's compute slices, sharing its memory). A CI is what CUDA and
// NVML call a MIG device: it has its own nvmlDevice_t handle and MIG-<uuid>.
// nvml.h spells the constants as macros.
inline constexpr unsigned NVML_DEVICE_MIG_DISABLE = 0x0;
inline constexpr unsigned NVML_DEVICE_MIG_ENABLE = 0x1;

// What nvmlDeviceGetGpuInstanceProfileInfo* take as `profile`; the profile ID
// they answer (info.id) is a different number (1_SLICE is ID 19 on an H100).
inline constexpr unsigned NVML_GPU_INSTANCE_PROFILE_1_SLICE = 0x0;
inline constexpr unsigned NVML_GPU_INSTANCE_PROFILE_2_SLICE = 0x1;
inline constexpr unsigned NVML_GPU_INSTANCE_PROFILE_3_SLICE = 0x2;
inline constexpr unsigned NVML_GPU_INSTANCE_PROFILE_4_SLICE = 0x3;
inline constexpr unsigned NVML_GPU_INSTANCE_PROFILE_7_SLICE = 0x4;
inline constexpr unsigned NVML_GPU_INSTANCE_PROFILE_8_SLICE = 0x5;
inline constexpr unsigned NVML_GPU_INSTANCE_PROFILE_6_SLICE = 0x6;
inline constexpr unsigned NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 = 0x7;  // +me: media engines
inline constexpr unsigned NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1 = 0x8;
inline constexpr unsigned NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2 = 0x9;  // twice the memory
inline constexpr unsigned NVML_GPU_INSTANCE_PROFILE_1_SLICE_GFX = 0xA;
inline constexpr unsigned NVML_GPU_INSTANCE_PROFILE_2_SLICE_GFX = 0xB;
inline constexpr unsigned NVML_GPU_INSTANCE_PROFILE_4_SLICE_GFX = 0xC;
inline constexpr unsigned NVML_GPU_INSTANCE_PROFILE_1_SLICE_NO_ME = 0xD;
inline constexpr unsigned NVML_GPU_INSTANCE_PROFILE_2_SLICE_NO_ME = 0xE;
inline constexpr unsigned NVML_GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME = 0xF;
inline constexpr unsigned NVML_GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME = 0x10;
inline constexpr unsigned NVML_GPU_INSTANCE_PROFILE_COUNT = 0x11;
inline constexpr unsigned NVML_GPU_INSTANCE_PROFILE_CAPS_P2P = 0x1;
inline constexpr unsigned NVML_GPU_INSTANCE_PROFILE_CAPS_GFX = 0x2;

inline constexpr unsigned NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE = 0x0;
inline constexpr unsigned NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE = 0x1;
inline constexpr unsigned NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE = 0x2;
inline constexpr unsigned NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE = 0x3;
inline constexpr unsigned NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE = 0x4;
inline constexpr unsigned NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE = 0x5;
inline constexpr unsigned NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE = 0x6;
inline constexpr unsigned NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1 = 0x7;
inline constexpr unsigned NVML_COMPUTE_INSTANCE_PROFILE_COUNT = 0x8;
inline constexpr unsigned NVML_COMPUTE_INSTANCE_PROFILE_CAPS_GFX = 0x1;
inline constexpr unsigned NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED = 0x0;
inline constexpr unsigned NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT = 0x1;

// Memory slices a GI occupies.
struct nvmlGpuInstancePlacement_t {
  unsigned int start;
  unsigned int size;
};

// The unversioned nvmlDeviceGetGpuInstanceProfileInfo.
struct nvmlGpuInstanceProfileInfo_t {
  unsigned int id;  // profile ID, what Create/GetGpuInstances/placements take
  unsigned int isP2pSupported;
  unsigned int sliceCount;     // compute slices
  unsigned int instanceCount;  // how many of this profile fit an empty GPU
  unsigned int multiprocessorCount;
  unsigned int copyEngineCount;
  unsigned int decoderCount;
  unsigned int encoderCount;
  unsigned int jpegCount;
  unsigned int ofaCount;
  unsigned long long memorySizeMB;  // MiB, despite the name
};

// nvmlDeviceGetGpuInstanceProfileInfoV: the caller sets `version` first.
struct nvmlGpuInstanceProfileInfo_v2_t {
  unsigned int version;
  unsigned int id;
  unsigned int isP2pSupported;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int copyEngineCount;
  unsigned int decoderCount;
  unsigned int encoderCount;
  unsigned int jpegCount;
  unsigned int ofaCount;
  unsigned long long memorySizeMB;
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];  // "MIG 1g.10gb"
};
// v3 drops isP2pSupported for `capabilities` at the end.
struct nvmlGpuInstanceProfileInfo_v3_t {
  unsigned int version;
  unsigned int id;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int copyEngineCount;
  unsigned int decoderCount;
  unsigned int encoderCount;
  unsigned int jpegCount;
  unsigned int ofaCount;
  unsigned long long memorySizeMB;
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
  unsigned int capabilities;  // NVML_GPU_INSTANCE_PROFILE_CAPS_*
};
// NVML_STRUCT_VERSION(GpuInstanceProfileInfo, 2 / 3)
inline constexpr unsigned int nvmlGpuInstanceProfileInfo_v2 =
    static_cast<unsigned int>(sizeof(nvmlGpuInstanceProfileInfo_v2_t)) | (2u << 24);
inline constexpr unsigned int nvmlGpuInstanceProfileInfo_v3 =
    static_cast<unsigned int>(sizeof(nvmlGpuInstanceProfileInfo_v3_t)) | (3u << 24);

struct nvmlGpuInstanceInfo_t {
  nvmlDevice_t device;  // the parent GPU
  unsigned int id;      // GI ID, unique within the GPU
  unsigned int profileId;
  nvmlGpuInstancePlacement_t placement;
};

// Compute slices a CI occupies within its GI, from 0.
struct nvmlComputeInstancePlacement_t {
  unsigned int start;
  unsigned int size;
};

struct nvmlComputeInstanceProfileInfo_t {
  unsigned int id;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
};

// nvmlGpuInstanceGetComputeInstanceProfileInfoV: the caller sets `version` first.
struct nvmlComputeInstanceProfileInfo_v2_t {
  unsigned int version;
  unsigned int id;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];  // "MIG 1c.3g.40gb"
};
// v3 adds `capabilities` at the end.
struct nvmlComputeInstanceProfileInfo_v3_t {
  unsigned int version;
  unsigned int id;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
  unsigned int capabilities;  // NVML_COMPUTE_INSTANCE_PROFILE_CAPS_*
};
inline constexpr unsigned int nvmlComputeInstanceProfileInfo_v2 =
    static_cast<unsigned int>(sizeof(nvmlComputeInstanceProfileInfo_v2_t)) | (2u << 24);
inline constexpr unsigned int nvmlComputeInstanceProfileInfo_v3 =
    static_cast<unsigned int>(sizeof(nvmlComputeInstanceProfileInfo_v3_t)) | (3u << 24);

// nvmlComputeInstanceGetInfo_v2.
struct nvmlComputeInstanceInfo_t {
  nvmlDevice_t device;  // the parent GPU
  nvmlGpuInstance_t gpuInstance;
  unsigned int id;  // CI ID, unique within the GI
  unsigned int profileId;
  nvmlComputeInstancePlacement_t placement;
};

// nvmlDeviceGetAttributes_v2: what a MIG device (or a GPU) is made of.
struct nvmlDeviceAttributes_t {
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
  unsigned int gpuInstanceSliceCount;
  unsigned int computeInstanceSliceCount;
  unsigned long long memorySizeMB;  // MiB
};

}  // namespace hami::nvml::abi

// libvgpu.so spells these names hami::cuda::, beside the CUDA driver's.
namespace hami::cuda {
using namespace hami::nvml::abi;  // NOLINT: nvml.h's names, as nvml.h spells them
}  // namespace hami::cuda
