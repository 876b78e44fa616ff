#pragma once
// Watch events → cache updates: a node's GPUs from its registration annotation
// (hami.io/node-nvidia-register, with hami.io/device-cordon; a mig GPU's
// migProfiles for dynamic MIG), a pod's usage from its allocation annotation
// (hami.io/vgpu-devices-allocated on the node named by hami.io/vgpu-node)
// and the MIG placements of its hami.io/vgpu-mig-allocations. These are the Reflector callbacks of
// the daemon, and what tests and the benchmark call to load a cluster.
//
//   hami::k8s::Reflector pods(client, "/api/v1/pods", {}, {
//       .on_add = [&](const json& p) { feed.pod_changed(p); },
//       .on_update = [&](const json&, const json& p) { feed.pod_changed(p); },
//       .on_delete = [&](const json& p) { feed.pod_deleted(p); }});
//   (nodes: .on_update = [&](const json& o, const json& n) { feed.node_updated(o, n); })
//
// Bad annotations are logged (once per change) and the object is treated as
// carrying none: a node without a readable inventory is unregistered, a pod
// with an unreadable allocation holds nothing.
//
// Only decisions the scheduler made count (protocol/decision.hpp): a pod's
// allocation is charged when the pod is bound to the node it names and the
// decision is signed with our key, or comes unsigned from a scheduler the
// operator trusts. Anyone who can create a pod can write the annotations, so
// a forged decision is logged and holds nothing. Once counted, a running
// pod stays counted until it ends or is deleted, even if its annotations are
// removed or altered later: it still holds the GPU it was given.

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/result.hpp"
#include "fit/types.hpp"
#include "k8s/objects.hpp"
#include "protocol/decision.hpp"
#include "scheduler/cache.hpp"

namespace hami::scheduler {

inline constexpr const char* kAnnoDeviceCordon = "hami.io/device-cordon";
inline constexpr const char* kAnnoVgpuTime = protocol::kVgpuTime;

// The node's GPUs, healthy or not, cordon applied. Empty when it has no
// registration annotation.
Result<std::vector<fit::GpuDevice>> node_inventory(const k8s::Node& node);

// The pod's charges, or nullopt when it holds nothing (no annotation, not
// bound, finished, or a decision `trust` refuses: then `*refused` says why).
Result<std::optional<PodCharge>> pod_charge(const k8s::Pod& pod,
                                            const protocol::DecisionTrust& trust,
                                            std::string* refused = nullptr);

class CacheFeed {
 public:
  explicit CacheFeed(ClusterCache& cache, protocol::DecisionTrust trust = {})
      : cache_(cache), trust_(std::move(trust)) {}
  void node_changed(const nlohmann::json& node);
  // An update that leaves the registration and cordon annotations as they
  // were (the node lock, the handshake, status heartbeats: most node
  // updates) changes nothing and takes no lock.
  void node_updated(const nlohmann::json& old_node, const nlohmann::json& node);
  void node_deleted(const nlohmann::json& node);
  void pod_changed(const nlohmann::json& pod);
  void pod_deleted(const nlohmann::json& pod);

  uint64_t bad_objects() const { return bad_.load(); }
  // Pod events whose decision was refused (forged, altered, untrusted).
  uint64_t refused_decisions() const { return refused_.load(); }

 private:
  // A pod that holds nothing by its annotations now: what the cache counted
  // for it goes, unless it was a bound pod's verified charge (kept, `why`
  // logged) or bind's reservation (kept: its annotations are on their way).
  void drop_unless_bound(const k8s::Pod& pod, const std::string& why);

  ClusterCache& cache_;
  const protocol::DecisionTrust trust_;
  std::atomic<uint64_t> bad_{0};
  std::atomic<uint64_t> refused_{0};
};

}  // namespace hami::scheduler
