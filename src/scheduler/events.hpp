#pragma once
// Kubernetes Events on pods for the scheduler's decisions, as upstream
// records them (reasons FilteringFailed, FilteringSucceed, BindingFailed,
// BindingSucceed; source component = the scheduler name), without letting a
// pending pod flood the API server or an event write hold an answer:
//
//  - record() never blocks: it queues the event for one worker thread and
//    returns; a full queue drops the event and counts it.
//  - Events of one pod with one reason form one series (client-go's
//    correlator does the same): the first is created; later ones only raise
//    the series' count, and the worker writes the count, the last time and
//    the latest message (marked "(combined from similar events)" when it
//    differs) at most once per aggregate_interval, and once more when the
//    series goes quiet. 100 failing filters of one pod in a second are one
//    create and at most a patch or two.
//  - Writes are paced (qps, burst) and the series table is bounded
//    (max_series, least recently used forgotten; a forgotten series starts
//    a new Event).
//
// The same worker sets pod labels (label_pod): bind's pod label
// hami.io/vgpu-node and the leader's hami.io/scheduler-role need an extra
// PATCH that bind's answer should not wait for either.
//
//   EventRecorder events(&client, {.component = "hami-scheduler"});
//   events.record({.ns = "default", .name = "p", .uid = uid}, EventType::kWarning,
//                 "FilteringFailed", "2 nodes 2/2 CardInsufficientMemory(a,b)");
//   events.flush();   // tests, shutdown: everything queued or pending written
//
// Thread-safe.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "common/prometheus_text.hpp"
#include "k8s/client.hpp"

namespace hami::scheduler {

inline constexpr const char* kReasonFilteringFailed = "FilteringFailed";
inline constexpr const char* kReasonFilteringSucceed = "FilteringSucceed";
inline constexpr const char* kReasonBindingFailed = "BindingFailed";
inline constexpr const char* kReasonBindingSucceed = "BindingSucceed";

enum class EventType { kNormal, kWarning };

struct PodRef {
  std::string ns;
  std::string name;
  std::string uid;
};

struct EventOptions {
  std::string component = "hami-scheduler";  // source.component (upstream: --scheduler-name)
  std::string instance;                      // source.host / reportingInstance
  std::chrono::milliseconds aggregate_interval{10000};
  size_t queue_limit = 1024;
  size_t max_series = 4096;
  double qps = 20;  // writes per second, after a burst of `burst`
  int burst = 50;
};

class EventRecorder {
 public:
  // client may be null: everything is counted as dropped (no API server).
  EventRecorder(k8s::Client* client, EventOptions options);
  // Writes what it can within kShutdownBudget, unpaced, drops (and counts)
  // the rest, then stops the worker.
  ~EventRecorder();
  static constexpr std::chrono::seconds kShutdownBudget{2};
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  void record(const PodRef& pod, EventType type, std::string reason, std::string message);
  // Merge-patches metadata.labels of the pod (a null value removes a label).
  void label_pod(const std::string& ns, const std::string& name,
                 std::map<std::string, std::string> labels);
  // Waits until the queue is empty and every series' pending count written.
  void flush();

  struct Stats {
    uint64_t recorded = 0;    // record() calls accepted into the queue
    uint64_t dropped = 0;     // queue full or no client
    uint64_t created = 0;     // Event objects created
    uint64_t patched = 0;     // series updates written
    uint64_t aggregated = 0;  // events folded into a series without a write of their own
    uint64_t failed = 0;      // writes the API server refused
    uint64_t labels = 0;      // pod label patches written
  };
  Stats stats() const;
  // hami_scheduler_events_total{result=...}.
  void render(PrometheusText& out) const;

 private:
  struct Item {
    bool is_label = false;
    PodRef pod;
    EventType type = EventType::kNormal;
    std::string reason;
    std::string message;
    std::map<std::string, std::string> labels;
    std::chrono::system_clock::time_point when;
  };
  struct Series {
    std::string key;
    PodRef pod;
    EventType type = EventType::kNormal;
    std::string reason;
    std::string event_name;  // "" until created
    std::string first_message;
    std::string message;  // latest
    int64_t count = 0;    // events in the series
    int64_t written = 0;  // count the API server has
    std::chrono::system_clock::time_point first, last;
    std::chrono::steady_clock::time_point last_write;
  };

  void run();
  void handle(Item& item);
  // Writes s if it has events the API server lacks and (force or the
  // interval passed since its last write).
  void write(Series& s, bool force);
  void take_token();
  void flush_due(bool force);

  k8s::Client* client_;
  EventOptions options_;

  mutable std::mutex mu_;
  std::condition_variable cv_;       // work queued, or stop
  std::condition_variable idle_cv_;  // worker idle (flush)
  std::deque<Item> queue_;
  // Label patches have their own queue, served before events: a backlog of
  // paced events must not hold (or drop) them.
  std::deque<Item> labels_;
  bool stop_ = false;
  // Set with stop_: writes are no longer paced, and what is left past
  // stop_deadline_ is dropped, so a backlog cannot hold the process's exit
  // (at 20 writes a second, a full queue would take almost a minute).
  std::atomic<bool> stopping_{false};
  std::chrono::steady_clock::time_point stop_deadline_;
  uint64_t flush_requests_ = 0, flushes_done_ = 0;
  Stats stats_;

  // Worker-only state.
  std::list<Series> series_;  // most recently used first
  std::unordered_map<std::string, std::list<Series>::iterator> by_key_;
  double tokens_;
  std::chrono::steady_clock::time_point refill_;
  uint64_t name_seq_ = 0;

  std::thread worker_;
};

}  // namespace hami::scheduler
