#pragma once
// Which pod kubelet is admitting when it calls Allocate. kubelet does not say,
// so, as upstream (util.GetPendingPod), the node lock names it: the scheduler
// takes hami.io/mutex.lock = "<time>,<ns>,<pod>" on the node when it binds and
// holds it until Allocate finishes. Only nodes' writers (the scheduler, this
// plugin) can set it, which is why it is the only way in: unlike upstream,
// there is no fallback to "any pending pod with the right annotations", which
// anyone who can create a pod could forge (docs/security.md).
//
// The pod the lock names is served only when:
//  - it is bound to this node, not being deleted, hami.io/bind-phase
//    allocating;
//  - its decision is trusted (protocol/decision.hpp: signed by the
//    scheduler, or unsigned from a trusted scheduler);
//  - what is left in hami.io/vgpu-devices-to-allocate is part of that
//    decision (hami.io/vgpu-devices-allocated, entry for entry);
//  - its next containers ask for as many GPUs as kubelet does;
//  - no other pod on this node might be the one kubelet is admitting: a
//    Pending pod asking for our resource that kubelet has not admitted yet
//    (no status.startTime) and that this plugin has not served (a trusted
//    decision with bind-phase success). Such a pod (a GPU pod created with
//    spec.nodeName preset, past the webhook) would otherwise get the named
//    pod's GPUs; both are refused until it is gone.
//
//   PodLookup l = find_pending_pod(client, "node-1", {1}, policy);
//   if (!l.pod) { release stale lock if l.stale_lock; fail l.refused; return error(l.error) }

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deviceplugin/pod_devices.hpp"
#include "k8s/client.hpp"
#include "k8s/objects.hpp"
#include "protocol/container_contract.hpp"
#include "protocol/decision.hpp"
#include "protocol/node_lock.hpp"

namespace hami::deviceplugin {

struct PendingPod {
  k8s::Pod pod;
  PodDevices to_allocate;  // decoded hami.io/vgpu-devices-to-allocate
};

struct PendingPodPolicy {
  protocol::DecisionTrust trust;
  std::string resource_name = protocol::kResourceCount;  // what a rival pod asks for
};

struct PodLookup {
  std::optional<PendingPod> pod;
  // The pod the lock names can never be served as it is (its annotations
  // unreadable, its decision forged or altered): fail it and free the node.
  std::optional<k8s::Pod> refused;
  std::string error;  // why no pod, when pod is empty
  // The node lock names a pod that does not exist: release it.
  std::optional<protocol::NodeLock> stale_lock;
};

// `first_request_sizes`: how many devices kubelet asks for, per container of
// this call.
PodLookup find_pending_pod(k8s::Client& client, const std::string& node,
                           const std::vector<size_t>& first_request_sizes,
                           const PendingPodPolicy& policy);

// The index of the n-th container entry (0-based) that still has devices, or
// -1.
int nth_pending_container(const PodDevices& devices, size_t n);

}  // namespace hami::deviceplugin
