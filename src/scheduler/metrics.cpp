#include "scheduler/metrics.hpp"

#include "common/prometheus_text.hpp"

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

void Metrics::observe(Verb v, std::chrono::nanoseconds d, bool ok) {
  Histogram& h = hist_[static_cast<size_t>(v)];
  const double s = std::chrono::duration<double>(d).count();
  for (size_t i = 0; i < kBuckets.size(); ++i) {
    if (s <= kBuckets[i]) {
      h.buckets[i].fetch_add(1, std::memory_order_relaxed);
      break;  // cumulative counts are summed at render time
    }
  }
  h.count.fetch_add(1, std::memory_order_relaxed);
  h.sum_ns.fetch_add(static_cast<uint64_t>(d.count()), std::memory_order_relaxed);
  if (!ok) h.errors.fetch_add(1, std::memory_order_relaxed);
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

std::string Metrics::render(const ClusterCache& cache) const {
  PrometheusText out;
  out.family("hami_scheduler_request_duration_seconds",
             "Time to answer an extender or webhook request, by verb.", "histogram");
  for (size_t v = 0; v < hist_.size(); ++v) {
    const Histogram& h = hist_[v];
    const char* verb = verb_name(static_cast<Verb>(v));
    uint64_t cum = 0;
    for (size_t i = 0; i < kBuckets.size(); ++i) {
      cum += h.buckets[i].load(std::memory_order_relaxed);
      const std::string le = std::to_string(kBuckets[i]);
      out.sample("hami_scheduler_request_duration_seconds_bucket", {{"verb", verb}, {"le", le}},
                 cum);
    }
    const uint64_t count = h.count.load(std::memory_order_relaxed);
    out.sample("hami_scheduler_request_duration_seconds_bucket", {{"verb", verb}, {"le", "+Inf"}},
               count);
    out.sample("hami_scheduler_request_duration_seconds_sum", {{"verb", verb}},
               static_cast<double>(h.sum_ns.load(std::memory_order_relaxed)) * 1e-9);
    out.sample("hami_scheduler_request_duration_seconds_count", {{"verb", verb}}, count);
  }
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
  out.family("hami_scheduler_leader", "1 when this replica is the leader (binds).");
  out.sample("hami_scheduler_leader", {}, static_cast<int64_t>(leader_.load() ? 1 : 0));

  // Upstream's per-GPU gauges (§3.10), with its const label zone="vGPU".
  PrometheusText gpu;
  gpu.set_const_labels({{"zone", "vGPU"}});
  cache.read([&](const ClusterCache::View& view) {
    out.family("hami_scheduler_cached_nodes", "Nodes with registered GPUs in the cache.");
    out.sample("hami_scheduler_cached_nodes", {}, static_cast<uint64_t>(view.node_count()));
    out.family("hami_scheduler_cached_pods", "Pods charged (or reserved) in the cache.");
    out.sample("hami_scheduler_cached_pods", {}, static_cast<uint64_t>(view.pod_count()));
    struct Family {
      const char* name;
      const char* help;
    };
    static constexpr Family kFamilies[] = {
        {"hami_gpu_memory_limit_bytes", "GPU memory registered, in bytes."},
        {"hami_gpu_core_limit_ratio", "GPU cores registered (100 = the whole GPU)."},
        {"hami_gpu_memory_allocated_bytes", "GPU memory allocated to pods, in bytes."},
        {"hami_gpu_shared_count", "Containers sharing the GPU."},
        {"hami_gpu_core_allocated_ratio", "GPU cores allocated to pods (percent)."},
        {"hami_node_gpu_memory_allocated_ratio",
         "Allocated / registered GPU memory, as a 0..1 fraction (as upstream)."},
    };
    for (size_t f = 0; f < std::size(kFamilies); ++f) {
      gpu.family(kFamilies[f].name, kFamilies[f].help);
      view.for_each_node([&](const fit::NodeDevices& n) {
        for (const fit::GpuDevice& d : n.devices) {
          const std::string index = std::to_string(d.index);
          const std::string cores = std::to_string(d.used_cores);
          const int64_t mib = 1 << 20;
          switch (f) {
            case 0:
              gpu.sample(kFamilies[f].name,
                         {{"node", n.name},
                          {"device_uuid", d.uuid},
                          {"device_index", index},
                          {"device_type", d.type}},
                         static_cast<int64_t>(d.total_mem_mib) * mib);
              break;
            case 1:
              gpu.sample(kFamilies[f].name,
                         {{"node", n.name},
                          {"device_uuid", d.uuid},
                          {"device_index", index},
                          {"device_type", d.type}},
                         static_cast<int64_t>(d.total_cores));
              break;
            case 2:
              gpu.sample(kFamilies[f].name,
                         {{"node", n.name},
                          {"device_uuid", d.uuid},
                          {"device_index", index},
                          {"device_cores", cores},
                          {"device_type", d.type}},
                         static_cast<int64_t>(d.used_mem_mib) * mib);
              break;
            case 3:
              gpu.sample(kFamilies[f].name,
                         {{"node", n.name},
                          {"device_uuid", d.uuid},
                          {"device_index", index},
                          {"device_type", d.type}},
                         static_cast<int64_t>(d.used_tenants));
              break;
            case 4:
              gpu.sample(kFamilies[f].name,
                         {{"node", n.name},
                          {"device_uuid", d.uuid},
                          {"device_index", index},
                          {"device_type", d.type}},
                         static_cast<int64_t>(d.used_cores));
              break;
            default:
              gpu.sample(kFamilies[f].name,
                         {{"node", n.name},
                          {"device_uuid", d.uuid},
                          {"device_index", index},
                          {"device_type", d.type}},
                         d.total_mem_mib > 0 ? static_cast<double>(d.used_mem_mib) /
                                                   static_cast<double>(d.total_mem_mib)
                                             : 0.0);
          }
        }
      });
    }
    return 0;
  });
  std::string body = out.take();
  body += gpu.text();
  return body;
}

}  // namespace hami::scheduler
