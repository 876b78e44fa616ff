#include "scheduler/events.hpp"

#include <algorithm>
#include <cstdio>

#include "common/log.hpp"
#include "k8s/paths.hpp"
#include "k8s/time.hpp"

namespace hami::scheduler {

namespace {

constexpr const char* kCombined = "(combined from similar events): ";

const char* type_name(EventType t) {
  return t == EventType::kWarning ? "Warning" : "Normal";
}

}  // namespace

EventRecorder::EventRecorder(k8s::Client* client, EventOptions options)
    : client_(client),
      options_(std::move(options)),
      tokens_(options_.burst),
      refill_(std::chrono::steady_clock::now()) {
  if (options_.max_series == 0) options_.max_series = 1;
  worker_ = std::thread([this] { run(); });
}

EventRecorder::~EventRecorder() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
    stop_deadline_ = std::chrono::steady_clock::now() + kShutdownBudget;
    stopping_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void EventRecorder::record(const PodRef& pod, EventType type, std::string reason,
                           std::string message) {
  {
    std::lock_guard lk(mu_);
    if (client_ == nullptr || stop_ || queue_.size() >= options_.queue_limit) {
      ++stats_.dropped;
      return;
    }
    ++stats_.recorded;
    Item it;
    it.pod = pod;
    it.type = type;
    it.reason = std::move(reason);
    it.message = std::move(message);
    it.when = std::chrono::system_clock::now();
    queue_.push_back(std::move(it));
  }
  cv_.notify_one();
}

void EventRecorder::label_pod(const std::string& ns, const std::string& name,
                              std::map<std::string, std::string> labels) {
  {
    std::lock_guard lk(mu_);
    if (client_ == nullptr || stop_ || labels_.size() >= options_.queue_limit) {
      ++stats_.dropped;
      log::warn("pod %s/%s: label patch dropped (queue full); its labels stay as they are",
                ns.c_str(), name.c_str());
      return;
    }
    Item it;
    it.is_label = true;
    it.pod = {ns, name, ""};
    it.labels = std::move(labels);
    labels_.push_back(std::move(it));
  }
  cv_.notify_one();
}

void EventRecorder::flush() {
  std::unique_lock lk(mu_);
  const uint64_t target = ++flush_requests_;
  cv_.notify_one();
  idle_cv_.wait(lk, [&] { return flushes_done_ >= target; });
}

EventRecorder::Stats EventRecorder::stats() const {
  std::lock_guard lk(mu_);
  return stats_;
}

void EventRecorder::render(PrometheusText& out) const {
  const Stats s = stats();
  out.family("hami_scheduler_events_total",
             "Kubernetes Events: recorded, dropped (queue full), created, patched (a series' "
             "count), aggregated (folded into a series), failed (refused by the API server).",
             "counter");
  const std::pair<const char*, uint64_t> rows[] = {
      {"recorded", s.recorded}, {"dropped", s.dropped},       {"created", s.created},
      {"patched", s.patched},   {"aggregated", s.aggregated}, {"failed", s.failed}};
  for (const auto& [result, n] : rows)
    out.sample("hami_scheduler_events_total", {{"result", result}}, n);
  out.family("hami_scheduler_pod_label_patches_total", "Pod label patches written.", "counter");
  out.sample("hami_scheduler_pod_label_patches_total", {}, s.labels);
}

void EventRecorder::run() {
  const auto tick = std::min<std::chrono::milliseconds>(options_.aggregate_interval,
                                                        std::chrono::milliseconds(1000));
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait_for(lk, tick, [&] {
      return stop_ || !queue_.empty() || !labels_.empty() || flush_requests_ > flushes_done_;
    });
    while (!queue_.empty() || !labels_.empty()) {
      if (stop_ && std::chrono::steady_clock::now() > stop_deadline_) {
        stats_.dropped += queue_.size() + labels_.size();
        log::warn("shutting down: %zu events and %zu pod label patches not written", queue_.size(),
                  labels_.size());
        queue_.clear();
        labels_.clear();
        break;
      }
      std::deque<Item>& from = labels_.empty() ? queue_ : labels_;
      Item it = std::move(from.front());
      from.pop_front();
      lk.unlock();
      handle(it);
      lk.lock();
    }
    const uint64_t requested = flush_requests_;
    const bool force = requested > flushes_done_ || stop_;
    lk.unlock();
    flush_due(force);
    lk.lock();
    if (requested > flushes_done_) {
      flushes_done_ = requested;
      idle_cv_.notify_all();
    }
    if (stop_ && queue_.empty() && labels_.empty()) break;
  }
  flushes_done_ = flush_requests_;
  idle_cv_.notify_all();
}

void EventRecorder::take_token() {
  if (options_.qps <= 0 || stopping_) return;
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    tokens_ = std::min<double>(
        options_.burst,
        tokens_ + std::chrono::duration<double>(now - refill_).count() * options_.qps);
    refill_ = now;
    if (tokens_ >= 1) {
      tokens_ -= 1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>((1 - tokens_) / options_.qps));
  }
}

void EventRecorder::handle(Item& it) {
  if (it.is_label) {
    nlohmann::json labels = nlohmann::json::object();
    for (auto& [k, v] : it.labels)
      labels[k] = v;
    auto r = client_->merge_patch(k8s::pod_path(it.pod.ns, it.pod.name),
                                  {{"metadata", {{"labels", labels}}}});
    std::lock_guard lk(mu_);
    if (r) {
      ++stats_.labels;
    } else {
      ++stats_.failed;
      log::warn("pod %s/%s: setting labels: %s", it.pod.ns.c_str(), it.pod.name.c_str(),
                r.error().message.c_str());
    }
    return;
  }
  std::string key = it.pod.ns;
  key += '\0';
  key += it.pod.uid.empty() ? it.pod.name : it.pod.uid;
  key += '\0';
  key += it.reason;
  key += '\0';
  key += type_name(it.type);
  auto found = by_key_.find(key);
  if (found != by_key_.end()) {
    series_.splice(series_.begin(), series_, found->second);
    Series& s = series_.front();
    ++s.count;
    s.last = it.when;
    s.message = std::move(it.message);
    {
      std::lock_guard lk(mu_);
      ++stats_.aggregated;
    }
    write(s, false);
    return;
  }
  if (series_.size() >= options_.max_series) {
    Series& old = series_.back();
    write(old, true);
    by_key_.erase(old.key);
    series_.pop_back();
  }
  Series s;
  s.key = key;
  s.pod = std::move(it.pod);
  s.type = it.type;
  s.reason = std::move(it.reason);
  s.first_message = it.message;
  s.message = std::move(it.message);
  s.count = 1;
  s.first = s.last = it.when;
  series_.push_front(std::move(s));
  by_key_[key] = series_.begin();
  write(series_.front(), true);
}

void EventRecorder::flush_due(bool force) {
  for (Series& s : series_) {
    // stop_deadline_ is written before stopping_ is set, under mu_.
    if (stopping_ && std::chrono::steady_clock::now() > stop_deadline_) return;
    write(s, force);
  }
}

void EventRecorder::write(Series& s, bool force) {
  if (s.count == s.written) return;
  const auto now = std::chrono::steady_clock::now();
  if (!force && !s.event_name.empty() && now - s.last_write < options_.aggregate_interval) return;
  take_token();
  const std::string message =
      s.message == s.first_message ? s.message : std::string(kCombined) + s.message;
  s.last_write = now;
  const int64_t count = s.count;
  if (!s.event_name.empty()) {
    auto r = client_->merge_patch(
        k8s::core_path("events", s.pod.ns, s.event_name),
        {{"count", count}, {"lastTimestamp", k8s::format_time(s.last)}, {"message", message}});
    if (r) {
      s.written = count;
      std::lock_guard lk(mu_);
      ++stats_.patched;
      return;
    }
    if (!r.error().not_found()) {
      s.written = count;  // not retried: the next event of the series tries again
      std::lock_guard lk(mu_);
      ++stats_.failed;
      log::warn("event %s/%s: %s", s.pod.ns.c_str(), s.event_name.c_str(),
                r.error().message.c_str());
      return;
    }
    s.event_name.clear();  // expired (the API server's event TTL): a new one
  }
  char suffix[40];
  const auto nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  std::snprintf(suffix, sizeof suffix, ".%llx",
                static_cast<unsigned long long>(nanos) + name_seq_++);
  std::string name = s.pod.name + suffix;
  nlohmann::json source = {{"component", options_.component}};
  if (!options_.instance.empty()) source["host"] = options_.instance;
  nlohmann::json ev = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"name", name}, {"namespace", s.pod.ns}}},
      {"involvedObject",
       {{"apiVersion", "v1"}, {"kind", "Pod"}, {"namespace", s.pod.ns}, {"name", s.pod.name}}},
      {"reason", s.reason},
      {"message", message},
      {"type", type_name(s.type)},
      {"count", count},
      {"firstTimestamp", k8s::format_time(s.first)},
      {"lastTimestamp", k8s::format_time(s.last)},
      {"source", source},
      {"reportingComponent", options_.component},
      {"reportingInstance", options_.instance},
  };
  if (!s.pod.uid.empty()) ev["involvedObject"]["uid"] = s.pod.uid;
  auto r = client_->create(k8s::core_path("events", s.pod.ns), ev);
  s.written = count;
  std::lock_guard lk(mu_);
  if (r) {
    s.event_name = std::move(name);
    ++stats_.created;
  } else {
    ++stats_.failed;
    log::warn("event on pod %s/%s (%s): %s", s.pod.ns.c_str(), s.pod.name.c_str(), s.reason.c_str(),
              r.error().message.c_str());
  }
}

}  // namespace hami::scheduler
