// Our NVML declarations (src/nvml/nvml_abi.hpp) against the real nvml.h of an
// installed CUDA toolkit: return codes, buffer sizes, struct sizes and
// offsets, and the parameter lists of every function src/nvml resolves and
// of the MIG calls (which the simulated NVML answers).
// Everything is checked at compile time; a mismatch does not build.
#include <array>
#include <cstddef>
#include <cstdio>
#include <type_traits>

#include "nvml/nvml_abi.hpp"

// nvml.h spells the buffer sizes and nvmlMemory_v2 as macros: ours are
// captured before it is included.
namespace ours {
namespace h = hami::nvml::abi;
constexpr unsigned kUuidV2 = h::NVML_DEVICE_UUID_V2_BUFFER_SIZE;
constexpr unsigned kNameV2 = h::NVML_DEVICE_NAME_V2_BUFFER_SIZE;
constexpr unsigned kDriverVersion = h::NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE;
constexpr unsigned kBusId = h::NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE;
constexpr unsigned kBusIdLegacy = h::NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE;
constexpr unsigned kMemoryV2 = h::nvmlMemory_v2;
constexpr unsigned long long kXidCriticalError = h::nvmlEventTypeXidCriticalError;
constexpr unsigned kNvLinkMaxLinks = h::NVML_NVLINK_MAX_LINKS;
// nvml.h may spell the corrected name as an alias of its misspelled one.
constexpr int kP2pChipsetNotSupported = h::NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED;

// The MIG macros, each captured as <name>_ours (## keeps it from expanding).
#define MIG_MACROS(X)                            \
  X(NVML_DEVICE_MIG_DISABLE)                     \
  X(NVML_DEVICE_MIG_ENABLE)                      \
  X(NVML_GPU_INSTANCE_PROFILE_1_SLICE)           \
  X(NVML_GPU_INSTANCE_PROFILE_2_SLICE)           \
  X(NVML_GPU_INSTANCE_PROFILE_3_SLICE)           \
  X(NVML_GPU_INSTANCE_PROFILE_4_SLICE)           \
  X(NVML_GPU_INSTANCE_PROFILE_7_SLICE)           \
  X(NVML_GPU_INSTANCE_PROFILE_8_SLICE)           \
  X(NVML_GPU_INSTANCE_PROFILE_6_SLICE)           \
  X(NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1)      \
  X(NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1)      \
  X(NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2)      \
  X(NVML_GPU_INSTANCE_PROFILE_1_SLICE_GFX)       \
  X(NVML_GPU_INSTANCE_PROFILE_2_SLICE_GFX)       \
  X(NVML_GPU_INSTANCE_PROFILE_4_SLICE_GFX)       \
  X(NVML_GPU_INSTANCE_PROFILE_1_SLICE_NO_ME)     \
  X(NVML_GPU_INSTANCE_PROFILE_2_SLICE_NO_ME)     \
  X(NVML_GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME)    \
  X(NVML_GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME)    \
  X(NVML_GPU_INSTANCE_PROFILE_COUNT)             \
  X(NVML_GPU_INSTANCE_PROFILE_CAPS_P2P)          \
  X(NVML_GPU_INSTANCE_PROFILE_CAPS_GFX)          \
  X(NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE)       \
  X(NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE)       \
  X(NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE)       \
  X(NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE)       \
  X(NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE)       \
  X(NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE)       \
  X(NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE)       \
  X(NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1)  \
  X(NVML_COMPUTE_INSTANCE_PROFILE_COUNT)         \
  X(NVML_COMPUTE_INSTANCE_PROFILE_CAPS_GFX)      \
  X(NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED) \
  X(NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT)  \
  X(nvmlGpuInstanceProfileInfo_v2)               \
  X(nvmlGpuInstanceProfileInfo_v3)               \
  X(nvmlComputeInstanceProfileInfo_v2)           \
  X(nvmlComputeInstanceProfileInfo_v3)
#define CAPTURE(name) constexpr unsigned long long name##_ours = h::name;
MIG_MACROS(CAPTURE)
#undef CAPTURE
}  // namespace ours

// The versioned and unversioned functions under their own names.
#define NVML_NO_UNVERSIONED_FUNC_DEFS
#include <nvml.h>

namespace {

namespace h = hami::nvml::abi;

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

// The signatures src/nvml/nvml.cpp calls through.
using Dev = h::nvmlDevice_t;
using R = h::nvmlReturn_t;
#define SAME(real_fn, ...)                                            \
  static_assert(same_abi<R (*)(__VA_ARGS__), decltype(&::real_fn)>(), \
                #real_fn " does not match nvml.h");
SAME(nvmlInit_v2)
SAME(nvmlShutdown)
SAME(nvmlDeviceGetCount_v2, unsigned*)
SAME(nvmlDeviceGetHandleByIndex_v2, unsigned, Dev*)
SAME(nvmlDeviceGetUUID, Dev, char*, unsigned)
SAME(nvmlDeviceGetName, Dev, char*, unsigned)
SAME(nvmlDeviceGetMemoryInfo, Dev, h::nvmlMemory_t*)
SAME(nvmlDeviceGetMemoryInfo_v2, Dev, h::nvmlMemory_v2_t*)
SAME(nvmlDeviceGetComputeRunningProcesses_v3, Dev, unsigned*, h::nvmlProcessInfo_t*)
SAME(nvmlDeviceGetComputeRunningProcesses_v2, Dev, unsigned*, h::nvmlProcessInfo_t*)
SAME(nvmlDeviceGetComputeRunningProcesses, Dev, unsigned*, h::nvmlProcessInfo_v1_t*)
SAME(nvmlDeviceGetGraphicsRunningProcesses_v3, Dev, unsigned*, h::nvmlProcessInfo_t*)
SAME(nvmlDeviceGetGraphicsRunningProcesses_v2, Dev, unsigned*, h::nvmlProcessInfo_t*)
SAME(nvmlDeviceGetGraphicsRunningProcesses, Dev, unsigned*, h::nvmlProcessInfo_v1_t*)
SAME(nvmlDeviceGetUtilizationRates, Dev, h::nvmlUtilization_t*)
SAME(nvmlDeviceGetProcessUtilization, Dev, h::nvmlProcessUtilizationSample_t*, unsigned*,
     unsigned long long)
SAME(nvmlSystemGetDriverVersion, char*, unsigned)
SAME(nvmlDeviceGetMinorNumber, Dev, unsigned*)
SAME(nvmlDeviceGetPciInfo_v3, Dev, h::nvmlPciInfo_t*)
SAME(nvmlDeviceGetNumaNodeId, Dev, unsigned*)
SAME(nvmlDeviceGetCudaComputeCapability, Dev, int*, int*)
SAME(nvmlEventSetCreate, h::nvmlEventSet_t*)
SAME(nvmlDeviceGetSupportedEventTypes, Dev, unsigned long long*)
SAME(nvmlDeviceRegisterEvents, Dev, unsigned long long, h::nvmlEventSet_t)
SAME(nvmlEventSetWait_v2, h::nvmlEventSet_t, h::nvmlEventData_t*, unsigned)
SAME(nvmlEventSetWait, h::nvmlEventSet_t, h::nvmlEventData_t*, unsigned)
SAME(nvmlEventSetFree, h::nvmlEventSet_t)
// Topology: the enum parameters are int-sized.
SAME(nvmlDeviceGetTopologyCommonAncestor, Dev, Dev, int*)
SAME(nvmlDeviceGetP2PStatus, Dev, Dev, int, int*)
SAME(nvmlDeviceGetNvLinkState, Dev, unsigned, int*)
SAME(nvmlDeviceGetNvLinkRemotePciInfo_v2, Dev, unsigned, h::nvmlPciInfo_t*)
SAME(nvmlDeviceGetNvLinkRemoteDeviceType, Dev, unsigned, int*)
// MIG: the calls the simulated NVML answers and the device plugin will make.
using Gi = h::nvmlGpuInstance_t;
using Ci = h::nvmlComputeInstance_t;
SAME(nvmlDeviceGetMigMode, Dev, unsigned*, unsigned*)
SAME(nvmlDeviceSetMigMode, Dev, unsigned, R*)
SAME(nvmlDeviceGetGpuInstanceProfileInfo, Dev, unsigned, h::nvmlGpuInstanceProfileInfo_t*)
SAME(nvmlDeviceGetGpuInstanceProfileInfoV, Dev, unsigned, h::nvmlGpuInstanceProfileInfo_v2_t*)
SAME(nvmlDeviceGetGpuInstancePossiblePlacements_v2, Dev, unsigned, h::nvmlGpuInstancePlacement_t*,
     unsigned*)
SAME(nvmlDeviceGetGpuInstanceRemainingCapacity, Dev, unsigned, unsigned*)
SAME(nvmlDeviceCreateGpuInstance, Dev, unsigned, Gi*)
SAME(nvmlDeviceCreateGpuInstanceWithPlacement, Dev, unsigned, const h::nvmlGpuInstancePlacement_t*,
     Gi*)
SAME(nvmlGpuInstanceDestroy, Gi)
SAME(nvmlDeviceGetGpuInstances, Dev, unsigned, Gi*, unsigned*)
SAME(nvmlDeviceGetGpuInstanceById, Dev, unsigned, Gi*)
SAME(nvmlGpuInstanceGetInfo, Gi, h::nvmlGpuInstanceInfo_t*)
SAME(nvmlGpuInstanceGetComputeInstanceProfileInfo, Gi, unsigned, unsigned,
     h::nvmlComputeInstanceProfileInfo_t*)
SAME(nvmlGpuInstanceGetComputeInstanceProfileInfoV, Gi, unsigned, unsigned,
     h::nvmlComputeInstanceProfileInfo_v2_t*)
SAME(nvmlGpuInstanceGetComputeInstanceRemainingCapacity, Gi, unsigned, unsigned*)
SAME(nvmlGpuInstanceGetComputeInstancePossiblePlacements, Gi, unsigned,
     h::nvmlComputeInstancePlacement_t*, unsigned*)
SAME(nvmlGpuInstanceCreateComputeInstance, Gi, unsigned, Ci*)
SAME(nvmlGpuInstanceCreateComputeInstanceWithPlacement, Gi, unsigned,
     const h::nvmlComputeInstancePlacement_t*, Ci*)
SAME(nvmlComputeInstanceDestroy, Ci)
SAME(nvmlGpuInstanceGetComputeInstances, Gi, unsigned, Ci*, unsigned*)
SAME(nvmlGpuInstanceGetComputeInstanceById, Gi, unsigned, Ci*)
SAME(nvmlComputeInstanceGetInfo_v2, Ci, h::nvmlComputeInstanceInfo_t*)
SAME(nvmlDeviceIsMigDeviceHandle, Dev, unsigned*)
SAME(nvmlDeviceGetGpuInstanceId, Dev, unsigned*)
SAME(nvmlDeviceGetComputeInstanceId, Dev, unsigned*)
SAME(nvmlDeviceGetMaxMigDeviceCount, Dev, unsigned*)
SAME(nvmlDeviceGetMigDeviceHandleByIndex, Dev, unsigned, Dev*)
SAME(nvmlDeviceGetDeviceHandleFromMigDeviceHandle, Dev, Dev*)
SAME(nvmlDeviceGetAttributes_v2, Dev, h::nvmlDeviceAttributes_t*)
#undef SAME
static_assert(std::is_same_v<h::nvmlGpuInstance_t, ::nvmlGpuInstance_t>);
static_assert(std::is_same_v<h::nvmlComputeInstance_t, ::nvmlComputeInstance_t>);
#define SAME_MACRO(name) static_assert(ours::name##_ours == (name), #name " differs from nvml.h");
MIG_MACROS(SAME_MACRO)
#undef SAME_MACRO
#undef MIG_MACROS
static_assert(h::NVML_ERROR_IN_USE == ::NVML_ERROR_IN_USE);
static_assert(h::NVML_ERROR_INSUFFICIENT_RESOURCES == ::NVML_ERROR_INSUFFICIENT_RESOURCES);
static_assert(std::is_same_v<decltype(&::nvmlErrorString), const char* (*)(::nvmlReturn_t)>);
static_assert(std::is_same_v<h::nvmlDevice_t, ::nvmlDevice_t>);
static_assert(std::is_same_v<h::nvmlEventSet_t, ::nvmlEventSet_t>);
static_assert(sizeof(h::nvmlReturn_t) == sizeof(::nvmlReturn_t));

static_assert(h::NVML_SUCCESS == ::NVML_SUCCESS);
static_assert(h::NVML_ERROR_UNINITIALIZED == ::NVML_ERROR_UNINITIALIZED);
static_assert(h::NVML_ERROR_INVALID_ARGUMENT == ::NVML_ERROR_INVALID_ARGUMENT);
static_assert(h::NVML_ERROR_NOT_SUPPORTED == ::NVML_ERROR_NOT_SUPPORTED);
static_assert(h::NVML_ERROR_NO_PERMISSION == ::NVML_ERROR_NO_PERMISSION);
static_assert(h::NVML_ERROR_NOT_FOUND == ::NVML_ERROR_NOT_FOUND);
static_assert(h::NVML_ERROR_INSUFFICIENT_SIZE == ::NVML_ERROR_INSUFFICIENT_SIZE);
static_assert(h::NVML_ERROR_DRIVER_NOT_LOADED == ::NVML_ERROR_DRIVER_NOT_LOADED);
static_assert(h::NVML_ERROR_TIMEOUT == ::NVML_ERROR_TIMEOUT);
static_assert(h::NVML_ERROR_LIBRARY_NOT_FOUND == ::NVML_ERROR_LIBRARY_NOT_FOUND);
static_assert(h::NVML_ERROR_FUNCTION_NOT_FOUND == ::NVML_ERROR_FUNCTION_NOT_FOUND);
static_assert(h::NVML_ERROR_GPU_IS_LOST == ::NVML_ERROR_GPU_IS_LOST);
static_assert(h::NVML_ERROR_RESET_REQUIRED == ::NVML_ERROR_RESET_REQUIRED);
static_assert(h::NVML_ERROR_LIB_RM_VERSION_MISMATCH == ::NVML_ERROR_LIB_RM_VERSION_MISMATCH);
static_assert(h::NVML_ERROR_ARGUMENT_VERSION_MISMATCH == ::NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
static_assert(h::NVML_ERROR_UNKNOWN == ::NVML_ERROR_UNKNOWN);
static_assert(h::NVML_VALUE_NOT_AVAILABLE_ULL ==
              static_cast<unsigned long long>(NVML_VALUE_NOT_AVAILABLE));

static_assert(ours::kUuidV2 == NVML_DEVICE_UUID_V2_BUFFER_SIZE);
static_assert(ours::kNameV2 == NVML_DEVICE_NAME_V2_BUFFER_SIZE);
static_assert(ours::kDriverVersion == NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE);
static_assert(ours::kBusId == NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE);
static_assert(ours::kBusIdLegacy == NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE);
static_assert(ours::kMemoryV2 == nvmlMemory_v2);
static_assert(ours::kXidCriticalError == nvmlEventTypeXidCriticalError);
static_assert(ours::kNvLinkMaxLinks == NVML_NVLINK_MAX_LINKS);

static_assert(h::NVML_TOPOLOGY_INTERNAL == ::NVML_TOPOLOGY_INTERNAL);
static_assert(h::NVML_TOPOLOGY_SINGLE == ::NVML_TOPOLOGY_SINGLE);
static_assert(h::NVML_TOPOLOGY_MULTIPLE == ::NVML_TOPOLOGY_MULTIPLE);
static_assert(h::NVML_TOPOLOGY_HOSTBRIDGE == ::NVML_TOPOLOGY_HOSTBRIDGE);
static_assert(h::NVML_TOPOLOGY_NODE == ::NVML_TOPOLOGY_NODE);
static_assert(h::NVML_TOPOLOGY_SYSTEM == ::NVML_TOPOLOGY_SYSTEM);
static_assert(sizeof(::nvmlGpuTopologyLevel_t) == sizeof(int));
static_assert(h::NVML_P2P_CAPS_INDEX_READ == ::NVML_P2P_CAPS_INDEX_READ);
static_assert(h::NVML_P2P_CAPS_INDEX_WRITE == ::NVML_P2P_CAPS_INDEX_WRITE);
static_assert(h::NVML_P2P_CAPS_INDEX_NVLINK == ::NVML_P2P_CAPS_INDEX_NVLINK);
static_assert(h::NVML_P2P_CAPS_INDEX_ATOMICS == ::NVML_P2P_CAPS_INDEX_ATOMICS);
static_assert(h::NVML_P2P_CAPS_INDEX_PCI == ::NVML_P2P_CAPS_INDEX_PCI);
static_assert(sizeof(::nvmlGpuP2PCapsIndex_t) == sizeof(int));
static_assert(h::NVML_P2P_STATUS_OK == ::NVML_P2P_STATUS_OK);
static_assert(ours::kP2pChipsetNotSupported == ::NVML_P2P_STATUS_CHIPSET_NOT_SUPPORED);
static_assert(h::NVML_P2P_STATUS_GPU_NOT_SUPPORTED == ::NVML_P2P_STATUS_GPU_NOT_SUPPORTED);
static_assert(h::NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED ==
              ::NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED);
static_assert(h::NVML_P2P_STATUS_DISABLED_BY_REGKEY == ::NVML_P2P_STATUS_DISABLED_BY_REGKEY);
static_assert(h::NVML_P2P_STATUS_NOT_SUPPORTED == ::NVML_P2P_STATUS_NOT_SUPPORTED);
static_assert(h::NVML_P2P_STATUS_UNKNOWN == ::NVML_P2P_STATUS_UNKNOWN);
static_assert(sizeof(::nvmlGpuP2PStatus_t) == sizeof(int));
static_assert(h::NVML_FEATURE_DISABLED == ::NVML_FEATURE_DISABLED);
static_assert(h::NVML_FEATURE_ENABLED == ::NVML_FEATURE_ENABLED);
static_assert(sizeof(::nvmlEnableState_t) == sizeof(int));
static_assert(h::NVML_NVLINK_DEVICE_TYPE_GPU == ::NVML_NVLINK_DEVICE_TYPE_GPU);
static_assert(h::NVML_NVLINK_DEVICE_TYPE_IBMNPU == ::NVML_NVLINK_DEVICE_TYPE_IBMNPU);
static_assert(h::NVML_NVLINK_DEVICE_TYPE_SWITCH == ::NVML_NVLINK_DEVICE_TYPE_SWITCH);
static_assert(h::NVML_NVLINK_DEVICE_TYPE_UNKNOWN == ::NVML_NVLINK_DEVICE_TYPE_UNKNOWN);
static_assert(sizeof(::nvmlIntNvLinkDeviceType_t) == sizeof(int));

#define SAME_FIELD(ours_t, real_t, field)                                  \
  static_assert(offsetof(h::ours_t, field) == offsetof(::real_t, field) && \
                sizeof(h::ours_t::field) == sizeof(::real_t::field));
static_assert(sizeof(h::nvmlMemory_t) == sizeof(::nvmlMemory_t));
SAME_FIELD(nvmlMemory_t, nvmlMemory_t, total)
SAME_FIELD(nvmlMemory_t, nvmlMemory_t, free)
SAME_FIELD(nvmlMemory_t, nvmlMemory_t, used)
static_assert(sizeof(h::nvmlMemory_v2_t) == sizeof(::nvmlMemory_v2_t));
SAME_FIELD(nvmlMemory_v2_t, nvmlMemory_v2_t, version)
SAME_FIELD(nvmlMemory_v2_t, nvmlMemory_v2_t, reserved)
SAME_FIELD(nvmlMemory_v2_t, nvmlMemory_v2_t, free)
SAME_FIELD(nvmlMemory_v2_t, nvmlMemory_v2_t, used)
static_assert(sizeof(h::nvmlProcessInfo_t) == sizeof(::nvmlProcessInfo_v2_t));
SAME_FIELD(nvmlProcessInfo_t, nvmlProcessInfo_v2_t, pid)
SAME_FIELD(nvmlProcessInfo_t, nvmlProcessInfo_v2_t, usedGpuMemory)
SAME_FIELD(nvmlProcessInfo_t, nvmlProcessInfo_v2_t, computeInstanceId)
static_assert(sizeof(h::nvmlProcessInfo_v1_t) == sizeof(::nvmlProcessInfo_v1_t));
SAME_FIELD(nvmlProcessInfo_v1_t, nvmlProcessInfo_v1_t, pid)
SAME_FIELD(nvmlProcessInfo_v1_t, nvmlProcessInfo_v1_t, usedGpuMemory)
static_assert(sizeof(h::nvmlPciInfo_t) == sizeof(::nvmlPciInfo_t));
SAME_FIELD(nvmlPciInfo_t, nvmlPciInfo_t, busIdLegacy)
SAME_FIELD(nvmlPciInfo_t, nvmlPciInfo_t, domain)
SAME_FIELD(nvmlPciInfo_t, nvmlPciInfo_t, bus)
SAME_FIELD(nvmlPciInfo_t, nvmlPciInfo_t, device)
SAME_FIELD(nvmlPciInfo_t, nvmlPciInfo_t, pciDeviceId)
SAME_FIELD(nvmlPciInfo_t, nvmlPciInfo_t, pciSubSystemId)
SAME_FIELD(nvmlPciInfo_t, nvmlPciInfo_t, busId)
static_assert(sizeof(h::nvmlUtilization_t) == sizeof(::nvmlUtilization_t));
SAME_FIELD(nvmlUtilization_t, nvmlUtilization_t, gpu)
SAME_FIELD(nvmlUtilization_t, nvmlUtilization_t, memory)
static_assert(sizeof(h::nvmlProcessUtilizationSample_t) ==
              sizeof(::nvmlProcessUtilizationSample_t));
SAME_FIELD(nvmlProcessUtilizationSample_t, nvmlProcessUtilizationSample_t, pid)
SAME_FIELD(nvmlProcessUtilizationSample_t, nvmlProcessUtilizationSample_t, timeStamp)
SAME_FIELD(nvmlProcessUtilizationSample_t, nvmlProcessUtilizationSample_t, smUtil)
SAME_FIELD(nvmlProcessUtilizationSample_t, nvmlProcessUtilizationSample_t, memUtil)
SAME_FIELD(nvmlProcessUtilizationSample_t, nvmlProcessUtilizationSample_t, decUtil)
static_assert(sizeof(h::nvmlEventData_t) == sizeof(::nvmlEventData_t));
SAME_FIELD(nvmlEventData_t, nvmlEventData_t, device)
SAME_FIELD(nvmlEventData_t, nvmlEventData_t, eventType)
SAME_FIELD(nvmlEventData_t, nvmlEventData_t, eventData)
SAME_FIELD(nvmlEventData_t, nvmlEventData_t, gpuInstanceId)
SAME_FIELD(nvmlEventData_t, nvmlEventData_t, computeInstanceId)
// MIG structs, every field.
static_assert(sizeof(h::nvmlGpuInstancePlacement_t) == sizeof(::nvmlGpuInstancePlacement_t));
SAME_FIELD(nvmlGpuInstancePlacement_t, nvmlGpuInstancePlacement_t, start)
SAME_FIELD(nvmlGpuInstancePlacement_t, nvmlGpuInstancePlacement_t, size)
#define GI_PROFILE_FIELDS(t)            \
  SAME_FIELD(t, t, id)                  \
  SAME_FIELD(t, t, sliceCount)          \
  SAME_FIELD(t, t, instanceCount)       \
  SAME_FIELD(t, t, multiprocessorCount) \
  SAME_FIELD(t, t, copyEngineCount)     \
  SAME_FIELD(t, t, decoderCount)        \
  SAME_FIELD(t, t, encoderCount)        \
  SAME_FIELD(t, t, jpegCount)           \
  SAME_FIELD(t, t, ofaCount)            \
  SAME_FIELD(t, t, memorySizeMB)        \
  static_assert(sizeof(h::t) == sizeof(::t));
GI_PROFILE_FIELDS(nvmlGpuInstanceProfileInfo_t)
SAME_FIELD(nvmlGpuInstanceProfileInfo_t, nvmlGpuInstanceProfileInfo_t, isP2pSupported)
GI_PROFILE_FIELDS(nvmlGpuInstanceProfileInfo_v2_t)
SAME_FIELD(nvmlGpuInstanceProfileInfo_v2_t, nvmlGpuInstanceProfileInfo_v2_t, version)
SAME_FIELD(nvmlGpuInstanceProfileInfo_v2_t, nvmlGpuInstanceProfileInfo_v2_t, isP2pSupported)
SAME_FIELD(nvmlGpuInstanceProfileInfo_v2_t, nvmlGpuInstanceProfileInfo_v2_t, name)
GI_PROFILE_FIELDS(nvmlGpuInstanceProfileInfo_v3_t)
SAME_FIELD(nvmlGpuInstanceProfileInfo_v3_t, nvmlGpuInstanceProfileInfo_v3_t, version)
SAME_FIELD(nvmlGpuInstanceProfileInfo_v3_t, nvmlGpuInstanceProfileInfo_v3_t, name)
SAME_FIELD(nvmlGpuInstanceProfileInfo_v3_t, nvmlGpuInstanceProfileInfo_v3_t, capabilities)
#undef GI_PROFILE_FIELDS
static_assert(sizeof(h::nvmlGpuInstanceInfo_t) == sizeof(::nvmlGpuInstanceInfo_t));
SAME_FIELD(nvmlGpuInstanceInfo_t, nvmlGpuInstanceInfo_t, device)
SAME_FIELD(nvmlGpuInstanceInfo_t, nvmlGpuInstanceInfo_t, id)
SAME_FIELD(nvmlGpuInstanceInfo_t, nvmlGpuInstanceInfo_t, profileId)
SAME_FIELD(nvmlGpuInstanceInfo_t, nvmlGpuInstanceInfo_t, placement)
static_assert(sizeof(h::nvmlComputeInstancePlacement_t) ==
              sizeof(::nvmlComputeInstancePlacement_t));
SAME_FIELD(nvmlComputeInstancePlacement_t, nvmlComputeInstancePlacement_t, start)
SAME_FIELD(nvmlComputeInstancePlacement_t, nvmlComputeInstancePlacement_t, size)
#define CI_PROFILE_FIELDS(t)              \
  SAME_FIELD(t, t, id)                    \
  SAME_FIELD(t, t, sliceCount)            \
  SAME_FIELD(t, t, instanceCount)         \
  SAME_FIELD(t, t, multiprocessorCount)   \
  SAME_FIELD(t, t, sharedCopyEngineCount) \
  SAME_FIELD(t, t, sharedDecoderCount)    \
  SAME_FIELD(t, t, sharedEncoderCount)    \
  SAME_FIELD(t, t, sharedJpegCount)       \
  SAME_FIELD(t, t, sharedOfaCount)        \
  static_assert(sizeof(h::t) == sizeof(::t));
CI_PROFILE_FIELDS(nvmlComputeInstanceProfileInfo_t)
CI_PROFILE_FIELDS(nvmlComputeInstanceProfileInfo_v2_t)
SAME_FIELD(nvmlComputeInstanceProfileInfo_v2_t, nvmlComputeInstanceProfileInfo_v2_t, version)
SAME_FIELD(nvmlComputeInstanceProfileInfo_v2_t, nvmlComputeInstanceProfileInfo_v2_t, name)
CI_PROFILE_FIELDS(nvmlComputeInstanceProfileInfo_v3_t)
SAME_FIELD(nvmlComputeInstanceProfileInfo_v3_t, nvmlComputeInstanceProfileInfo_v3_t, version)
SAME_FIELD(nvmlComputeInstanceProfileInfo_v3_t, nvmlComputeInstanceProfileInfo_v3_t, name)
SAME_FIELD(nvmlComputeInstanceProfileInfo_v3_t, nvmlComputeInstanceProfileInfo_v3_t, capabilities)
#undef CI_PROFILE_FIELDS
static_assert(sizeof(h::nvmlComputeInstanceInfo_t) == sizeof(::nvmlComputeInstanceInfo_t));
SAME_FIELD(nvmlComputeInstanceInfo_t, nvmlComputeInstanceInfo_t, device)
SAME_FIELD(nvmlComputeInstanceInfo_t, nvmlComputeInstanceInfo_t, gpuInstance)
SAME_FIELD(nvmlComputeInstanceInfo_t, nvmlComputeInstanceInfo_t, id)
SAME_FIELD(nvmlComputeInstanceInfo_t, nvmlComputeInstanceInfo_t, profileId)
SAME_FIELD(nvmlComputeInstanceInfo_t, nvmlComputeInstanceInfo_t, placement)
static_assert(sizeof(h::nvmlDeviceAttributes_t) == sizeof(::nvmlDeviceAttributes_t));
SAME_FIELD(nvmlDeviceAttributes_t, nvmlDeviceAttributes_t, multiprocessorCount)
SAME_FIELD(nvmlDeviceAttributes_t, nvmlDeviceAttributes_t, gpuInstanceSliceCount)
SAME_FIELD(nvmlDeviceAttributes_t, nvmlDeviceAttributes_t, computeInstanceSliceCount)
SAME_FIELD(nvmlDeviceAttributes_t, nvmlDeviceAttributes_t, memorySizeMB)
#undef SAME_FIELD

}  // namespace

int main() {
  std::puts("NVML declarations match nvml.h");
  return 0;
}
