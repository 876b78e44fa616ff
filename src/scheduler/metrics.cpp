#include "scheduler/metrics.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <optional>
#include <vector>

#include "common/build_info.hpp"
#include "common/prometheus_text.hpp"
#include "protocol/mig_allocations.hpp"

namespace hami::scheduler {

const char* verb_name(Verb v) {
  switch (v) {
    case Verb::kFilter:
      return "filter";
    case Verb::kPrioritize:
      return "prioritize";
    case Verb::kBind:
      return "bind";
    case Verb::kWebhook:
      return "webhook";
    case Verb::kCount:
      break;
  }
  return "unknown";
}

void Metrics::Histogram::add(const std::array<double, 14>& bounds, std::chrono::nanoseconds d) {
  const double s = std::chrono::duration<double>(d).count();
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (s <= bounds[i]) {
      buckets[i].fetch_add(1, std::memory_order_relaxed);
      break;  // cumulative counts are summed at render time
    }
  }
  count.fetch_add(1, std::memory_order_relaxed);
  sum_ns.fetch_add(static_cast<uint64_t>(std::max<int64_t>(0, d.count())),
                   std::memory_order_relaxed);
}

void Metrics::observe(Verb v, std::chrono::nanoseconds d, bool ok) {
  Histogram& h = hist_[static_cast<size_t>(v)];
  h.add(kBuckets, d);
  if (!ok) h.errors.fetch_add(1, std::memory_order_relaxed);
}

void Metrics::queue_wait(Verb v, std::chrono::nanoseconds d) {
  queue_[static_cast<size_t>(v)].add(kQueueBuckets, d);
}

uint64_t Metrics::queue_waits(Verb v) const {
  return queue_[static_cast<size_t>(v)].count.load();
}

void Metrics::failure(Verb v, std::string_view reason) {
  std::lock_guard lock(mu_);
  ++failures_[{verb_name(v), std::string(reason)}];
}

void Metrics::node_rejected(std::string_view reason, uint64_t n) {
  std::lock_guard lock(mu_);
  rejections_[std::string(reason)] += n;
}

void Metrics::redirect(std::string_view reason) {
  std::lock_guard lock(mu_);
  ++redirects_[std::string(reason)];
}

uint64_t Metrics::redirects(const std::string& reason) const {
  std::lock_guard lock(mu_);
  auto it = redirects_.find(reason);
  return it == redirects_.end() ? 0 : it->second;
}

uint64_t Metrics::requests(Verb v) const {
  return hist_[static_cast<size_t>(v)].count.load();
}

uint64_t Metrics::failures(Verb v, const std::string& reason) const {
  std::lock_guard lock(mu_);
  auto it = failures_.find({verb_name(v), reason});
  return it == failures_.end() ? 0 : it->second;
}

void Metrics::render_histograms(PrometheusText& out, const char* name, const char* help,
                                const std::array<Histogram, static_cast<size_t>(Verb::kCount)>& hs,
                                const std::array<double, 14>& bounds) const {
  out.family(name, help, "histogram");
  const std::string bucket = std::string(name) + "_bucket";
  for (size_t v = 0; v < hs.size(); ++v) {
    const Histogram& h = hs[v];
    const char* verb = verb_name(static_cast<Verb>(v));
    uint64_t cum = 0;
    for (size_t i = 0; i < bounds.size(); ++i) {
      cum += h.buckets[i].load(std::memory_order_relaxed);
      out.sample(bucket, {{"verb", verb}, {"le", std::to_string(bounds[i])}}, cum);
    }
    const uint64_t count = h.count.load(std::memory_order_relaxed);
    out.sample(bucket, {{"verb", verb}, {"le", "+Inf"}}, count);
    out.sample(std::string(name) + "_sum", {{"verb", verb}},
               static_cast<double>(h.sum_ns.load(std::memory_order_relaxed)) * 1e-9);
    out.sample(std::string(name) + "_count", {{"verb", verb}}, count);
  }
}

std::string Metrics::render(const ClusterCache& cache) const {
  PrometheusText out;
  render_histograms(out, "hami_scheduler_request_duration_seconds",
                    "Time to answer an extender or webhook request, by verb.", hist_, kBuckets);
  render_histograms(out, "hami_scheduler_queue_wait_seconds",
                    "Time a request waited for a worker before one took it, by verb (binds "
                    "answered by the bind deadline included).",
                    queue_, kQueueBuckets);
  out.family("hami_scheduler_requests_total", "Requests answered, by verb and result.", "counter");
  for (size_t v = 0; v < hist_.size(); ++v) {
    const Histogram& h = hist_[v];
    const char* verb = verb_name(static_cast<Verb>(v));
    const uint64_t count = h.count.load(), errors = h.errors.load();
    out.sample("hami_scheduler_requests_total", {{"verb", verb}, {"result", "ok"}},
               count - std::min(count, errors));
    out.sample("hami_scheduler_requests_total", {{"verb", verb}, {"result", "error"}}, errors);
  }
  {
    std::lock_guard lock(mu_);
    out.family("hami_scheduler_failures_total",
               "Failed decisions (no node fits, bind failures, bad requests), by verb and reason.",
               "counter");
    for (const auto& [k, n] : failures_) {
      out.sample("hami_scheduler_failures_total", {{"verb", k.first}, {"reason", k.second}}, n);
    }
    out.family("hami_scheduler_node_rejections_total",
               "Nodes filter rejected, counted under each reason they gave.", "counter");
    for (const auto& [reason, n] : rejections_) {
      out.sample("hami_scheduler_node_rejections_total", {{"reason", reason}}, n);
    }
    out.family("hami_scheduler_bind_redirects_total",
               "Pods bound to another node than kube-scheduler chose, because its choice no "
               "longer fitted (NoFit) or was locked (NodeLock).",
               "counter");
    for (const auto& [reason, n] : redirects_) {
      out.sample("hami_scheduler_bind_redirects_total", {{"reason", reason}}, n);
    }
  }
  out.family("hami_scheduler_prioritize_demoted_nodes_total",
             "Nodes prioritize scored 0 for a pod because a pod in flight there could be "
             "mistaken for it while binds already waited on such nodes.",
             "counter");
  out.sample("hami_scheduler_prioritize_demoted_nodes_total", {}, demoted_.load());
  if (events_ != nullptr) events_->render(out);
  out.family("hami_scheduler_leader", "1 when this replica is the leader (binds).");
  out.sample("hami_scheduler_leader", {}, static_cast<int64_t>(leader_.load() ? 1 : 0));

  // Upstream's gauges (§3.10), with its const label zone="vGPU".
  PrometheusText gpu;
  gpu.set_const_labels({{"zone", "vGPU"}});
  struct DevRow {
    std::string node, uuid, index, type;
    int64_t total_mem = 0, used_mem = 0;  // MiB
    int32_t total_cores = 0, used_cores = 0, tenants = 0;
  };
  struct PodRow {
    std::string ns, node, pod, uuid;
    int64_t mem = 0;  // MiB
    int32_t cores = 0, total_cores = 0;
  };
  // A dynamic MIG instance the device plugin made, as a trusted pod's
  // hami.io/vgpu-mig-allocations records it.
  struct MigRow {
    std::string node, uuid, index, mig_uuid, profile, gi, ci, start, size;
  };
  std::vector<DevRow> devs;
  std::vector<PodRow> pods;
  std::vector<MigRow> migs;
  // Per namespace and quota resource: used, and the limit where one is set.
  struct QuotaRow {
    std::string ns, resource;
    int64_t used = 0;
    std::optional<int64_t> limit;
  };
  std::map<std::pair<std::string, std::string>, QuotaRow> quota_rows;
  cache.read([&](const ClusterCache::View& view) {
    if (quotas_ != nullptr) {
      const fit::ResourceConfig& rc = quotas_->resources();
      auto row = [&](const std::string& ns, const std::string& res) -> QuotaRow& {
        QuotaRow& q = quota_rows[{ns, res}];
        q.ns = ns;
        q.resource = res;
        return q;
      };
      // As upstream: every namespace holding GPUs has both series.
      view.for_each_namespace([&](const std::string& ns, const NamespaceUsage& u) {
        row(ns, rc.memory_name).used = u.mem_mib;
        row(ns, rc.cores_name).used = u.cores;
      });
      for (const QuotaTracker::Limit& l : quotas_->limits()) {
        QuotaRow& q = row(l.ns, l.resource);
        q.limit = l.limit;
        const NamespaceUsage u = view.namespace_usage(l.ns);
        q.used = l.resource == rc.memory_name ? u.mem_mib : u.cores;
      }
    }
    out.family("hami_scheduler_cached_nodes", "Nodes with registered GPUs in the cache.");
    out.sample("hami_scheduler_cached_nodes", {}, static_cast<uint64_t>(view.node_count()));
    out.family("hami_scheduler_cached_pods", "Pods charged (or reserved) in the cache.");
    out.sample("hami_scheduler_cached_pods", {}, static_cast<uint64_t>(view.pod_count()));
    view.for_each_node([&](const fit::NodeDevices& n) {
      for (const fit::GpuDevice& d : n.devices) {
        devs.push_back({n.name, d.uuid, std::to_string(d.index), d.type, d.total_mem_mib,
                        d.used_mem_mib, d.total_cores, d.used_cores, d.used_tenants});
      }
    });
    view.for_each_pod([&](const std::string&, const PodCharge& p) {
      const fit::NodeDevices* node = view.node(p.node);
      for (const fit::DeviceCharge& c : p.charges) {
        if (c.uuid.empty()) continue;  // as upstream: no UUID, no series
        int32_t total = 0;
        if (node != nullptr) {
          for (const fit::GpuDevice& d : node->devices) {
            if (d.uuid == c.uuid) total = d.total_cores;
          }
        }
        pods.push_back({p.ns, p.node, p.name, c.uuid, c.mem_mib, c.cores, total});
      }
      for (const protocol::MigAllocation& m : p.mig) {
        if (!m.realised()) continue;
        std::string index;
        if (node != nullptr) {
          for (const fit::GpuDevice& d : node->devices) {
            if (d.uuid == m.gpu_uuid) index = std::to_string(d.index);
          }
        }
        migs.push_back({p.node, m.gpu_uuid, index, m.mig_uuid, m.profile,
                        std::to_string(m.gpu_instance_id.value_or(0)),
                        std::to_string(m.compute_instance_id.value_or(0)),
                        std::to_string(m.placement.start), std::to_string(m.placement.size)});
      }
    });
    return 0;
  });
  // Allocated cores as a percentage of the GPU's (upstream normalises so a
  // vendor counting compute units reads like one counting percent).
  auto percent = [](int32_t used, int32_t total) -> int64_t {
    if (total <= 0) return 0;
    return static_cast<int64_t>(std::ceil(static_cast<double>(used) * 100.0 / total));
  };
  constexpr int64_t kMiB = 1 << 20;
  auto dev_labels = [](const DevRow& d) {
    return std::array<MetricLabel, 4>{MetricLabel{"node", d.node},
                                      {"device_uuid", d.uuid},
                                      {"device_index", d.index},
                                      {"device_type", d.type}};
  };
  gpu.family("hami_gpu_memory_limit_bytes", "GPU memory registered, in bytes.");
  for (const DevRow& d : devs)
    gpu.sample("hami_gpu_memory_limit_bytes", dev_labels(d), d.total_mem * kMiB);
  gpu.family("hami_gpu_core_limit_ratio", "GPU cores registered, percent (100 = the whole GPU).");
  for (const DevRow& d : devs)
    gpu.sample("hami_gpu_core_limit_ratio", dev_labels(d), int64_t{d.total_cores > 0 ? 100 : 0});
  gpu.family("hami_gpu_memory_allocated_bytes",
             "GPU memory allocated to pods, in bytes; device_cores holds the GPU's total cores.");
  for (const DevRow& d : devs) {
    const std::string cores = std::to_string(d.total_cores);
    gpu.sample("hami_gpu_memory_allocated_bytes",
               {{"node", d.node},
                {"device_uuid", d.uuid},
                {"device_index", d.index},
                {"device_cores", cores},
                {"device_type", d.type}},
               d.used_mem * kMiB);
  }
  gpu.family("hami_gpu_shared_count", "Containers sharing the GPU.");
  for (const DevRow& d : devs)
    gpu.sample("hami_gpu_shared_count", dev_labels(d), int64_t{d.tenants});
  gpu.family("hami_gpu_core_allocated_ratio", "GPU cores allocated to pods, percent.");
  for (const DevRow& d : devs)
    gpu.sample("hami_gpu_core_allocated_ratio", dev_labels(d),
               percent(d.used_cores, d.total_cores));
  gpu.family("hami_node_gpu_overview",
             "GPU memory allocated to pods, in bytes, with the GPU's total cores and memory (MiB) "
             "as labels.");
  for (const DevRow& d : devs) {
    const std::string cores = std::to_string(d.total_cores);
    const std::string mem = std::to_string(d.total_mem);
    gpu.sample("hami_node_gpu_overview",
               {{"node", d.node},
                {"device_uuid", d.uuid},
                {"device_index", d.index},
                {"device_cores", cores},
                {"device_memory_limit", mem},
                {"device_type", d.type}},
               d.used_mem * kMiB);
  }
  gpu.family("hami_node_gpu_memory_allocated_ratio",
             "Allocated / registered GPU memory, as a 0..1 fraction (as upstream).");
  for (const DevRow& d : devs) {
    if (d.total_mem <= 0) continue;
    gpu.sample("hami_node_gpu_memory_allocated_ratio", dev_labels(d),
               static_cast<double>(d.used_mem) / static_cast<double>(d.total_mem));
  }
  gpu.family("hami_node_gpu_mig_instance_info",
             "1 per dynamic MIG instance the device plugin made for a pod.");
  for (const MigRow& m : migs) {
    gpu.sample("hami_node_gpu_mig_instance_info",
               {{"node", m.node},
                {"device_uuid", m.uuid},
                {"device_index", m.index},
                {"mig_uuid", m.mig_uuid},
                {"profile", m.profile},
                {"gpu_instance_id", m.gi},
                {"compute_instance_id", m.ci},
                {"placement_start", m.start},
                {"placement_size", m.size}},
               int64_t{1});
  }
  // Per pod and GPU: what the pod holds there, its containers collapsed as
  // upstream's pod manager holds them (so container_index is always 0).
  auto pod_labels = [](const PodRow& p) {
    return std::array<MetricLabel, 5>{MetricLabel{"namespace", p.ns},
                                      {"node", p.node},
                                      {"pod", p.pod},
                                      {"container_index", "0"},
                                      {"device_uuid", p.uuid}};
  };
  gpu.family("hami_vgpu_memory_allocated_bytes", "GPU memory a pod holds on the GPU, in bytes.");
  for (const PodRow& p : pods)
    gpu.sample("hami_vgpu_memory_allocated_bytes", pod_labels(p), p.mem * kMiB);
  gpu.family("hami_vgpu_core_allocated_ratio", "GPU cores a pod holds on the GPU, percent.");
  for (const PodRow& p : pods)
    gpu.sample("hami_vgpu_core_allocated_ratio", pod_labels(p), percent(p.cores, p.total_cores));

  gpu.family("hami_resource_quota_used",
             "What a namespace's pods hold of a quota resource (gpumem in MiB, gpucores in "
             "percent); limit is the quota's limit, 0 when none.");
  for (const auto& [k, q] : quota_rows) {
    const std::string limit = std::to_string(q.limit.value_or(0));
    gpu.sample("hami_resource_quota_used",
               {{"namespace", q.ns}, {"quota_name", q.resource}, {"limit", limit}}, q.used);
  }
  gpu.family("hami_resource_quota_limit",
             "A namespace's ResourceQuota limit on a quota resource (the smallest where several).");
  for (const auto& [k, q] : quota_rows) {
    if (q.limit)
      gpu.sample("hami_resource_quota_limit", {{"namespace", q.ns}, {"quota_name", q.resource}},
                 *q.limit);
  }

  if (legacy_.load()) {
    gpu.family("QuotaUsed", "Legacy name of hami_resource_quota_used.");
    for (const auto& [k, q] : quota_rows) {
      const std::string limit = std::to_string(q.limit.value_or(0));
      gpu.sample("QuotaUsed",
                 {{"quotanamespace", q.ns}, {"quotaName", q.resource}, {"limit", limit}}, q.used);
    }
    // Upstream's pre-2.5 names (--legacy-metrics), raw core counts.
    auto legacy_dev = [](const DevRow& d) {
      return std::array<MetricLabel, 4>{MetricLabel{"nodeid", d.node},
                                        {"deviceuuid", d.uuid},
                                        {"deviceidx", d.index},
                                        {"devicetype", d.type}};
    };
    auto simple = [&](const char* name, const char* help, auto value) {
      gpu.family(name, help);
      for (const DevRow& d : devs)
        gpu.sample(name, legacy_dev(d), value(d));
    };
    simple("GPUDeviceMemoryLimit", "Legacy name of hami_gpu_memory_limit_bytes.",
           [&](const DevRow& d) { return d.total_mem * kMiB; });
    simple("GPUDeviceCoreLimit", "Legacy name of hami_gpu_core_limit_ratio (raw cores).",
           [](const DevRow& d) { return int64_t{d.total_cores}; });
    gpu.family("GPUDeviceMemoryAllocated", "Legacy name of hami_gpu_memory_allocated_bytes.");
    for (const DevRow& d : devs) {
      const std::string cores = std::to_string(d.total_cores);
      gpu.sample("GPUDeviceMemoryAllocated",
                 {{"nodeid", d.node},
                  {"deviceuuid", d.uuid},
                  {"deviceidx", d.index},
                  {"devicecores", cores},
                  {"devicetype", d.type}},
                 d.used_mem * kMiB);
    }
    simple("GPUDeviceSharedNum", "Legacy name of hami_gpu_shared_count.",
           [](const DevRow& d) { return int64_t{d.tenants}; });
    simple("GPUDeviceCoreAllocated", "Legacy name of hami_gpu_core_allocated_ratio (raw cores).",
           [](const DevRow& d) { return int64_t{d.used_cores}; });
    gpu.family("nodeGPUOverview", "Legacy name of hami_node_gpu_overview.");
    for (const DevRow& d : devs) {
      const std::string cores = std::to_string(d.total_cores);
      const std::string mem = std::to_string(d.total_mem);
      gpu.sample("nodeGPUOverview",
                 {{"nodeid", d.node},
                  {"deviceuuid", d.uuid},
                  {"deviceidx", d.index},
                  {"devicecores", cores},
                  {"devicememorylimit", mem},
                  {"devicetype", d.type}},
                 d.used_mem * kMiB);
    }
    gpu.family("nodeGPUMemoryPercentage", "Legacy name of hami_node_gpu_memory_allocated_ratio.");
    for (const DevRow& d : devs) {
      if (d.total_mem <= 0) continue;
      gpu.sample("nodeGPUMemoryPercentage",
                 {{"nodeid", d.node}, {"deviceuuid", d.uuid}, {"deviceidx", d.index}},
                 static_cast<double>(d.used_mem) / static_cast<double>(d.total_mem));
    }
    auto legacy_pod = [](const PodRow& p) {
      return std::array<MetricLabel, 5>{MetricLabel{"podnamespace", p.ns},
                                        {"nodename", p.node},
                                        {"podname", p.pod},
                                        {"containeridx", "0"},
                                        {"deviceuuid", p.uuid}};
    };
    gpu.family("vGPUMemoryAllocated", "Legacy name of hami_vgpu_memory_allocated_bytes.");
    for (const PodRow& p : pods)
      gpu.sample("vGPUMemoryAllocated", legacy_pod(p), p.mem * kMiB);
    gpu.family("vGPUCoreAllocated", "Legacy name of hami_vgpu_core_allocated_ratio (raw cores).");
    for (const PodRow& p : pods)
      gpu.sample("vGPUCoreAllocated", legacy_pod(p), int64_t{p.cores});
  }
  PrometheusText build;
  render_build_info(build);
  std::string body = out.take();
  body += build.text();
  body += gpu.text();
  return body;
}

}  // namespace hami::scheduler
