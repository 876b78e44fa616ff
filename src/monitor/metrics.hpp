#pragma once
// Renders a NodeView as Prometheus text with upstream HAMi's vGPU-monitor
// metric names and labels (every sample carries zone="vGPU"), so existing
// dashboards and alerts keep working, plus our own:
//
//  host GPUs       hami_host_gpu_memory_used_bytes, hami_host_gpu_utilization_ratio,
//                  hami_host_gpu_memory_controller_utilization_ratio (upstream),
//                  hami_host_gpu_memory_total_bytes (ours)
//  per container   hami_vgpu_memory_used_bytes, hami_vgpu_memory_limit_bytes,
//  and device      hami_container_device_memory_bytes,
//                  hami_container_device_utilization_ratio,
//                  hami_vgpu_memory_{context,module,buffer}_bytes,
//                  hami_container_last_kernel_elapsed_seconds (upstream),
//                  hami_container_device_sm_limit_ratio, hami_container_device_nvml_memory_bytes,
//                  hami_container_device_memory_spilled_bytes,
//                  hami_container_processes, hami_container_active,
//                  hami_container_utilization_switch, hami_container_blocked (ours)
//  the agent       hami_monitor_* (passes, pass duration, problems, unresolved PIDs)
//
// docs/node-agent.md explains each one. With `legacy` set, upstream's old
// names (HostGPUMemoryUsage, vGPU_device_memory_usage_in_bytes, ...) follow.
//
//   std::string body = render_metrics(*agent.latest(), {.version = "0.1.0"});

#include <string>

#include "monitor/node_view.hpp"

namespace hami::monitor {

struct MetricsOptions {
  // Unused: hami_build_info comes from common/build_info.hpp (the build's
  // version, revision and date, upstream's labels). Kept for its callers.
  std::string version;
  bool legacy = false;
};

std::string render_metrics(const NodeView& view, const MetricsOptions& options);

}  // namespace hami::monitor
