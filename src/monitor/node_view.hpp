#pragma once
// NodeView: everything one pass of the node agent learned, as plain data. The
// agent builds a fresh one each period and publishes it whole; /metrics,
// `vgpu top` and the debug endpoint render from the latest view, so a scrape
// reads no file and asks no GPU.
//
//   std::shared_ptr<const NodeView> v = agent.latest();
//   for (const ContainerView& c : v->containers)
//     for (const ContainerDevice& d : c.devices) show(c.pod_name, d.uuid, d.used, d.memory_limit);

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "monitor/container_files.hpp"
#include "monitor/gpu_sampler.hpp"

namespace hami::monitor {

struct ContainerDevice {
  int vdevice_index = 0;  // index inside the container (the state file's device index)
  std::string uuid;
  uint64_t memory_limit = 0;  // bytes, 0 = none
  uint64_t sm_limit = 0;      // percent; 0 or 100 = none
  uint64_t used = 0;          // Σ used.total of the live slots: what the limit counts
  uint64_t context = 0;
  uint64_t module = 0;
  uint64_t data = 0;
  uint64_t spilled = 0;    // of data, the bytes in host memory (CUDA_OVERSUBSCRIBE)
  uint64_t nvml_used = 0;  // Σ NVML per-process memory of the container's processes
  // Percent of the GPU's time the container's kernels ran since the last
  // pass, from the GPU time its processes publish (sm_from_gpu_time), or
  // else Σ NVML per-process SM utilisation.
  unsigned sm_util = 0;
  bool sm_from_gpu_time = false;
};

struct ContainerProcess {
  int slot = 0;
  int32_t pid = 0;                  // inside the container
  bool live = false;                // registered and its owner not known dead
  std::optional<int32_t> host_pid;  // resolved this pass
  std::string unresolved_reason;    // when host_pid is empty
};

struct ContainerView {
  ContainerRef ref;
  std::string path;
  std::string pod_namespace;  // "" when unknown
  std::string pod_name;       // "" when unknown
  int32_t priority = 1;
  int32_t recent_kernel = 0;  // after this pass's feedback
  int32_t utilization_switch = 0;
  bool active = false;                       // launched kernels during the last period
  std::optional<uint64_t> last_kernel_time;  // unix seconds; absent in old layouts or 0
  // Set for an MPS client: its CUDA_MPS_ACTIVE_THREAD_PERCENTAGE (100: no
  // cap), which is then also its devices' sm_limit.
  std::optional<uint64_t> mps_thread_percentage;
  std::vector<ContainerDevice> devices;
  std::vector<ContainerProcess> processes;
};

// NVML's account of one pod on one GPU against the limits the device plugin
// gave it there: the check that no file in the container can fool.
struct PodDeviceCheck {
  std::string pod_uid;
  std::string pod_namespace;  // "" when unknown
  std::string pod_name;       // "" when unknown
  std::string uuid;
  uint64_t limit = 0;      // Σ of the pod's containers' limits on this GPU
  uint64_t nvml_used = 0;  // Σ NVML memory of the pod's processes on this GPU
  std::vector<uint32_t> host_pids;
  bool over = false;  // over limit + margin for two passes in a row
  int killed = 0;     // processes killed this pass (--over-limit-action kill)
};

struct AgentCounters {
  uint64_t passes = 0;
  uint64_t file_problems = 0;       // files skipped in the last pass
  uint64_t write_errors = 0;        // total since start
  uint64_t sampler_errors = 0;      // GPUs that failed to sample, total since start
  uint64_t unresolved_slots = 0;    // in the last pass
  uint64_t host_pids_written = 0;   // total since start
  uint64_t containers_skipped = 0;  // beyond the scan's cap, in the last pass
  uint64_t over_limit_kills = 0;    // total since start
};

struct NodeView {
  std::string node;
  std::chrono::system_clock::time_point taken{};
  std::chrono::microseconds pass_duration{0};
  std::vector<GpuSample> gpus;
  std::vector<ContainerView> containers;
  std::vector<PodDeviceCheck> pod_checks;  // pods with a memory limit on a GPU
  AgentCounters counters;
};

}  // namespace hami::monitor
