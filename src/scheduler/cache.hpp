#pragma once
// The extender's view of the cluster: every registered node's GPUs with their
// usage, kept up to date incrementally from watch events (node registration
// annotations, pods' allocation annotations) and from bind's reservations.
// Nothing is rebuilt per request: a pod event adds or removes that pod's
// charges on one node; a node event re-reads that node's inventory and
// re-applies the charges of the pods placed on it.
//
//   hami::scheduler::ClusterCache cache;
//   cache.set_node("node-a", inventory, links);            // hami.io/node-nvidia-register, -score
//   cache.set_pod("uid-1", {.node = "node-a", .charges = charges});  // from vgpu-devices-allocated
//   cache.read([&](const ClusterCache::View& v) { ... v.node("node-a") ... });
//   cache.remove_pod("uid-1");
//
// Concurrency: one std::shared_mutex. Requests that only read (filter,
// prioritize, metrics) take it shared and run in parallel; events and bind's
// reservation take it exclusively for the few microseconds one node's update
// costs. A reservation made by bind is visible to the next reader as soon as
// set_pod returns. Per-node locks would let writers run in parallel too, but a
// filter reads thousands of nodes and would then need thousands of lock
// operations; one lock is cheaper at our write rate.
//
// Charges are keyed by pod UID, so an event for a pod already charged (the
// watch bringing back the annotations bind wrote) replaces, never doubles, it.
// A pod's dynamic MIG placements go and come with its charges.

#include <cstdint>
#include <functional>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fit/types.hpp"
#include "fit/usage.hpp"
#include "protocol/mig_allocations.hpp"

namespace hami::scheduler {

struct PodCharge {
  std::string node;
  std::vector<fit::DeviceCharge> charges;
  // Dynamic MIG (hami.io/vgpu-mig-allocations): the placements the pod
  // holds, in its GPUs' mig_taken while it is charged, so no other pod is
  // given one that overlaps.
  std::vector<protocol::MigAllocation> mig;
  bool reserved = false;  // made by bind, not yet seen back from the API server
  // Seen from the API server with spec.nodeName set: the pod runs (or will)
  // there, and no later filter or bind of the same UID undoes it.
  bool bound = false;
  // For the per-pod metrics.
  std::string ns;
  std::string name;
};

// Heterogeneous lookup: find a node by string_view without building a string.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// What a namespace's pods hold (bound, placed or reserved), for quotas:
// memory in MiB and cores in percent, summed over every GPU.
struct NamespaceUsage {
  int64_t mem_mib = 0;
  int64_t cores = 0;
};

class ClusterCache {
 public:
  struct NodeState {
    fit::NodeDevices devices;              // inventory + current usage
    std::unordered_set<std::string> pods;  // UIDs charged here
    bool registered = false;               // has a (healthy, non-empty) inventory
    float score = 0;                       // fit::node_score(devices), kept current for prioritize
  };

  // What a reader sees, under the shared lock.
  class View {
   public:
    explicit View(const ClusterCache& c) : c_(c) {}
    // nullptr when the node is unknown or has no registered GPUs.
    const fit::NodeDevices* node(std::string_view name) const;
    const PodCharge* pod(const std::string& uid) const;
    // fit::node_score of a registered node, -1 when unknown; it is
    // recomputed on every change, so prioritize only looks it up.
    float node_score(std::string_view name) const;
    // A registered node's state (devices and score) in one lookup; nullptr
    // like node().
    const NodeState* node_state(std::string_view name) const;
    // Changes with every change to nodes or pods: two reads that see the
    // same version saw the same cache.
    uint64_t version() const { return c_.version_; }
    template <class F>
    void for_each_node(F&& f) const {
      for (const auto& [name, st] : c_.nodes_) {
        if (st.registered) f(st.devices);
      }
    }
    template <class F>
    void for_each_pod(F&& f) const {
      for (const auto& [uid, p] : c_.pods_)
        f(uid, p);
    }
    // Zero usage for a namespace holding nothing.
    NamespaceUsage namespace_usage(const std::string& ns) const { return c_.ns_usage(ns); }
    template <class F>
    void for_each_namespace(F&& f) const {
      for (const auto& [ns, u] : c_.ns_usage_)
        f(ns, u);
    }
    size_t node_count() const { return c_.registered_; }
    size_t pod_count() const { return c_.pods_.size(); }

   private:
    const ClusterCache& c_;
  };

  // Replaces a node's inventory (devices' usage fields and mig_taken are
  // ignored and recomputed from the pods placed on it) and its GPUs' pair
  // scores (by inventory position; empty: unknown). An empty list
  // unregisters it.
  void set_node(const std::string& name, std::vector<fit::GpuDevice> inventory,
                fit::LinkScores links = {});
  void remove_node(const std::string& name);

  // Charges (or re-charges) a pod on a node; replaces what the UID held before.
  void set_pod(const std::string& uid, PodCharge charge);
  // Returns whether the UID held anything.
  bool remove_pod(const std::string& uid);
  // Removes only a reservation (an entry with reserved = true) on `node`:
  // bind's rollback must not drop charges the watch has since confirmed.
  bool remove_reservation(const std::string& uid, const std::string& node);
  // Removes only confirmed charges (reserved = false).
  bool remove_confirmed(const std::string& uid);

  template <class F>
  auto read(F&& f) const {
    std::shared_lock lock(mu_);
    return f(View(*this));
  }
  // Runs f(cache) under the exclusive lock, where f may use the *_unlocked
  // members; bind fits and reserves this way, atomically.
  template <class F>
  auto with_exclusive(F&& f) {
    std::unique_lock lock(mu_);
    return f(*this);
  }

  // Unlocked forms, for with_exclusive's callback only.
  const fit::NodeDevices* node_unlocked(std::string_view name) const;
  void set_pod_unlocked(const std::string& uid, PodCharge charge);
  bool remove_pod_unlocked(const std::string& uid);
  const PodCharge* pod_unlocked(const std::string& uid) const;
  NamespaceUsage ns_usage(const std::string& ns) const;

  struct Stats {
    uint64_t node_events = 0;
    uint64_t pod_events = 0;
    uint64_t unknown_devices = 0;  // charges naming a GPU the node does not have
  };
  Stats stats() const;

 private:
  NodeState& node_entry(const std::string& name);
  void uncharge(const std::string& uid, const PodCharge& p);
  void charge(const std::string& uid, const PodCharge& p);
  // Drops a node's inventory (set_node with none, remove_node); under mu_.
  void unregister_locked(const std::string& name);
  // The id fit::GpuDevice::model_id carries for (type, mode); under mu_.
  uint32_t model_id(const std::string& type, const std::string& mode);

  mutable std::shared_mutex mu_;
  std::unordered_map<std::string, NodeState, StringHash, std::equal_to<>> nodes_;
  std::unordered_map<std::string, PodCharge> pods_;
  std::unordered_map<std::string, uint32_t> models_;  // "type\0mode" → id
  std::unordered_map<std::string, NamespaceUsage> ns_usage_;
  uint64_t version_ = 0;  // View::version(); under mu_
  size_t registered_ = 0;
  Stats stats_;
};

}  // namespace hami::scheduler
