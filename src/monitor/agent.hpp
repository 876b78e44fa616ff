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
#include "monitor/node_view.hpp"
#include "monitor/pod_directory.hpp"

namespace hami::monitor {

struct AgentOptions {
  std::string hook_path = "/usr/local/vgpu";  // holds containers/<podUID>_<name>/
  std::string proc_root = "/proc";            // the host's /proc (hostPID: true)
  std::string node_name;
  bool write_back = true;  // false: observe only, never write a state file
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

  AgentOptions options_;
  std::unique_ptr<GpuSampler> sampler_;
  PodDirectory* names_;
  ContainerFiles files_;
  GpuTimeRates gpu_time_;
  AgentCounters counters_;
  std::map<std::string, std::string> write_problems_;  // path -> last logged reason

  mutable std::mutex mu_;
  std::shared_ptr<const NodeView> latest_;
};

}  // namespace hami::monitor
