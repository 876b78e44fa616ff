#pragma once
// NVML for the daemons (node agent, device plugin): libnvidia-ml.so.1 loaded
// with dlopen at run time, so the binaries start, and say why, on a node
// without the NVIDIA driver. Symbols are resolved newest version first (_v3,
// _v2, plain); the ones newer drivers added (NUMA node, graphics processes,
// process utilisation, PCI info) may be missing without failing open(), only
// the call that needs them. Every failure is an Error naming the library,
// symbol or NVML call and its NVML code; last_error() keeps the raw code so a
// caller can tell a lost GPU (NVML_ERROR_GPU_IS_LOST) from anything else.
// Nothing throws.
//
//   auto nvml = hami::nvml::Library::open();
//   if (!nvml) { log(nvml.error().message); return; }
//   auto n = (*nvml)->device_count();
//   for (int i = 0; n && i < *n; ++i) {
//     auto info = (*nvml)->device(i);        // uuid, name, memory, PCI, NUMA...
//     auto procs = (*nvml)->processes(i);    // PID + device memory
//     auto sm = (*nvml)->process_samples(i, last_seen_us);  // PID + SM percent
//     if (!procs && (*nvml)->last_error() == hami::nvml::kGpuIsLost) mark_unhealthy(i);
//   }
//
// Xid critical errors (nvmlEventSet): register once, then wait in the loop.
// The event functions are optional too: without them watch_xid_events() is
// an Error and the rest works.
//
//   auto watched = (*nvml)->watch_xid_events();       // devices registered
//   auto ev = (*nvml)->wait_xid(500ms);                // nullopt: none in 500 ms
//   if (ev && *ev) mark_unhealthy((*ev)->index, (*ev)->xid);
//
// Topology, for placement (topology.hpp reads every pair with these): the
// closest PCIe ancestor two GPUs share, a GPU's active NVLinks and what is at
// their far end, and whether peer-to-peer access works between two GPUs. A
// driver without these functions answers kFunctionNotFound.
//
//   auto level = (*nvml)->common_ancestor(0, 1);   // kTopologySingle: one PCIe switch
//   auto links = (*nvml)->nvlinks(0);              // empty on a GPU without NVLink
//   auto p2p = (*nvml)->p2p_status(0, 1, kP2pRead);  // kP2pOk
//
// MIG, read only (nothing here creates or destroys an instance): a GPU's MIG
// mode, and the MIG devices (compute instances) it is partitioned into, each
// with its UUID, profile, memory, GPU/compute instance IDs and SMs. A GPU
// without MIG, or a driver without the MIG functions, answers MIG off; a
// MIG-capable GPU with MIG off has no MIG devices.
//
//   auto mode = (*nvml)->mig_mode(0);          // {current, pending}
//   auto migs = (*nvml)->mig_devices(0);       // empty with MIG off
//   for (auto& m : *migs) use(m.uuid, m.profile, m.memory_total, m.gpu_instance_id);
//   auto parent = (*nvml)->mig_parent("MIG-…");  // the GPU's NVML index
//
// Not thread-safe: one thread (the sampler, the health checker) owns a Library.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace hami::nvml {

// NVML return codes callers branch on (nvml.h's values).
inline constexpr int kSuccess = 0;
inline constexpr int kNotSupported = 3;
inline constexpr int kNotFound = 6;
inline constexpr int kTimeout = 10;
inline constexpr int kFunctionNotFound = 13;
inline constexpr int kGpuIsLost = 15;
inline constexpr int kUnknown = 999;

struct DeviceInfo {
  int index = 0;
  std::string uuid;        // "GPU-xxxxxxxx-..."
  std::string name;        // "NVIDIA H100 80GB HBM3"
  std::string pci_bus_id;  // "00000000:18:00.0"; empty when the driver cannot say
  uint64_t memory_total = 0;
  std::optional<int> numa_node;   // unknown on older drivers and single-node hosts
  std::optional<unsigned> minor;  // /dev/nvidia<minor>
  int cc_major = 0;               // CUDA compute capability; 0.0 when unknown
  int cc_minor = 0;
  // nvmlComputeMode_t (kComputeDefault...); unknown when the driver cannot say.
  std::optional<int> compute_mode;
};

// nvmlComputeMode_t values.
inline constexpr int kComputeDefault = 0;
inline constexpr int kComputeExclusiveThread = 1;  // deprecated by NVIDIA, still reported
inline constexpr int kComputeProhibited = 2;
inline constexpr int kComputeExclusiveProcess = 3;

// used = total - free: what the driver reserves for itself counts as used.
struct MemoryInfo {
  uint64_t total = 0;
  uint64_t used = 0;
  uint64_t free = 0;
};

// Percent of the driver's last sample period (1/6 s to 1 s by product).
struct Utilization {
  unsigned gpu = 0;
  unsigned memory = 0;
};

// A process holding device memory: compute and graphics lists merged by PID
// (a process in both counts once, with the larger figure). PIDs are as the
// driver reports them: host PIDs on a normal node.
struct ProcessMemory {
  uint32_t pid = 0;
  uint64_t used_bytes = 0;  // 0 when the driver cannot say (MIG without permission)
};

// One process's utilisation sample; timestamp_us is CLOCK_REALTIME in us.
struct ProcessSample {
  uint32_t pid = 0;
  uint64_t timestamp_us = 0;
  unsigned sm = 0;   // percent
  unsigned mem = 0;  // memory controller, percent
};

// An Xid critical error the driver reported (nvmlEventTypeXidCriticalError).
struct XidEvent {
  int index = -1;    // the device's NVML index; -1 when the driver did not say which
  uint64_t xid = 0;  // 999: an Xid the driver does not know
  // On a MIG-enabled GPU, the GPU and compute instance it happened in, where
  // the driver says (nvmlEventSetWait_v2); unset: the whole GPU.
  std::optional<unsigned> gpu_instance_id;
  std::optional<unsigned> compute_instance_id;
};

// nvmlGpuTopologyLevel_t: the closest PCIe ancestor two GPUs share, closest first.
inline constexpr int kTopologyInternal = 0;     // the same board
inline constexpr int kTopologySingle = 10;      // one PCIe switch
inline constexpr int kTopologyMultiple = 20;    // several switches, below one host bridge
inline constexpr int kTopologyHostBridge = 30;  // one host bridge
inline constexpr int kTopologyNode = 40;        // the host bridges of one NUMA node
inline constexpr int kTopologySystem = 50;      // across NUMA nodes

// nvmlGpuP2PCapsIndex_t: what p2p_status asks.
inline constexpr int kP2pRead = 0;
inline constexpr int kP2pWrite = 1;
inline constexpr int kP2pNvlink = 2;
inline constexpr int kP2pAtomics = 3;
inline constexpr int kP2pPci = 4;
// nvmlGpuP2PStatus_t: its answer; anything but kP2pOk means no peer access.
inline constexpr int kP2pOk = 0;
inline constexpr int kP2pUnknown = 6;

// nvmlIntNvLinkDeviceType_t: what is at an NVLink's far end.
inline constexpr int kNvLinkRemoteGpu = 0;
inline constexpr int kNvLinkRemoteSwitch = 2;
inline constexpr int kNvLinkRemoteUnknown = 0xFF;

// One active NVLink of a GPU.
struct NvLink {
  unsigned link = 0;          // 0 .. NVML_NVLINK_MAX_LINKS - 1
  std::string remote_bus_id;  // the far end's PCI bus id, as NVML formats it; "" unknown
  int remote_type = kNvLinkRemoteUnknown;  // a GPU, an NVSwitch, or unknown (old driver)
};

// nvmlDeviceGetMigMode: what the GPU runs in now and after its next reset.
struct MigMode {
  bool current = false;
  bool pending = false;
  bool operator==(const MigMode&) const = default;
};

// One MIG device (a compute instance) of a MIG-enabled GPU.
struct MigDevice {
  int parent_index = 0;  // the GPU's NVML index
  int mig_index = 0;     // nvmlDeviceGetMigDeviceHandleByIndex's index on that GPU
  std::string uuid;      // "MIG-xxxxxxxx-..."
  std::string name;      // "NVIDIA H100 80GB HBM3 MIG 1g.10gb"
  std::string profile;   // "1g.10gb" (from the name, else from the slices and memory)
  uint64_t memory_total = 0;
  unsigned gpu_instance_id = 0;
  unsigned compute_instance_id = 0;
  unsigned sm_count = 0;             // 0: the driver cannot say
  unsigned gpu_instance_slices = 0;  // compute slices of its GPU instance; 0: unknown
  unsigned compute_instance_slices = 0;
};

// The profile in a MIG device's NVML name: "NVIDIA H200 MIG 3g.71gb" ->
// "3g.71gb", "… MIG 1c.3g.71gb" -> "1c.3g.71gb"; "" when the name has none.
std::string mig_profile_from_name(std::string_view name);

class Library {
 public:
  // dlopen(path), resolve the symbols, nvmlInit_v2. The Error says which
  // library, symbol or NVML error failed and what to check.
  static Result<std::unique_ptr<Library>> open(const std::string& path = "libnvidia-ml.so.1");
  ~Library();  // nvmlEventSetFree, nvmlShutdown, dlclose
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  Result<int> device_count();
  Result<DeviceInfo> device(int index);
  Result<MemoryInfo> memory(int index);
  Result<Utilization> utilization(int index);
  // Grows its buffer while the driver answers NVML_ERROR_INSUFFICIENT_SIZE.
  Result<std::vector<ProcessMemory>> processes(int index);
  // Samples newer than since_us (0: whatever the driver holds); none yet
  // (NVML_ERROR_NOT_FOUND) is an empty vector. Pass the largest timestamp_us
  // seen as the next since_us.
  Result<std::vector<ProcessSample>> process_samples(int index, uint64_t since_us);
  Result<std::string> driver_version();

  // Creates the event set and registers Xid critical errors on every device
  // that supports them; returns how many are watched (0 when none can be).
  // Calling it again starts over with a new set. An Error, with last_error()
  // kFunctionNotFound, when the library has no event functions (driver too
  // old): callers go on without events.
  Result<int> watch_xid_events();
  // Waits up to `timeout` for the next Xid on a watched device: nullopt when
  // none came (NVML_ERROR_TIMEOUT). An Error if watch_xid_events() has not
  // succeeded, or for any other NVML failure.
  Result<std::optional<XidEvent>> wait_xid(std::chrono::milliseconds timeout);

  // nvmlDeviceGetTopologyCommonAncestor: a kTopology* level.
  Result<int> common_ancestor(int a, int b);
  // The GPU's enabled NVLinks (nvmlDeviceGetNvLinkState over every link
  // number); links the GPU does not have (NVML_ERROR_NOT_SUPPORTED or
  // INVALID_ARGUMENT) are skipped, so a GPU without NVLink has none. Where the
  // driver cannot say what is at a link's end, remote_bus_id is empty or
  // remote_type unknown.
  Result<std::vector<NvLink>> nvlinks(int index);
  // nvmlDeviceGetP2PStatus for one kP2p* capability: a P2P status (kP2pOk...).
  Result<int> p2p_status(int a, int b, int caps_index);

  // nvmlDeviceGetMigMode. MIG off where the GPU has no MIG
  // (NVML_ERROR_NOT_SUPPORTED) or the driver lacks the function; an Error
  // for anything else (a lost GPU).
  Result<MigMode> mig_mode(int index);
  // nvmlDeviceGetMaxMigDeviceCount: 0 with MIG off or without MIG.
  Result<int> max_mig_devices(int index);
  // The MIG device at `mig_index` (0 .. max_mig_devices - 1): nullopt where
  // that index holds none (NVML_ERROR_NOT_FOUND). An Error with MIG off.
  Result<std::optional<MigDevice>> mig_device(int index, int mig_index);
  // Every MIG device of the GPU, by index; empty with MIG off or without MIG.
  Result<std::vector<MigDevice>> mig_devices(int index);
  // The NVML index of the GPU a MIG device (by UUID) belongs to.
  Result<int> mig_parent(const std::string& mig_uuid);
  // The memory and processes of the MIG device at `mig_index`, for the node
  // agent's sampling (a MIG device's processes are listed on it; the driver
  // may not say their memory without permission: 0 then).
  Result<MemoryInfo> mig_memory(int index, int mig_index);
  Result<std::vector<ProcessMemory>> mig_processes(int index, int mig_index);

  // The raw nvmlReturn_t behind the last Error returned (kSuccess if none
  // yet), for callers that mark devices unhealthy.
  int last_error() const { return last_error_; }
  const std::string& path() const { return path_; }

  // "NVML_ERROR_GPU_IS_LOST" etc.; "NVML error <n>" for codes it does not know.
  static std::string code_name(int rc);

 private:
  struct Api;
  Library(std::string path, void* handle, std::unique_ptr<Api> api);
  // The handle of device `index`, cached after the first lookup.
  Result<void*> handle(int index);
  Result<MemoryInfo> memory_of(void* device, int index);
  Result<void*> mig_handle(int index, int mig_index);
  Result<std::vector<ProcessMemory>> processes_of(void* device, int index);
  // Records a failed call's code and describes it: "<call>(device N): <name> (<rc>, <text>)".
  Error fail(const char* call, int index, int rc);

  std::string path_;
  void* dl_ = nullptr;
  std::unique_ptr<Api> api_;
  std::vector<void*> handles_;
  void* events_ = nullptr;  // nvmlEventSet_t; freed by the destructor
  int last_error_ = kSuccess;
};

}  // namespace hami::nvml
