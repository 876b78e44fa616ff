#pragma once
// Finds node locks that nobody will release. bind takes a node's lock
// (hami.io/mutex.lock = "<time>,<ns>,<pod>") and the device plugin on that
// node releases it once kubelet has allocated the pod. A bind cut short
// between the two (the extender killed after the lock, before the binding)
// leaves the lock behind; when the pod is then bound to another node, no
// device plugin ever releases it, and the node stays locked until a bind
// there takes it over or the lock expires (--node-lock-timeout). This
// follows node locks and our pods' nodes from the watches and reports each
// lock whose pod is bound elsewhere, once, for the daemon to release. What
// it follows also tells bind which nodes are locked right now (holder()).
//
//   StaleLocks stale([&](const std::string& node, const std::string& ns,
//                        const std::string& pod) { backend.unlock_node(node, ns, pod); });
//   nodes: .on_add/.on_update = [&](...n) { stale.node_seen(n); }, .on_delete = node_gone
//   pods:  .on_add/.on_update = [&](...p) { stale.pod_seen(p); }, .on_delete = pod_gone
//
// Thread-safe; the release callback runs on the caller's thread, without
// the lock held.

#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace hami::scheduler {

class StaleLocks {
 public:
  using Release =
      std::function<void(const std::string& node, const std::string& ns, const std::string& pod)>;
  explicit StaleLocks(Release release) : release_(std::move(release)) {}

  void node_seen(const nlohmann::json& node);
  void node_gone(const nlohmann::json& node);
  // Only pods the scheduler placed (hami.io/vgpu-node set) are followed.
  void pod_seen(const nlohmann::json& pod);
  void pod_gone(const nlohmann::json& pod);

  size_t locks() const;  // locks naming a pod, as last seen
  // Who holds `node`'s lock as last seen: "<ns>/<pod>", or "" for none.
  std::string holder(const std::string& node) const;

 private:
  void check(const std::string& holder);      // mu_ held; may queue releases
  void forget_lock(const std::string& node);  // mu_ held: node's lock, if known, is gone

  Release release_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::string> holder_of_;  // node → "ns/pod"
  // "ns/pod" → the nodes it locks: two after a bind cut short and retried
  // elsewhere (the stale lock and the retry's own).
  std::unordered_map<std::string, std::vector<std::string>> locked_;
  std::unordered_map<std::string, std::string> bound_to_;  // "ns/pod" → its spec.nodeName
  struct Pending {
    std::string node, ns, pod;
  };
  std::vector<Pending> pending_;  // releases to make once mu_ is let go
};

}  // namespace hami::scheduler
