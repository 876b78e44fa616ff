#include "monitor/metrics.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <string_view>

#include "common/build_info.hpp"
#include "common/prometheus_text.hpp"

namespace hami::monitor {
namespace {

using Labels = std::array<MetricLabel, 5>;

// Upstream labels a container's series with the pod's namespace and name; when
// the name is not known (standalone, or the API server unreachable) the pod
// UID stands in, so series stay distinct.
struct ContainerLabels {
  std::string index;
  std::string_view ns, pod, container, uuid;
  Labels get() const {
    return {MetricLabel{"namespace", ns}, MetricLabel{"pod", pod},
            MetricLabel{"container", container}, MetricLabel{"vdevice_index", index},
            MetricLabel{"device_uuid", uuid}};
  }
};

std::string device_type(const GpuSample& g) {
  return "NVIDIA-" + g.name;
}

void host_metrics(PrometheusText& out, const NodeView& v, bool legacy) {
  struct Row {
    std::string index, type;
    const GpuSample* g;
  };
  std::vector<Row> rows;
  for (const GpuSample& g : v.gpus) {
    // A MIG device's memory is part of its GPU's: hami_mig_device_info names it.
    if (!g.error.empty() || g.mig) continue;
    rows.push_back(Row{std::to_string(g.index), device_type(g), &g});
  }
  auto labels = [&](const Row& r) {
    return std::array<MetricLabel, 4>{
        MetricLabel{"node", v.node}, MetricLabel{"device_index", r.index},
        MetricLabel{"device_uuid", r.g->uuid}, MetricLabel{"device_type", r.type}};
  };
  out.family("hami_host_gpu_memory_used_bytes", "GPU device memory in use, as NVML reports it.");
  for (const Row& r : rows)
    out.sample("hami_host_gpu_memory_used_bytes", labels(r), r.g->memory_used);
  out.family("hami_host_gpu_memory_total_bytes", "GPU device memory in all, as NVML reports it.");
  for (const Row& r : rows)
    out.sample("hami_host_gpu_memory_total_bytes", labels(r), r.g->memory_total);
  out.family("hami_host_gpu_utilization_ratio",
             "GPU utilisation over NVML's last sample period, percent (0-100).");
  for (const Row& r : rows)
    out.sample("hami_host_gpu_utilization_ratio", labels(r), uint64_t{r.g->utilization});
  out.family("hami_host_gpu_memory_controller_utilization_ratio",
             "GPU memory-controller utilisation, percent (0-100).");
  for (const Row& r : rows) {
    auto l = labels(r);
    out.sample("hami_host_gpu_memory_controller_utilization_ratio",
               std::span<const MetricLabel>(l).subspan(1), uint64_t{r.g->memory_utilization});
  }
  if (!legacy) return;
  out.family("HostGPUMemoryUsage", "Legacy name of hami_host_gpu_memory_used_bytes.");
  for (const Row& r : rows) {
    out.sample("HostGPUMemoryUsage",
               {{"nodeid", v.node},
                {"deviceidx", r.index},
                {"deviceuuid", r.g->uuid},
                {"devicetype", r.type}},
               r.g->memory_used);
  }
  out.family("HostCoreUtilization", "Legacy name of hami_host_gpu_utilization_ratio.");
  for (const Row& r : rows) {
    out.sample("HostCoreUtilization",
               {{"nodeid", v.node},
                {"deviceidx", r.index},
                {"deviceuuid", r.g->uuid},
                {"devicetype", r.type}},
               uint64_t{r.g->utilization});
  }
}

// One family at a time over every (container, device) pair, as the format
// wants samples grouped by family.
template <class F>
void per_device(PrometheusText& out, const NodeView& v, std::string_view name,
                std::string_view help, F value) {
  out.family(name, help);
  for (const ContainerView& c : v.containers) {
    const std::string_view pod = c.pod_name.empty() ? std::string_view(c.ref.pod_uid) : c.pod_name;
    for (const ContainerDevice& d : c.devices) {
      if (d.uuid.empty()) continue;  // as upstream: no UUID, no series
      ContainerLabels l{std::to_string(d.vdevice_index), c.pod_namespace, pod, c.ref.container,
                        d.uuid};
      value(l.get(), c, d);
    }
  }
}

void container_metrics(PrometheusText& out, const NodeView& v, bool legacy) {
  auto bytes = [&](std::string_view name, std::string_view help, auto field) {
    per_device(out, v, name, help,
               [&](const Labels& l, const ContainerView&, const ContainerDevice& d) {
                 out.sample(name, l, field(d));
               });
  };
  bytes("hami_vgpu_memory_used_bytes",
        "Device memory the container's processes use on this GPU (the amount its limit counts).",
        [](const ContainerDevice& d) { return d.used; });
  bytes("hami_vgpu_memory_limit_bytes",
        "The container's device-memory limit on this GPU (0: none).",
        [](const ContainerDevice& d) { return d.memory_limit; });
  bytes("hami_container_device_memory_bytes",
        "Same value as hami_vgpu_memory_used_bytes (upstream keeps both names).",
        [](const ContainerDevice& d) { return d.used; });
  bytes("hami_vgpu_memory_context_bytes", "Part of the usage taken by CUDA contexts.",
        [](const ContainerDevice& d) { return d.context; });
  bytes("hami_vgpu_memory_module_bytes", "Part of the usage taken by loaded modules.",
        [](const ContainerDevice& d) { return d.module; });
  bytes("hami_vgpu_memory_buffer_bytes", "Part of the usage taken by allocations.",
        [](const ContainerDevice& d) { return d.data; });
  bytes("hami_container_device_memory_spilled_bytes",
        "Part of the usage placed in host memory because the GPU had no room "
        "(CUDA_OVERSUBSCRIBE).",
        [](const ContainerDevice& d) { return d.spilled; });
  bytes("hami_container_device_nvml_memory_bytes",
        "Device memory NVML attributes to the container's processes (host PIDs resolved by the "
        "agent).",
        [](const ContainerDevice& d) { return d.nvml_used; });
  per_device(out, v, "hami_container_device_utilization_ratio",
             "SM utilisation of the container's processes on this GPU, percent of the whole GPU.",
             [&](const Labels& l, const ContainerView&, const ContainerDevice& d) {
               out.sample("hami_container_device_utilization_ratio", l, uint64_t{d.sm_util});
             });
  per_device(out, v, "hami_container_device_sm_limit_ratio",
             "The container's SM share on this GPU, percent (100: no limit).",
             [&](const Labels& l, const ContainerView&, const ContainerDevice& d) {
               out.sample("hami_container_device_sm_limit_ratio", l,
                          d.sm_limit == 0 ? uint64_t{100} : d.sm_limit);
             });
  const int64_t now =
      std::chrono::duration_cast<std::chrono::seconds>(v.taken.time_since_epoch()).count();
  per_device(out, v, "hami_container_last_kernel_elapsed_seconds",
             "Seconds since the container last launched a kernel (only once it has).",
             [&](const Labels& l, const ContainerView& c, const ContainerDevice&) {
               if (!c.last_kernel_time) return;
               const int64_t elapsed = now - static_cast<int64_t>(*c.last_kernel_time);
               if (elapsed >= 0)
                 out.sample("hami_container_last_kernel_elapsed_seconds", l, elapsed);
             });

  auto per_container = [&](std::string_view name, std::string_view help, auto value) {
    out.family(name, help);
    for (const ContainerView& c : v.containers) {
      const std::string_view pod =
          c.pod_name.empty() ? std::string_view(c.ref.pod_uid) : c.pod_name;
      out.sample(name,
                 {{"namespace", c.pod_namespace}, {"pod", pod}, {"container", c.ref.container}},
                 value(c));
    }
  };
  per_container("hami_container_processes",
                "Live processes registered in the container's state file.",
                [](const ContainerView& c) {
                  return static_cast<uint64_t>(
                      std::count_if(c.processes.begin(), c.processes.end(),
                                    [](const ContainerProcess& p) { return p.live; }));
                });
  per_container("hami_container_active",
                "1 when the container launched kernels in the last period.",
                [](const ContainerView& c) { return uint64_t{c.active ? 1u : 0u}; });
  per_container(
      "hami_container_utilization_switch",
      "1 when the SM share is enforced under the default policy (the GPU is contended).",
      [](const ContainerView& c) { return uint64_t{c.utilization_switch == 1 ? 1u : 0u}; });
  per_container("hami_container_blocked",
                "1 while a higher-priority container is active on one of its GPUs and its "
                "launches wait.",
                [](const ContainerView& c) { return uint64_t{c.recent_kernel < 0 ? 1u : 0u}; });

  if (!legacy) return;
  auto legacy_family = [&](std::string_view name, std::string_view help, auto value) {
    per_device(out, v, name, help,
               [&](const Labels& l, const ContainerView& c, const ContainerDevice& d) {
                 out.sample(name,
                            {{"podnamespace", l[0].value},
                             {"podname", l[1].value},
                             {"ctrname", c.ref.container},
                             {"vdeviceid", l[3].value},
                             {"deviceuuid", d.uuid}},
                            value(d));
               });
  };
  legacy_family("vGPU_device_memory_usage_in_bytes", "Legacy name of hami_vgpu_memory_used_bytes.",
                [](const ContainerDevice& d) { return d.used; });
  legacy_family("vGPU_device_memory_limit_in_bytes", "Legacy name of hami_vgpu_memory_limit_bytes.",
                [](const ContainerDevice& d) { return d.memory_limit; });
  legacy_family("Device_utilization_desc_of_container",
                "Legacy name of hami_container_device_utilization_ratio.",
                [](const ContainerDevice& d) { return uint64_t{d.sm_util}; });
  // Upstream carries the breakdown as label values (context, module, data,
  // and the rest as offset) on the total.
  per_device(out, v, "Device_memory_desc_of_container", "Legacy memory breakdown of a container.",
             [&](const Labels& l, const ContainerView& c, const ContainerDevice& d) {
               const uint64_t parts = d.context + d.module + d.data;
               const std::string ctx = std::to_string(d.context), mod = std::to_string(d.module),
                                 data = std::to_string(d.data),
                                 off = std::to_string(d.used > parts ? d.used - parts : 0);
               out.sample("Device_memory_desc_of_container",
                          {{"podnamespace", l[0].value},
                           {"podname", l[1].value},
                           {"ctrname", c.ref.container},
                           {"vdeviceid", l[3].value},
                           {"deviceuuid", d.uuid},
                           {"context", ctx},
                           {"module", mod},
                           {"data", data},
                           {"offset", off}},
                          d.used);
             });
  per_device(out, v, "Device_last_kernel_of_container",
             "Legacy name of hami_container_last_kernel_elapsed_seconds.",
             [&](const Labels& l, const ContainerView& c, const ContainerDevice& d) {
               if (!c.last_kernel_time) return;
               const int64_t elapsed = now - static_cast<int64_t>(*c.last_kernel_time);
               if (elapsed < 0) return;
               out.sample("Device_last_kernel_of_container",
                          {{"podnamespace", l[0].value},
                           {"podname", l[1].value},
                           {"ctrname", c.ref.container},
                           {"vdeviceid", l[3].value},
                           {"deviceuuid", d.uuid}},
                          elapsed);
             });
}

void pod_metrics(PrometheusText& out, const NodeView& v) {
  out.family("hami_pod_memory_over_limit",
             "1 while NVML shows the pod's processes on this GPU over the pod's memory limits "
             "there (plus the agent's margin) for two passes in a row.");
  for (const PodDeviceCheck& c : v.pod_checks) {
    const std::string_view pod = c.pod_name.empty() ? std::string_view(c.pod_uid) : c.pod_name;
    out.sample("hami_pod_memory_over_limit",
               {{"namespace", c.pod_namespace}, {"pod", pod}, {"device_uuid", c.uuid}},
               uint64_t{c.over ? 1u : 0u});
  }
  out.family("hami_pod_nvml_memory_bytes",
             "Device memory NVML shows the pod's processes holding on this GPU (those resolved "
             "from its state files and those whose cgroup names the pod).");
  for (const PodDeviceCheck& c : v.pod_checks) {
    const std::string_view pod = c.pod_name.empty() ? std::string_view(c.pod_uid) : c.pod_name;
    out.sample("hami_pod_nvml_memory_bytes",
               {{"namespace", c.pod_namespace}, {"pod", pod}, {"device_uuid", c.uuid}},
               c.nvml_used);
  }
}

void agent_metrics(PrometheusText& out, const NodeView& v) {
  const AgentCounters& k = v.counters;
  out.family("hami_monitor_passes_total", "Observation passes the agent has completed.", "counter");
  out.sample("hami_monitor_passes_total", {}, k.passes);
  out.family("hami_monitor_pass_duration_seconds", "How long the last pass took.");
  out.sample("hami_monitor_pass_duration_seconds", {},
             static_cast<double>(v.pass_duration.count()) / 1e6);
  out.family("hami_monitor_last_pass_timestamp_seconds", "When the last pass ran (unix time).");
  out.sample(
      "hami_monitor_last_pass_timestamp_seconds", {},
      static_cast<int64_t>(
          std::chrono::duration_cast<std::chrono::seconds>(v.taken.time_since_epoch()).count()));
  out.family("hami_monitor_containers", "Container state files read in the last pass.");
  out.sample("hami_monitor_containers", {}, static_cast<uint64_t>(v.containers.size()));
  out.family("hami_monitor_file_problems",
             "State files or directories skipped in the last pass (see the agent's log).");
  out.sample("hami_monitor_file_problems", {}, k.file_problems);
  out.family("hami_monitor_unresolved_processes",
             "Process slots whose host PID could not be resolved in the last pass.");
  out.sample("hami_monitor_unresolved_processes", {}, k.unresolved_slots);
  out.family("hami_monitor_host_pids_written_total", "Slots whose hostpid field the agent rewrote.",
             "counter");
  out.sample("hami_monitor_host_pids_written_total", {}, k.host_pids_written);
  out.family("hami_monitor_write_errors_total", "State-file writes refused or failed.", "counter");
  out.sample("hami_monitor_write_errors_total", {}, k.write_errors);
  out.family("hami_monitor_gpu_sample_errors_total", "GPU samples that failed.", "counter");
  out.sample("hami_monitor_gpu_sample_errors_total", {}, k.sampler_errors);
  out.family("hami_monitor_containers_skipped",
             "Containers left unread in the last pass (more than --max-containers).");
  out.sample("hami_monitor_containers_skipped", {}, k.containers_skipped);
  out.family("hami_monitor_over_limit_kills_total",
             "Processes killed for holding their pod over its GPU memory limits "
             "(--over-limit-action kill).",
             "counter");
  out.sample("hami_monitor_over_limit_kills_total", {}, k.over_limit_kills);
}

// Upstream's hami_mig_device_info: 1 per container device that is a MIG
// device NVML lists on this node (device_uuid its GPU's, mig_uuid its own).
void mig_metrics(PrometheusText& out, const NodeView& v) {
  std::vector<const GpuSample*> migs;
  for (const GpuSample& g : v.gpus)
    if (g.mig) migs.push_back(&g);
  out.family("hami_mig_device_info",
             "A container's MIG device: its GPU, profile and GPU/compute instance IDs (value 1).");
  if (migs.empty()) return;
  for (const ContainerView& c : v.containers) {
    const std::string_view pod = c.pod_name.empty() ? std::string_view(c.ref.pod_uid) : c.pod_name;
    for (const ContainerDevice& d : c.devices) {
      auto it = std::find_if(migs.begin(), migs.end(), [&](const GpuSample* g) {
        return !d.uuid.empty() && g->uuid == d.uuid;
      });
      if (it == migs.end()) continue;
      const MigOf& m = *(*it)->mig;
      const std::string index = std::to_string(d.vdevice_index);
      const std::string gi = std::to_string(m.gpu_instance_id);
      const std::string ci = std::to_string(m.compute_instance_id);
      out.sample("hami_mig_device_info",
                 {{"namespace", c.pod_namespace},
                  {"pod", pod},
                  {"container", c.ref.container},
                  {"vdevice_index", index},
                  {"device_uuid", m.parent_uuid},
                  {"mig_uuid", d.uuid},
                  {"profile", m.profile},
                  {"gpu_instance_id", gi},
                  {"compute_instance_id", ci}},
                 uint64_t{1});
    }
  }
}

}  // namespace

std::string render_metrics(const NodeView& view, const MetricsOptions& options) {
  PrometheusText out;
  out.reserve(4096 + view.containers.size() * 3000);
  // As upstream: hami_build_info without the zone label, the rest with it.
  render_build_info(out);
  out.set_const_labels({{"zone", "vGPU"}});
  host_metrics(out, view, options.legacy);
  container_metrics(out, view, options.legacy);
  mig_metrics(out, view);
  pod_metrics(out, view);
  agent_metrics(out, view);
  return out.take();
}

}  // namespace hami::monitor
