#pragma once
// The extender's three verbs on plain data, against the cache:
//
//  - filter: every candidate node the pod fits, and a reason for each other
//    (upstream returned only its own single best node, HAMi#2264, so
//    kube-scheduler's scoring never counted). Nothing is reserved here; a
//    reservation the pod still holds from an earlier attempt is dropped.
//  - prioritize: each node's score under the pod's node policy, 0..10.
//  - bind: fits the pod on the chosen node and reserves the devices (and on
//    a dynamic MIG GPU the MIG placement) in the cache under its exclusive
//    lock (the next filter sees them at once), then through the BindBackend
//    takes the node lock and binds with upstream's annotations
//    (hami.io/vgpu-mig-allocations among them for dynamic MIG). When the
//    chosen node no longer fits (another bind took the room first) or
//    another pod holds its lock, the pod goes to the best other node its
//    filter found fitting, so it binds in this scheduling
//    cycle instead of waiting in kube-scheduler's back-off. Any failure
//    releases the lock and the reservation.
//
//   Extender ext(cache, config, &backend, &metrics);
//   FilterResult f = ext.filter(pod, node_names);
//   std::vector<HostPriority> p = ext.prioritize(pod, f.nodes);
//   BindOutcome b = ext.place({.ns = "default", .name = "p", .uid = uid, .node = f.nodes[0]});
//   // b.error empty on success; b.node is where the pod went
//
// Thread-safe: the verbs may run concurrently from any number of threads.

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/result.hpp"
#include "k8s/objects.hpp"
#include "scheduler/cache.hpp"
#include "scheduler/config.hpp"
#include "scheduler/events.hpp"
#include "scheduler/in_flight.hpp"
#include "scheduler/metrics.hpp"
#include "scheduler/parallel.hpp"
#include "scheduler/pod_request.hpp"
#include "scheduler/quota.hpp"
#include "scheduler/score_memo.hpp"

namespace hami::scheduler {

struct LockError {
  bool contended = false;  // another live pod holds the lock
  std::string message;     // says who holds it, or what failed
};

// What bind needs from the API server. The daemon's implementation uses the
// Kubernetes client (k8s_backend.hpp); the benchmark's answers in memory.
class BindBackend {
 public:
  virtual ~BindBackend() = default;
  virtual Result<k8s::Pod> get_pod(const std::string& ns, const std::string& name) = 0;
  // Upstream's node lock (§3.8). A lock another live pod holds is waited for
  // up to `wait` (0: not at all), then reported with `contended` set.
  virtual Result<void, LockError> lock_node(const std::string& node, const std::string& ns,
                                            const std::string& name,
                                            std::chrono::milliseconds wait) = 0;
  // Best effort; only a lock this pod holds is released.
  virtual void unlock_node(const std::string& node, const std::string& ns,
                           const std::string& name) = 0;
  // pods/binding, carrying `annotations`: the API server sets them on the pod
  // in the same update as spec.nodeName, so the pod is never seen bound
  // without them, and a failed binding leaves nothing behind.
  virtual Result<void> bind(const std::string& ns, const std::string& name, const std::string& uid,
                            const std::string& node,
                            const std::map<std::string, std::string>& annotations) = 0;
};

struct FilterResult {
  bool ours = true;                // false: the pod asks for none of our resources
  std::vector<std::string> nodes;  // fitting, in the order given
  std::map<std::string, std::string> failed;
  std::string error;  // the request could not be handled (bad pod)
};

struct HostPriority {
  std::string host;
  int64_t score = 0;
};

struct BindRequest {
  std::string ns;
  std::string name;
  std::string uid;
  std::string node;
  // No node lock is waited for past this, and no node tried once it has
  // passed: the bind answers an error kube-scheduler retries the pod on
  // (SchedulerConfig::bind_deadline after the request arrived).
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

struct BindOutcome {
  std::string error;  // empty on success, else for ExtenderBindingResult.Error
  std::string node;   // where the pod was bound: the request's node or another
};

// At most this many nodes are tried for one bind: kube-scheduler's choice and
// the best others.
inline constexpr size_t kMaxBindNodes = 16;
// At most this many binds wait for the lock of kube-scheduler's choice at
// once; a bind beyond them goes to another node at once (a waiting bind
// holds one of the server's request threads).
inline constexpr int kMaxLockWaiters = 4;
// filter keeps this many of a pod's fitting nodes, its best, for bind to
// choose from when kube-scheduler's choice is taken. A burst created in one
// second keeps one pod of each size in flight per match-pods node, so a
// burst of a few hundred pods/s needs a few hundred nodes to choose from
// (64 left 13 of 12,000 binds at 500 nodes with nowhere to go). About 8 KB
// a pod between its filter and its bind.
inline constexpr size_t kMaxRememberedNodes = 256;

inline constexpr int kMaxExtenderPriority = 10;

class Extender {
 public:
  Extender(ClusterCache& cache, const SchedulerConfig& config, BindBackend* backend,
           Metrics* metrics);

  // Whether this replica may bind (leader election), waiting up to the
  // given time to become the leader; default: always.
  void set_leader_check(std::function<bool(std::chrono::milliseconds)> f) {
    is_leader_ = std::move(f);
  }
  // Splits filter and prioritize over many nodes across the pool's threads;
  // without one, the request's own thread does all.
  void set_pool(ParallelFor* pool) { pool_ = pool; }
  // Where filter and bind record Events (FilteringFailed, ..., BindingSucceed)
  // and bind sets the pod label hami.io/vgpu-node; none: no events.
  void set_events(EventRecorder* events) { events_ = events; }
  // Namespace quotas on gpumem/gpucores: filter fails every node, and bind
  // refuses, for a pod that would take its namespace over one.
  void set_quotas(const QuotaTracker* quotas) { quotas_ = quotas; }
  // Who holds a node's lock as the node watch last showed it ("<ns>/<pod>",
  // "" for none): bind tries unlocked nodes before locked ones.
  void set_lock_holders(std::function<std::string(const std::string& node)> f) {
    lock_holder_ = std::move(f);
  }
  // Whether a node's device plugin matches each Allocate to its pod
  // (hami.io/node-allocate-protocol=match-pods/v1, as the node watch last
  // showed it): bind takes no node lock there, so several pods of one node
  // are bound and allocated at once. Unset, or false: upstream's lock.
  void set_matches_pods(std::function<bool(const std::string& node)> f) {
    matches_pods_ = std::move(f);
  }
  // The pod watch's events, for the pods in flight on nodes whose plugin
  // matches pods (in_flight.hpp).
  void pod_seen(const nlohmann::json& pod) { in_flight_.observe(pod); }
  void pod_gone(const nlohmann::json& pod) { in_flight_.forget(pod); }
  // Wall clock for vgpu-time/bind-time; tests inject one.
  void set_clock(std::function<std::chrono::system_clock::time_point()> f) { now_ = std::move(f); }

  FilterResult filter(const k8s::Pod& pod, std::span<const std::string> node_names);
  // Nodes unknown to the cache score 0; a pod not ours scores 0 everywhere.
  Result<std::vector<HostPriority>> prioritize(const k8s::Pod& pod,
                                               std::span<const std::string> node_names);
  // Binds the pod, on the requested node or another; says where.
  BindOutcome place(const BindRequest& request);
  // place() for ExtenderBindingResult: "" on success, else the error.
  std::string bind(const BindRequest& request) { return place(request).error; }

 private:
  void drop_previous(const std::string& uid);
  // kube-scheduler binds asynchronously: the next pod's filter and
  // prioritize run while this pod's bind is in flight. So filter remembers
  // the pods it saw, and bind reserves from that copy as soon as it arrives,
  // before reading the pod back from the API server; otherwise the next pod
  // is scored on usage without this one (two pods of a batch on one GPU
  // under spread).
  // With the pod, filter keeps the nodes it found fitting (the best
  // kMaxRememberedNodes): where bind may send the pod when kube-scheduler's
  // choice is taken.
  struct Seen {
    k8s::Pod pod;
    std::vector<std::string> fitting;
  };
  void remember(const k8s::Pod& pod, std::vector<std::string> fitting);
  // The kMaxRememberedNodes best of filter's fitting nodes under `policy`
  // (all of them when fewer), those not `blocked` (when given) first: a
  // pending pod's copy stays small.
  static std::vector<std::string> best_fitting(const std::vector<std::string>& nodes,
                                               const std::vector<float>& scores,
                                               const std::vector<uint8_t>& blocked,
                                               fit::NodePolicy policy);
  // The pod as the in-flight record sees it, on no node yet.
  static InFlightPod probe_of(const k8s::Pod& pod, const fit::PreparedPod& prepared);
  std::optional<Seen> recall(const std::string& uid);
  // What a reservation decided, as the binding's annotations carry it.
  struct Decided {
    std::string devices;  // hami.io/vgpu-devices-allocated
    std::string mig;      // hami.io/vgpu-mig-allocations; "" without dynamic MIG
  };
  // Fits `req` on `node` and reserves it for `uid`, its dynamic MIG
  // placements included; the error, or "" with the annotations in `decided`.
  std::string reserve(const std::string& uid, const BindRequest& r, const std::string& node,
                      const SchedulingRequest& req, Decided* decided);
  // reserve(), and on a node whose plugin matches pods the pod's in-flight
  // record in `flight`: `probe` on that node (nullopt elsewhere).
  std::string reserve_for(const std::string& uid, const BindRequest& r, const std::string& node,
                          const SchedulingRequest& req, const InFlightPod& probe, Decided* decided,
                          std::optional<InFlightPod>* flight);
  // The nodes of `fitting` other than `chosen` where `prepared` fits now,
  // best first under the pod's node policy by the cache's current scores,
  // those the node watch shows locked by another pod after the rest; at
  // most `limit`. Fit is checked first because, under binpack, the best
  // scored nodes are the fullest: by bind time the ones filter liked best
  // are often the ones other binds have just filled.
  struct Alternatives {
    std::vector<std::string> nodes;
    size_t others = 0;  // nodes of `fitting` other than `chosen`
    size_t no_fit = 0;  // of those, where the pod no longer fits
  };
  Alternatives alternatives(const std::vector<std::string>& fitting, const std::string& chosen,
                            const fit::PreparedPod& prepared, const std::string& who,
                            const InFlightPod& probe, size_t limit);
  // Locked by another pod (upstream's lock), or, where the plugin matches
  // pods, with a pod in flight that `probe` could be mistaken for.
  bool taken_by_another(const std::string& node, const std::string& who, const InFlightPod& probe);
  // Locks `node` and binds there with the annotations; "" or the error.
  // With `flight` (a node whose plugin matches pods) no lock: the pod's
  // in-flight claim instead, waiting at most `wait` for either.
  std::string lock_and_bind(const BindRequest& r, const std::string& uid, const std::string& node,
                            const Decided& decided, const std::optional<InFlightPod>& flight,
                            std::chrono::milliseconds wait, bool* contended);

  ClusterCache& cache_;
  const SchedulerConfig& config_;
  BindBackend* backend_;
  Metrics* metrics_;
  ParallelFor* pool_ = nullptr;
  EventRecorder* events_ = nullptr;
  const QuotaTracker* quotas_ = nullptr;
  std::function<bool(std::chrono::milliseconds)> is_leader_;
  std::function<std::string(const std::string&)> lock_holder_;
  std::function<bool(const std::string&)> matches_pods_;
  // Whether `node`'s plugin matches pods (set_matches_pods); false unset.
  bool matches_pods(const std::string& node) const { return matches_pods_ && matches_pods_(node); }
  InFlightAllocations in_flight_;
  std::function<std::chrono::system_clock::time_point()> now_;
  ScoreMemo memo_;  // filter's scores for the prioritize that follows
  void filter_event(const k8s::Pod& pod, const FilterResult& out);
  std::mutex seen_mu_;
  std::unordered_map<std::string, Seen> seen_;  // by UID, cleared past kMaxSeen
  // Nodes this process locked in the last moment, by when: the node watch
  // shows a lock only some milliseconds after it is taken, and concurrent
  // binds would otherwise all pick the same node the watch shows free.
  void note_locked(const std::string& node);
  bool locked_recently(const std::string& node);
  // Locked by another pod than `who` ("<ns>/<pod>"), as far as this process
  // and the node watch know.
  bool locked_by_another(const std::string& node, const std::string& who);
  std::mutex recent_mu_;
  std::unordered_map<std::string, std::chrono::steady_clock::time_point> recent_locks_;
  // Binds now waiting for a lock; a WaiterSlot counts one while it lives.
  std::atomic<int> lock_waiters_{0};
  class WaiterSlot {
   public:
    explicit WaiterSlot(std::atomic<int>& n) : n_(n), count_(++n) {}
    ~WaiterSlot() { --n_; }
    WaiterSlot(const WaiterSlot&) = delete;
    WaiterSlot& operator=(const WaiterSlot&) = delete;
    int count() const { return count_; }  // waiters, this one included

   private:
    std::atomic<int>& n_;
    int count_;
  };
};

}  // namespace hami::scheduler
