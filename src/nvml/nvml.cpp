#include "nvml/nvml.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

#include "nvml/nvml_abi.hpp"

namespace hami::nvml {

using namespace abi;  // NOLINT: the NVML names, as nvml.h spells them

namespace {

// Process lists start this large and grow while the driver asks for more.
constexpr unsigned kInitialProcesses = 64;
constexpr int kGrowAttempts = 8;

template <class F>
F lookup(void* dl, const char* name) {
  return reinterpret_cast<F>(::dlsym(dl, name));
}

// The first of `names` the library has; nullptr if none. `chosen` gets its name.
template <class F>
F lookup_first(void* dl, std::initializer_list<const char*> names, const char** chosen) {
  for (const char* n : names) {
    if (F f = lookup<F>(dl, n)) {
      *chosen = n;
      return f;
    }
  }
  return nullptr;
}

// Failures of an optional query that mean the device itself is gone: those
// are errors; anything else only makes the answer unknown.
bool device_gone(int rc) {
  return rc == NVML_ERROR_GPU_IS_LOST || rc == NVML_ERROR_RESET_REQUIRED;
}

// What to check when nvmlInit fails, by its code.
const char* init_hint(int rc) {
  switch (rc) {
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "the NVIDIA kernel driver is not loaded: is the driver installed on this node, and "
             "does nvidia-smi work there?";
    case NVML_ERROR_NO_PERMISSION:
      return "no permission to open /dev/nvidia*: is the container started with the NVIDIA "
             "runtime, or privileged?";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
      return "libnvidia-ml does not match the loaded kernel driver: was the driver upgraded "
             "without a reboot, or does the image carry its own libnvidia-ml?";
    default:
      return "does nvidia-smi work on this node, and is the container started with the NVIDIA "
             "runtime?";
  }
}

template <class Info>
using ListFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, Info*);

// One NVML process list, growing the buffer while the driver says it is too
// small (processes may start between two calls).
template <class Info>
int list_processes(ListFn<Info> fn, nvmlDevice_t h, std::vector<ProcessMemory>* out) {
  std::vector<Info> buf(kInitialProcesses);
  for (int attempt = 0; attempt < kGrowAttempts; ++attempt) {
    auto count = static_cast<unsigned>(buf.size());
    const nvmlReturn_t rc = fn(h, &count, buf.data());
    if (rc == NVML_SUCCESS) {
      for (unsigned i = 0; i < count && i < buf.size(); ++i) {
        const unsigned long long used = buf[i].usedGpuMemory;
        out->push_back({buf[i].pid, used == NVML_VALUE_NOT_AVAILABLE_ULL ? 0 : used});
      }
      return NVML_SUCCESS;
    }
    if (rc != NVML_ERROR_INSUFFICIENT_SIZE) return rc;
    buf.resize(std::max<size_t>(count, buf.size()) + 16);
  }
  return NVML_ERROR_INSUFFICIENT_SIZE;
}

}  // namespace

struct Library::Api {
  const char* init_name = "nvmlInit_v2";
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  const char* count_name = "nvmlDeviceGetCount_v2";
  nvmlReturn_t (*count)(unsigned int*) = nullptr;
  const char* handle_name = "nvmlDeviceGetHandleByIndex_v2";
  nvmlReturn_t (*handle_by_index)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*memory_v2)(nvmlDevice_t, nvmlMemory_v2_t*) = nullptr;
  nvmlReturn_t (*memory_v1)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  // _v3 and _v2 share a layout; the unversioned functions fill v1 structs.
  const char* compute_name = "nvmlDeviceGetComputeRunningProcesses_v3";
  ListFn<nvmlProcessInfo_t> compute = nullptr;
  ListFn<nvmlProcessInfo_v1_t> compute_v1 = nullptr;
  const char* graphics_name = "nvmlDeviceGetGraphicsRunningProcesses_v3";
  ListFn<nvmlProcessInfo_t> graphics = nullptr;
  ListFn<nvmlProcessInfo_v1_t> graphics_v1 = nullptr;
  nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*process_utilization)(nvmlDevice_t, nvmlProcessUtilizationSample_t*, unsigned int*,
                                      unsigned long long) = nullptr;
  nvmlReturn_t (*driver_version)(char*, unsigned int) = nullptr;
  nvmlReturn_t (*minor)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*pci_v3)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*numa)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*compute_capability)(nvmlDevice_t, int*, int*) = nullptr;
  // nvmlComputeMode_t is an enum of int size.
  nvmlReturn_t (*compute_mode)(nvmlDevice_t, int*) = nullptr;
  // Topology: optional, each on its own.
  nvmlReturn_t (*common_ancestor)(nvmlDevice_t, nvmlDevice_t, int*) = nullptr;
  nvmlReturn_t (*p2p_status)(nvmlDevice_t, nvmlDevice_t, int, int*) = nullptr;
  nvmlReturn_t (*nvlink_state)(nvmlDevice_t, unsigned, int*) = nullptr;
  nvmlReturn_t (*nvlink_remote_pci)(nvmlDevice_t, unsigned, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*nvlink_remote_type)(nvmlDevice_t, unsigned, int*) = nullptr;
  // MIG, read-only: optional, each on its own.
  nvmlReturn_t (*mig_mode)(nvmlDevice_t, unsigned*, unsigned*) = nullptr;
  nvmlReturn_t (*max_mig)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*mig_by_index)(nvmlDevice_t, unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*gi_id)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*ci_id)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*attributes)(nvmlDevice_t, nvmlDeviceAttributes_t*) = nullptr;
  nvmlReturn_t (*mig_parent)(nvmlDevice_t, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*by_uuid)(const char*, nvmlDevice_t*) = nullptr;
  // Events: optional as a group.
  nvmlReturn_t (*event_set_create)(nvmlEventSet_t*) = nullptr;
  nvmlReturn_t (*supported_events)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*register_events)(nvmlDevice_t, unsigned long long, nvmlEventSet_t) = nullptr;
  const char* event_wait_name = "nvmlEventSetWait_v2";
  nvmlReturn_t (*event_wait)(nvmlEventSet_t, nvmlEventData_t*, unsigned int) = nullptr;
  nvmlReturn_t (*event_set_free)(nvmlEventSet_t) = nullptr;

  // The first event function the library lacks, or nullptr.
  const char* missing_event_function() const {
    if (event_set_create == nullptr) return "nvmlEventSetCreate";
    if (supported_events == nullptr) return "nvmlDeviceGetSupportedEventTypes";
    if (register_events == nullptr) return "nvmlDeviceRegisterEvents";
    if (event_wait == nullptr) return "nvmlEventSetWait_v2";
    if (event_set_free == nullptr) return "nvmlEventSetFree";
    return nullptr;
  }

  // Fills every pointer the library has; the name of a required symbol it
  // lacks, or nullptr.
  const char* resolve(void* dl) {
    using Init = nvmlReturn_t (*)();
    using Count = nvmlReturn_t (*)(unsigned int*);
    using Handle = nvmlReturn_t (*)(unsigned int, nvmlDevice_t*);
    init = lookup_first<Init>(dl, {"nvmlInit_v2", "nvmlInit"}, &init_name);
    shutdown = lookup<Init>(dl, "nvmlShutdown");
    error_string = lookup<const char* (*)(nvmlReturn_t)>(dl, "nvmlErrorString");
    count = lookup_first<Count>(dl, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"}, &count_name);
    handle_by_index = lookup_first<Handle>(
        dl, {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"}, &handle_name);
    uuid = lookup<decltype(uuid)>(dl, "nvmlDeviceGetUUID");
    name = lookup<decltype(name)>(dl, "nvmlDeviceGetName");
    memory_v2 = lookup<decltype(memory_v2)>(dl, "nvmlDeviceGetMemoryInfo_v2");
    memory_v1 = lookup<decltype(memory_v1)>(dl, "nvmlDeviceGetMemoryInfo");
    compute = lookup_first<ListFn<nvmlProcessInfo_t>>(
        dl, {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"},
        &compute_name);
    if (compute == nullptr) {
      compute_name = "nvmlDeviceGetComputeRunningProcesses";
      compute_v1 = lookup<ListFn<nvmlProcessInfo_v1_t>>(dl, compute_name);
    }
    graphics = lookup_first<ListFn<nvmlProcessInfo_t>>(
        dl,
        {"nvmlDeviceGetGraphicsRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v2"},
        &graphics_name);
    if (graphics == nullptr) {
      graphics_name = "nvmlDeviceGetGraphicsRunningProcesses";
      graphics_v1 = lookup<ListFn<nvmlProcessInfo_v1_t>>(dl, graphics_name);
    }
    utilization = lookup<decltype(utilization)>(dl, "nvmlDeviceGetUtilizationRates");
    process_utilization =
        lookup<decltype(process_utilization)>(dl, "nvmlDeviceGetProcessUtilization");
    driver_version = lookup<decltype(driver_version)>(dl, "nvmlSystemGetDriverVersion");
    minor = lookup<decltype(minor)>(dl, "nvmlDeviceGetMinorNumber");
    pci_v3 = lookup<decltype(pci_v3)>(dl, "nvmlDeviceGetPciInfo_v3");
    numa = lookup<decltype(numa)>(dl, "nvmlDeviceGetNumaNodeId");
    compute_capability =
        lookup<decltype(compute_capability)>(dl, "nvmlDeviceGetCudaComputeCapability");
    compute_mode = lookup<decltype(compute_mode)>(dl, "nvmlDeviceGetComputeMode");
    common_ancestor = lookup<decltype(common_ancestor)>(dl, "nvmlDeviceGetTopologyCommonAncestor");
    p2p_status = lookup<decltype(p2p_status)>(dl, "nvmlDeviceGetP2PStatus");
    nvlink_state = lookup<decltype(nvlink_state)>(dl, "nvmlDeviceGetNvLinkState");
    nvlink_remote_pci =
        lookup<decltype(nvlink_remote_pci)>(dl, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    nvlink_remote_type =
        lookup<decltype(nvlink_remote_type)>(dl, "nvmlDeviceGetNvLinkRemoteDeviceType");
    mig_mode = lookup<decltype(mig_mode)>(dl, "nvmlDeviceGetMigMode");
    max_mig = lookup<decltype(max_mig)>(dl, "nvmlDeviceGetMaxMigDeviceCount");
    mig_by_index = lookup<decltype(mig_by_index)>(dl, "nvmlDeviceGetMigDeviceHandleByIndex");
    gi_id = lookup<decltype(gi_id)>(dl, "nvmlDeviceGetGpuInstanceId");
    ci_id = lookup<decltype(ci_id)>(dl, "nvmlDeviceGetComputeInstanceId");
    attributes = lookup<decltype(attributes)>(dl, "nvmlDeviceGetAttributes_v2");
    mig_parent = lookup<decltype(mig_parent)>(dl, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle");
    by_uuid = lookup<decltype(by_uuid)>(dl, "nvmlDeviceGetHandleByUUID");
    event_set_create = lookup<decltype(event_set_create)>(dl, "nvmlEventSetCreate");
    supported_events = lookup<decltype(supported_events)>(dl, "nvmlDeviceGetSupportedEventTypes");
    register_events = lookup<decltype(register_events)>(dl, "nvmlDeviceRegisterEvents");
    event_wait = lookup_first<decltype(event_wait)>(dl, {"nvmlEventSetWait_v2", "nvmlEventSetWait"},
                                                    &event_wait_name);
    event_set_free = lookup<decltype(event_set_free)>(dl, "nvmlEventSetFree");

    if (init == nullptr) return "nvmlInit_v2";
    if (shutdown == nullptr) return "nvmlShutdown";
    if (count == nullptr) return "nvmlDeviceGetCount_v2";
    if (handle_by_index == nullptr) return "nvmlDeviceGetHandleByIndex_v2";
    if (uuid == nullptr) return "nvmlDeviceGetUUID";
    if (name == nullptr) return "nvmlDeviceGetName";
    if (memory_v2 == nullptr && memory_v1 == nullptr) return "nvmlDeviceGetMemoryInfo";
    if (compute == nullptr && compute_v1 == nullptr) return "nvmlDeviceGetComputeRunningProcesses";
    return nullptr;
  }
};

Result<std::unique_ptr<Library>> Library::open(const std::string& path) {
  ::dlerror();
  void* dl = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (dl == nullptr) {
    const char* why = ::dlerror();
    return Error{path + ": cannot load NVML (" + (why != nullptr ? why : "unknown dlopen error") +
                 "): is the NVIDIA driver installed on this node, and is the container started "
                 "with the NVIDIA runtime (runtimeClassName: nvidia)?"};
  }
  auto api = std::make_unique<Api>();
  if (const char* missing = api->resolve(dl)) {
    ::dlclose(dl);
    return Error{path + ": symbol " + missing +
                 " not found: the library is not NVIDIA's NVML, or its driver is too old"};
  }
  if (const nvmlReturn_t rc = api->init(); rc != NVML_SUCCESS) {
    std::string message = path + ": " + api->init_name + " failed: " + code_name(rc) + " (" +
                          std::to_string(rc) + "): " + init_hint(rc);
    ::dlclose(dl);
    return Error{std::move(message)};
  }
  return std::unique_ptr<Library>(new Library(path, dl, std::move(api)));
}

Library::Library(std::string path, void* handle, std::unique_ptr<Api> api)
    : path_(std::move(path)), dl_(handle), api_(std::move(api)) {}

Library::~Library() {
  if (events_ != nullptr) api_->event_set_free(static_cast<nvmlEventSet_t>(events_));
  api_->shutdown();
  ::dlclose(dl_);
}

std::string Library::code_name(int rc) {
  switch (rc) {
    case NVML_SUCCESS:
      return "NVML_SUCCESS";
    case NVML_ERROR_UNINITIALIZED:
      return "NVML_ERROR_UNINITIALIZED";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "NVML_ERROR_INVALID_ARGUMENT";
    case NVML_ERROR_NOT_SUPPORTED:
      return "NVML_ERROR_NOT_SUPPORTED";
    case NVML_ERROR_NO_PERMISSION:
      return "NVML_ERROR_NO_PERMISSION";
    case NVML_ERROR_NOT_FOUND:
      return "NVML_ERROR_NOT_FOUND";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "NVML_ERROR_INSUFFICIENT_SIZE";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "NVML_ERROR_DRIVER_NOT_LOADED";
    case NVML_ERROR_TIMEOUT:
      return "NVML_ERROR_TIMEOUT";
    case NVML_ERROR_LIBRARY_NOT_FOUND:
      return "NVML_ERROR_LIBRARY_NOT_FOUND";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
      return "NVML_ERROR_FUNCTION_NOT_FOUND";
    case NVML_ERROR_GPU_IS_LOST:
      return "NVML_ERROR_GPU_IS_LOST";
    case NVML_ERROR_RESET_REQUIRED:
      return "NVML_ERROR_RESET_REQUIRED";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
      return "NVML_ERROR_LIB_RM_VERSION_MISMATCH";
    case NVML_ERROR_IN_USE:
      return "NVML_ERROR_IN_USE";
    case NVML_ERROR_INSUFFICIENT_RESOURCES:
      return "NVML_ERROR_INSUFFICIENT_RESOURCES";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
      return "NVML_ERROR_ARGUMENT_VERSION_MISMATCH";
    case NVML_ERROR_UNKNOWN:
      return "NVML_ERROR_UNKNOWN";
    default:
      return "NVML error " + std::to_string(rc);
  }
}

Error Library::fail(const char* call, int index, int rc) {
  last_error_ = rc;
  std::string m = call;
  if (index >= 0) m += "(device " + std::to_string(index) + ")";
  m += ": " + code_name(rc) + " (" + std::to_string(rc);
  if (api_->error_string != nullptr) {
    if (const char* text = api_->error_string(rc)) m += std::string(", ") + text;
  }
  m += ")";
  if (device_gone(rc)) m += ": the GPU has fallen off the bus or needs a reset (see dmesg for Xid)";
  if (rc == NVML_ERROR_FUNCTION_NOT_FOUND) m += ": not in " + path_ + " (driver too old)";
  return Error{std::move(m)};
}

Result<void*> Library::handle(int index) {
  if (index < 0) {
    last_error_ = NVML_ERROR_INVALID_ARGUMENT;
    return Error{"device index " + std::to_string(index) + ": out of range"};
  }
  const auto i = static_cast<size_t>(index);
  if (i < handles_.size() && handles_[i] != nullptr) return handles_[i];
  nvmlDevice_t h = nullptr;
  if (const nvmlReturn_t rc = api_->handle_by_index(static_cast<unsigned>(index), &h);
      rc != NVML_SUCCESS) {
    return fail(api_->handle_name, index, rc);
  }
  if (handles_.size() <= i) handles_.resize(i + 1, nullptr);
  handles_[i] = h;
  return static_cast<void*>(h);
}

Result<int> Library::device_count() {
  unsigned n = 0;
  if (const nvmlReturn_t rc = api_->count(&n); rc != NVML_SUCCESS)
    return fail(api_->count_name, -1, rc);
  return static_cast<int>(n);
}

Result<DeviceInfo> Library::device(int index) {
  auto hr = handle(index);
  if (!hr) return hr.error();
  auto* h = static_cast<nvmlDevice_t>(*hr);
  DeviceInfo info;
  info.index = index;
  char buf[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
  if (const nvmlReturn_t rc = api_->uuid(h, buf, sizeof buf); rc != NVML_SUCCESS)
    return fail("nvmlDeviceGetUUID", index, rc);
  info.uuid = buf;
  buf[0] = '\0';
  if (const nvmlReturn_t rc = api_->name(h, buf, sizeof buf); rc != NVML_SUCCESS)
    return fail("nvmlDeviceGetName", index, rc);
  info.name = buf;
  auto mem = memory(index);
  if (!mem) return mem.error();
  info.memory_total = mem->total;

  // The rest is optional: unknown when the driver lacks it or cannot say.
  if (api_->pci_v3 != nullptr) {
    nvmlPciInfo_t pci{};
    const nvmlReturn_t rc = api_->pci_v3(h, &pci);
    if (rc == NVML_SUCCESS) {
      pci.busId[sizeof pci.busId - 1] = '\0';
      info.pci_bus_id = pci.busId;
    } else if (device_gone(rc)) {
      return fail("nvmlDeviceGetPciInfo_v3", index, rc);
    }
  }
  if (api_->numa != nullptr) {
    unsigned node = 0;
    const nvmlReturn_t rc = api_->numa(h, &node);
    if (rc == NVML_SUCCESS) {
      info.numa_node = static_cast<int>(node);
    } else if (device_gone(rc)) {
      return fail("nvmlDeviceGetNumaNodeId", index, rc);
    }
  }
  if (api_->minor != nullptr) {
    unsigned minor = 0;
    const nvmlReturn_t rc = api_->minor(h, &minor);
    if (rc == NVML_SUCCESS) {
      info.minor = minor;
    } else if (device_gone(rc)) {
      return fail("nvmlDeviceGetMinorNumber", index, rc);
    }
  }
  if (api_->compute_capability != nullptr) {
    int major = 0;
    int minor = 0;
    const nvmlReturn_t rc = api_->compute_capability(h, &major, &minor);
    if (rc == NVML_SUCCESS) {
      info.cc_major = major;
      info.cc_minor = minor;
    } else if (device_gone(rc)) {
      return fail("nvmlDeviceGetCudaComputeCapability", index, rc);
    }
  }
  if (api_->compute_mode != nullptr) {
    int mode = 0;
    const nvmlReturn_t rc = api_->compute_mode(h, &mode);
    if (rc == NVML_SUCCESS) {
      info.compute_mode = mode;
    } else if (device_gone(rc)) {
      return fail("nvmlDeviceGetComputeMode", index, rc);
    }
  }
  return info;
}

Result<MemoryInfo> Library::memory(int index) {
  auto hr = handle(index);
  if (!hr) return hr.error();
  return memory_of(*hr, index);
}

Result<MemoryInfo> Library::memory_of(void* device, int index) {
  auto* h = static_cast<nvmlDevice_t>(device);
  if (api_->memory_v2 != nullptr) {
    nvmlMemory_v2_t m{};
    m.version = nvmlMemory_v2;
    const nvmlReturn_t rc = api_->memory_v2(h, &m);
    if (rc == NVML_SUCCESS) return MemoryInfo{m.total, m.total - std::min(m.total, m.free), m.free};
    // A driver that exports _v2 but cannot answer it: ask the old way.
    const bool fall_back = api_->memory_v1 != nullptr &&
                           (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_FUNCTION_NOT_FOUND ||
                            rc == NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    if (!fall_back) return fail("nvmlDeviceGetMemoryInfo_v2", index, rc);
  }
  nvmlMemory_t m{};
  if (const nvmlReturn_t rc = api_->memory_v1(h, &m); rc != NVML_SUCCESS)
    return fail("nvmlDeviceGetMemoryInfo", index, rc);
  return MemoryInfo{m.total, m.total - std::min(m.total, m.free), m.free};
}

Result<Utilization> Library::utilization(int index) {
  if (api_->utilization == nullptr)
    return fail("nvmlDeviceGetUtilizationRates", index, NVML_ERROR_FUNCTION_NOT_FOUND);
  auto hr = handle(index);
  if (!hr) return hr.error();
  nvmlUtilization_t u{};
  if (const nvmlReturn_t rc = api_->utilization(static_cast<nvmlDevice_t>(*hr), &u);
      rc != NVML_SUCCESS) {
    return fail("nvmlDeviceGetUtilizationRates", index, rc);
  }
  return Utilization{u.gpu, u.memory};
}

Result<std::vector<ProcessMemory>> Library::processes(int index) {
  auto hr = handle(index);
  if (!hr) return hr.error();
  return processes_of(*hr, index);
}

Result<std::vector<ProcessMemory>> Library::processes_of(void* device, int index) {
  auto* h = static_cast<nvmlDevice_t>(device);
  std::vector<ProcessMemory> listed;
  const int rc = api_->compute != nullptr ? list_processes(api_->compute, h, &listed)
                                          : list_processes(api_->compute_v1, h, &listed);
  if (rc != NVML_SUCCESS) return fail(api_->compute_name, index, rc);
  if (api_->graphics != nullptr || api_->graphics_v1 != nullptr) {
    const int grc = api_->graphics != nullptr ? list_processes(api_->graphics, h, &listed)
                                              : list_processes(api_->graphics_v1, h, &listed);
    // Compute GPUs may not support the graphics list; only a lost GPU matters.
    if (grc != NVML_SUCCESS && device_gone(grc)) return fail(api_->graphics_name, index, grc);
  }
  std::map<uint32_t, uint64_t> merged;
  for (const ProcessMemory& p : listed) {
    uint64_t& used = merged[p.pid];
    used = std::max(used, p.used_bytes);
  }
  std::vector<ProcessMemory> out;
  out.reserve(merged.size());
  for (const auto& [pid, used] : merged)
    out.push_back({pid, used});
  return out;
}

Result<std::vector<ProcessSample>> Library::process_samples(int index, uint64_t since_us) {
  static constexpr const char* kCall = "nvmlDeviceGetProcessUtilization";
  if (api_->process_utilization == nullptr)
    return fail(kCall, index, NVML_ERROR_FUNCTION_NOT_FOUND);
  auto hr = handle(index);
  if (!hr) return hr.error();
  auto* h = static_cast<nvmlDevice_t>(*hr);
  // First the count (a null buffer), then the samples; more may arrive in between.
  unsigned count = 0;
  nvmlReturn_t rc = api_->process_utilization(h, nullptr, &count, since_us);
  std::vector<nvmlProcessUtilizationSample_t> buf;
  for (int attempt = 0;; ++attempt) {
    if (rc == NVML_ERROR_NOT_FOUND || (rc == NVML_SUCCESS && count == 0))
      return std::vector<ProcessSample>{};
    if (rc != NVML_SUCCESS && rc != NVML_ERROR_INSUFFICIENT_SIZE) return fail(kCall, index, rc);
    if (rc == NVML_SUCCESS && !buf.empty()) {
      std::vector<ProcessSample> out;
      out.reserve(count);
      for (unsigned i = 0; i < count && i < buf.size(); ++i)
        out.push_back({buf[i].pid, buf[i].timeStamp, buf[i].smUtil, buf[i].memUtil});
      return out;
    }
    if (attempt == kGrowAttempts) return fail(kCall, index, NVML_ERROR_INSUFFICIENT_SIZE);
    buf.resize(std::max<size_t>(count, buf.size()) + 8);
    count = static_cast<unsigned>(buf.size());
    rc = api_->process_utilization(h, buf.data(), &count, since_us);
  }
}

Result<std::string> Library::driver_version() {
  if (api_->driver_version == nullptr)
    return fail("nvmlSystemGetDriverVersion", -1, NVML_ERROR_FUNCTION_NOT_FOUND);
  char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
  if (const nvmlReturn_t rc = api_->driver_version(buf, sizeof buf); rc != NVML_SUCCESS)
    return fail("nvmlSystemGetDriverVersion", -1, rc);
  return std::string(buf);
}

Result<int> Library::common_ancestor(int a, int b) {
  static constexpr const char* kCall = "nvmlDeviceGetTopologyCommonAncestor";
  if (api_->common_ancestor == nullptr) return fail(kCall, a, NVML_ERROR_FUNCTION_NOT_FOUND);
  auto ha = handle(a);
  if (!ha) return ha.error();
  auto hb = handle(b);
  if (!hb) return hb.error();
  int level = 0;
  if (const nvmlReturn_t rc = api_->common_ancestor(static_cast<nvmlDevice_t>(*ha),
                                                    static_cast<nvmlDevice_t>(*hb), &level);
      rc != NVML_SUCCESS) {
    return fail(kCall, a, rc);
  }
  return level;
}

Result<int> Library::p2p_status(int a, int b, int caps_index) {
  static constexpr const char* kCall = "nvmlDeviceGetP2PStatus";
  if (api_->p2p_status == nullptr) return fail(kCall, a, NVML_ERROR_FUNCTION_NOT_FOUND);
  auto ha = handle(a);
  if (!ha) return ha.error();
  auto hb = handle(b);
  if (!hb) return hb.error();
  int status = NVML_P2P_STATUS_UNKNOWN;
  if (const nvmlReturn_t rc = api_->p2p_status(static_cast<nvmlDevice_t>(*ha),
                                               static_cast<nvmlDevice_t>(*hb), caps_index, &status);
      rc != NVML_SUCCESS) {
    return fail(kCall, a, rc);
  }
  return status;
}

Result<std::vector<NvLink>> Library::nvlinks(int index) {
  if (api_->nvlink_state == nullptr)
    return fail("nvmlDeviceGetNvLinkState", index, NVML_ERROR_FUNCTION_NOT_FOUND);
  auto hr = handle(index);
  if (!hr) return hr.error();
  auto* h = static_cast<nvmlDevice_t>(*hr);
  // A link number the GPU does not have answers NOT_SUPPORTED or
  // INVALID_ARGUMENT (both seen, by product), as NVIDIA's own tools treat them.
  auto absent = [](nvmlReturn_t rc) {
    return rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_INVALID_ARGUMENT;
  };
  std::vector<NvLink> out;
  for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
    int state = NVML_FEATURE_DISABLED;
    if (const nvmlReturn_t rc = api_->nvlink_state(h, link, &state); rc != NVML_SUCCESS) {
      if (absent(rc)) continue;
      return fail("nvmlDeviceGetNvLinkState", index, rc);
    }
    if (state != NVML_FEATURE_ENABLED) continue;
    NvLink l;
    l.link = link;
    if (api_->nvlink_remote_pci != nullptr) {
      nvmlPciInfo_t pci{};
      const nvmlReturn_t rc = api_->nvlink_remote_pci(h, link, &pci);
      if (rc == NVML_SUCCESS) {
        pci.busId[sizeof pci.busId - 1] = '\0';
        l.remote_bus_id = pci.busId;
      } else if (device_gone(rc)) {
        return fail("nvmlDeviceGetNvLinkRemotePciInfo_v2", index, rc);
      }
    }
    if (api_->nvlink_remote_type != nullptr) {
      int type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
      const nvmlReturn_t rc = api_->nvlink_remote_type(h, link, &type);
      if (rc == NVML_SUCCESS) {
        l.remote_type = type;
      } else if (device_gone(rc)) {
        return fail("nvmlDeviceGetNvLinkRemoteDeviceType", index, rc);
      }
    }
    out.push_back(std::move(l));
  }
  return out;
}

Result<int> Library::watch_xid_events() {
  if (const char* missing = api_->missing_event_function()) {
    last_error_ = NVML_ERROR_FUNCTION_NOT_FOUND;
    return Error{path_ + ": NVML events are not available (" + missing +
                 " not found: driver too old); Xid errors are not watched"};
  }
  if (events_ != nullptr) {
    api_->event_set_free(static_cast<nvmlEventSet_t>(events_));
    events_ = nullptr;
  }
  auto n = device_count();
  if (!n) return n.error();
  nvmlEventSet_t set = nullptr;
  if (const nvmlReturn_t rc = api_->event_set_create(&set); rc != NVML_SUCCESS)
    return fail("nvmlEventSetCreate", -1, rc);
  events_ = set;
  int watched = 0;
  for (int i = 0; i < *n; ++i) {
    // A device that cannot be asked or registered is not watched; the
    // caller's periodic checks still cover it.
    auto hr = handle(i);
    if (!hr) continue;
    auto* h = static_cast<nvmlDevice_t>(*hr);
    unsigned long long supported = 0;
    if (api_->supported_events(h, &supported) != NVML_SUCCESS ||
        (supported & nvmlEventTypeXidCriticalError) == 0)
      continue;
    if (api_->register_events(h, nvmlEventTypeXidCriticalError, set) == NVML_SUCCESS) ++watched;
  }
  return watched;
}

Result<std::optional<XidEvent>> Library::wait_xid(std::chrono::milliseconds timeout) {
  if (events_ == nullptr) {
    last_error_ = NVML_ERROR_UNINITIALIZED;
    return Error{"wait_xid: no event set (watch_xid_events has not succeeded)"};
  }
  const auto ms = static_cast<unsigned>(
      std::clamp<int64_t>(timeout.count(), 0, std::numeric_limits<unsigned>::max()));
  nvmlEventData_t data{};
  data.gpuInstanceId = data.computeInstanceId = 0xFFFFFFFFu;
  const nvmlReturn_t rc = api_->event_wait(static_cast<nvmlEventSet_t>(events_), &data, ms);
  if (rc == NVML_ERROR_TIMEOUT) return std::optional<XidEvent>{};
  if (rc != NVML_SUCCESS) return fail(api_->event_wait_name, -1, rc);
  // Only Xid critical errors are registered; anything else is no Xid.
  if ((data.eventType & nvmlEventTypeXidCriticalError) == 0) return std::optional<XidEvent>{};
  XidEvent ev;
  ev.xid = data.eventData;
  if (data.gpuInstanceId != 0xFFFFFFFFu) ev.gpu_instance_id = data.gpuInstanceId;
  if (data.computeInstanceId != 0xFFFFFFFFu) ev.compute_instance_id = data.computeInstanceId;
  const auto it = std::find(handles_.begin(), handles_.end(), static_cast<void*>(data.device));
  if (data.device != nullptr && it != handles_.end())
    ev.index = static_cast<int>(it - handles_.begin());
  return std::optional<XidEvent>{ev};
}

std::string mig_profile_from_name(std::string_view name) {
  // The driver names a MIG device "<GPU name> MIG <profile>".
  constexpr std::string_view kMark = " MIG ";
  const size_t at = name.rfind(kMark);
  if (at == std::string_view::npos) return {};
  std::string_view p = name.substr(at + kMark.size());
  while (!p.empty() && p.back() == ' ')
    p.remove_suffix(1);
  if (p.empty() || p.find(' ') != std::string_view::npos) return {};
  return std::string(p);
}

Result<MigMode> Library::mig_mode(int index) {
  static constexpr const char* kCall = "nvmlDeviceGetMigMode";
  // A driver without MIG functions has no MIG-enabled GPU.
  if (api_->mig_mode == nullptr) return MigMode{};
  auto hr = handle(index);
  if (!hr) return hr.error();
  unsigned current = NVML_DEVICE_MIG_DISABLE;
  unsigned pending = NVML_DEVICE_MIG_DISABLE;
  const nvmlReturn_t rc = api_->mig_mode(static_cast<nvmlDevice_t>(*hr), &current, &pending);
  if (rc == NVML_ERROR_NOT_SUPPORTED) return MigMode{};
  if (rc != NVML_SUCCESS) return fail(kCall, index, rc);
  return MigMode{current == NVML_DEVICE_MIG_ENABLE, pending == NVML_DEVICE_MIG_ENABLE};
}

Result<int> Library::max_mig_devices(int index) {
  if (api_->max_mig == nullptr) return 0;
  auto hr = handle(index);
  if (!hr) return hr.error();
  unsigned n = 0;
  const nvmlReturn_t rc = api_->max_mig(static_cast<nvmlDevice_t>(*hr), &n);
  if (rc == NVML_ERROR_NOT_SUPPORTED) return 0;
  if (rc != NVML_SUCCESS) return fail("nvmlDeviceGetMaxMigDeviceCount", index, rc);
  return static_cast<int>(n);
}

Result<void*> Library::mig_handle(int index, int mig_index) {
  static constexpr const char* kCall = "nvmlDeviceGetMigDeviceHandleByIndex";
  if (api_->mig_by_index == nullptr) return fail(kCall, index, NVML_ERROR_FUNCTION_NOT_FOUND);
  if (mig_index < 0) {
    last_error_ = NVML_ERROR_INVALID_ARGUMENT;
    return Error{"MIG device index " + std::to_string(mig_index) + ": out of range"};
  }
  auto hr = handle(index);
  if (!hr) return hr.error();
  nvmlDevice_t m = nullptr;
  const nvmlReturn_t rc =
      api_->mig_by_index(static_cast<nvmlDevice_t>(*hr), static_cast<unsigned>(mig_index), &m);
  if (rc != NVML_SUCCESS) return fail(kCall, index, rc);
  return static_cast<void*>(m);
}

Result<MemoryInfo> Library::mig_memory(int index, int mig_index) {
  auto m = mig_handle(index, mig_index);
  if (!m) return m.error();
  return memory_of(*m, index);
}

Result<std::vector<ProcessMemory>> Library::mig_processes(int index, int mig_index) {
  auto m = mig_handle(index, mig_index);
  if (!m) return m.error();
  return processes_of(*m, index);
}

Result<std::optional<MigDevice>> Library::mig_device(int index, int mig_index) {
  auto mh = mig_handle(index, mig_index);
  if (!mh) {
    if (last_error_ == NVML_ERROR_NOT_FOUND) return std::optional<MigDevice>{};
    return mh.error();
  }
  auto* m = static_cast<nvmlDevice_t>(*mh);
  nvmlReturn_t rc = NVML_SUCCESS;
  MigDevice d;
  d.parent_index = index;
  d.mig_index = mig_index;
  char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  if (rc = api_->uuid(m, buf, sizeof buf); rc != NVML_SUCCESS)
    return fail("nvmlDeviceGetUUID(MIG device)", index, rc);
  d.uuid = buf;
  buf[0] = '\0';
  if (rc = api_->name(m, buf, sizeof buf); rc == NVML_SUCCESS) {
    d.name = buf;
    d.profile = mig_profile_from_name(d.name);
  } else if (device_gone(rc)) {
    return fail("nvmlDeviceGetName(MIG device)", index, rc);
  }
  auto mem = memory_of(m, index);
  if (!mem) return mem.error();
  d.memory_total = mem->total;
  // The instance IDs name the device to the driver (Xid events, process
  // lists): without them it cannot be told apart, so they are required.
  if (api_->gi_id == nullptr || api_->ci_id == nullptr)
    return fail("nvmlDeviceGetGpuInstanceId", index, NVML_ERROR_FUNCTION_NOT_FOUND);
  if (rc = api_->gi_id(m, &d.gpu_instance_id); rc != NVML_SUCCESS)
    return fail("nvmlDeviceGetGpuInstanceId", index, rc);
  if (rc = api_->ci_id(m, &d.compute_instance_id); rc != NVML_SUCCESS)
    return fail("nvmlDeviceGetComputeInstanceId", index, rc);
  if (api_->attributes != nullptr) {
    nvmlDeviceAttributes_t a{};
    rc = api_->attributes(m, &a);
    if (rc == NVML_SUCCESS) {
      d.sm_count = a.multiprocessorCount;
      d.gpu_instance_slices = a.gpuInstanceSliceCount;
      d.compute_instance_slices = a.computeInstanceSliceCount;
    } else if (device_gone(rc)) {
      return fail("nvmlDeviceGetAttributes_v2", index, rc);
    }
  }
  // A name without the profile (a driver that names MIG devices otherwise):
  // NVIDIA's own form, "<slices>g.<GB>gb", from the attributes.
  if (d.profile.empty() && d.gpu_instance_slices > 0) {
    const uint64_t gb = (d.memory_total + (1ull << 30) - 1) >> 30;
    d.profile = std::to_string(d.gpu_instance_slices) + "g." + std::to_string(gb) + "gb";
    if (d.compute_instance_slices > 0 && d.compute_instance_slices != d.gpu_instance_slices)
      d.profile = std::to_string(d.compute_instance_slices) + "c." + d.profile;
  }
  return std::optional<MigDevice>{std::move(d)};
}

Result<std::vector<MigDevice>> Library::mig_devices(int index) {
  std::vector<MigDevice> out;
  auto mode = mig_mode(index);
  if (!mode) return mode.error();
  if (!mode->current) return out;
  auto max = max_mig_devices(index);
  if (!max) return max.error();
  for (int i = 0; i < *max; ++i) {
    auto d = mig_device(index, i);
    if (!d) return d.error();
    if (*d) out.push_back(std::move(**d));
  }
  return out;
}

Result<int> Library::mig_parent(const std::string& mig_uuid) {
  if (api_->by_uuid == nullptr)
    return fail("nvmlDeviceGetHandleByUUID", -1, NVML_ERROR_FUNCTION_NOT_FOUND);
  if (api_->mig_parent == nullptr)
    return fail("nvmlDeviceGetDeviceHandleFromMigDeviceHandle", -1, NVML_ERROR_FUNCTION_NOT_FOUND);
  nvmlDevice_t m = nullptr;
  if (const nvmlReturn_t rc = api_->by_uuid(mig_uuid.c_str(), &m); rc != NVML_SUCCESS)
    return Error{fail("nvmlDeviceGetHandleByUUID", -1, rc).message + " for " + mig_uuid};
  nvmlDevice_t parent = nullptr;
  if (const nvmlReturn_t rc = api_->mig_parent(m, &parent); rc != NVML_SUCCESS)
    return fail("nvmlDeviceGetDeviceHandleFromMigDeviceHandle", -1, rc);
  auto n = device_count();
  if (!n) return n.error();
  for (int i = 0; i < *n; ++i) {
    auto h = handle(i);
    if (h && *h == static_cast<void*>(parent)) return i;
  }
  last_error_ = NVML_ERROR_NOT_FOUND;
  return Error{mig_uuid + ": its GPU is not among the " + std::to_string(*n) + " NVML lists"};
}

}  // namespace hami::nvml
