#pragma once
// The node agent's period: one pass reads every container's state file, maps
// each process slot to its host PID through /proc, asks the GPUs once (the
// sampler), adds NVML's per-process memory up per container, takes each
// container's SM utilisation from the GPU time its processes publish (NVML's
// per-process samples where they publish none),
// runs the feedback loop, writes back the fields the agent owns, and publishes
// the result as an immutable NodeView. Passes run on one thread (the daemon's
// loop); latest() may be called from any thread (the HTTP server).
//
// A container's state file is the tenant's to write, so the agent takes a
// container's priority, GPUs and limits from the device plugin's record
// (trusted_record.hpp) where there is one, ignores recent_kernel and priority
// values outside upstream's ranges where there is not, writes its decisions
// into the read-only control file as well as the state file, and checks each
// pod's NVML memory against its limits (PodDeviceCheck), acting as told.
//
//   Agent agent(AgentOptions{.hook_path = "/usr/local/vgpu", .node_name = "n1"},
//               std::move(sampler), &pod_directory);
//   for (;;) { agent.run_pass(); sleep(interval); }
//   std::shared_ptr<const NodeView> v = agent.latest();   // HTTP thread

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "monitor/container_files.hpp"
#include "monitor/gpu_sampler.hpp"
#include "monitor/gpu_time.hpp"
#include "monitor/host_pid.hpp"
#include "monitor/node_view.hpp"
#include "monitor/pod_directory.hpp"

namespace hami::monitor {

enum class OverLimitAction {
  kReport,  // hami_pod_memory_over_limit and a log line
  kKill,    // also SIGKILL the pod's processes on that GPU
};

struct AgentOptions {
  std::string hook_path = "/usr/local/vgpu";  // holds containers/<podUID>_<name>/
  std::string proc_root = "/proc";            // the host's /proc (hostPID: true)
  std::string node_name;
  bool write_back = true;  // false: observe only, never write a state file
  ScanLimits limits;
  // NVML may show a pod more than its limits by what the library does not
  // charge (module code, the CUDA runtime's own reservations): tolerated.
  uint64_t over_limit_margin = 256ull << 20;
  OverLimitAction over_limit_action = OverLimitAction::kReport;
};

class Agent {
 public:
  // `sampler` may be null (no GPU metrics, no per-process utilisation);
  // `names` may be null (pods labelled by UID). `names` must outlive the agent.
  Agent(AgentOptions options, std::unique_ptr<GpuSampler> sampler, PodDirectory* names);

  std::shared_ptr<const NodeView> run_pass();
  // The last pass's view; an empty view before the first pass.
  std::shared_ptr<const NodeView> latest() const;

 private:
  void note_write_error(const std::string& path, const std::string& message);
  void check_pods(NodeView& view, const std::vector<ContainerState>& states,
                  const ProcTable& table);
  bool kill_process(uint32_t host_pid, const ProcTable& table);

  AgentOptions options_;
  std::unique_ptr<GpuSampler> sampler_;
  PodDirectory* names_;
  ContainerFiles files_;
  GpuTimeRates gpu_time_;
  AgentCounters counters_;
  std::map<std::string, std::string> write_problems_;  // path -> last logged reason
  // (pod UID, GPU) -> passes in a row NVML showed the pod over its limits.
  std::map<std::pair<std::string, std::string>, int> over_passes_;
  // Per (pod UID, GPU): its limit at the last pass (UINT64_MAX: none), and,
  // once a resize lowered it below what the pod holds, the limit before: the
  // pod is held to that until NVML shows it under the new one, as a resize
  // takes nothing away (docs/resize.md).
  std::map<std::pair<std::string, std::string>, uint64_t> last_limit_;
  std::map<std::pair<std::string, std::string>, uint64_t> lowered_from_;

  mutable std::mutex mu_;
  std::shared_ptr<const NodeView> latest_;
};

}  // namespace hami::monitor
