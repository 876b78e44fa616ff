#pragma once
// The scheduler's own metrics, served on --metrics-bind-address: request
// latency histograms per verb (filter, prioritize, bind, webhook), decisions
// and failures by reason (what upstream lacks, HAMi#2458), and per-GPU
// allocation gauges under upstream's §3.10 names (per GPU, per pod, the node
// overview; the pre-2.5 names too with set_legacy), built at scrape time
// from the cache, and hami_build_info.
//
//   Metrics m;
//   auto t0 = std::chrono::steady_clock::now();
//   ... m.observe(Verb::kFilter, std::chrono::steady_clock::now() - t0, ok);
//   m.failure(Verb::kBind, "NodeLockContention");
//   std::string body = m.render(cache);
//
// Recording is lock-free (atomics) except failures by reason, whose label set
// is small and open-ended (a mutex-guarded map).

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "common/prometheus_text.hpp"
#include "scheduler/cache.hpp"
#include "scheduler/events.hpp"
#include "scheduler/quota.hpp"

namespace hami::scheduler {

enum class Verb : uint8_t { kFilter, kPrioritize, kBind, kWebhook, kCount };
const char* verb_name(Verb v);

class Metrics {
 public:
  static constexpr std::array<double, 14> kBuckets = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};

  // How long a request waited for a worker before one took it (binds wait
  // for one of 16; a wait no other metric shows).
  static constexpr std::array<double, 14> kQueueBuckets = {
      0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30};

  void observe(Verb v, std::chrono::nanoseconds d, bool ok);
  void queue_wait(Verb v, std::chrono::nanoseconds d);
  void failure(Verb v, std::string_view reason);
  // A node filter rejected, counted under each reason it gave.
  void node_rejected(std::string_view reason, uint64_t n = 1);
  // A pod bound to another node than kube-scheduler chose, and why
  // ("NoFit", "NodeLock").
  void redirect(std::string_view reason);
  // Nodes prioritize scored lowest for a pod because a pod in flight there
  // could be mistaken for it and binds already wait (extender.cpp).
  void demoted(uint64_t n) { demoted_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t demoted() const { return demoted_.load(); }
  void set_leader(bool leader) { leader_.store(leader); }
  // Also upstream's pre-2.5 metric names (--legacy-metrics).
  void set_legacy(bool legacy) { legacy_.store(legacy); }
  // Its counters join the body (set before serving).
  void set_events(const EventRecorder* events) { events_ = events; }
  // hami_resource_quota_used / _limit come from these limits and the
  // cache's namespace usage (set before serving).
  void set_quotas(const QuotaTracker* quotas) { quotas_ = quotas; }

  std::string render(const ClusterCache& cache) const;

  uint64_t requests(Verb v) const;
  uint64_t failures(Verb v, const std::string& reason) const;
  uint64_t redirects(const std::string& reason) const;
  uint64_t queue_waits(Verb v) const;

 private:
  struct Histogram {
    std::array<std::atomic<uint64_t>, kBuckets.size()> buckets{};
    std::atomic<uint64_t> count{0};
    std::atomic<uint64_t> sum_ns{0};
    std::atomic<uint64_t> errors{0};
    void add(const std::array<double, 14>& bounds, std::chrono::nanoseconds d);
  };
  static_assert(kQueueBuckets.size() == kBuckets.size());
  std::array<Histogram, static_cast<size_t>(Verb::kCount)> hist_;
  std::array<Histogram, static_cast<size_t>(Verb::kCount)> queue_;
  void render_histograms(PrometheusText& out, const char* name, const char* help,
                         const std::array<Histogram, static_cast<size_t>(Verb::kCount)>& hs,
                         const std::array<double, 14>& bounds) const;
  std::atomic<uint64_t> demoted_{0};
  std::atomic<bool> leader_{false};
  std::atomic<bool> legacy_{false};
  const EventRecorder* events_ = nullptr;
  const QuotaTracker* quotas_ = nullptr;
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, uint64_t> failures_;  // (verb, reason)
  std::map<std::string, uint64_t> rejections_;
  std::map<std::string, uint64_t> redirects_;
};

}  // namespace hami::scheduler
