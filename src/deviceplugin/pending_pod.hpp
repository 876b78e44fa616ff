#pragma once
// Which pod kubelet is admitting when it calls Allocate. kubelet does not say,
// so, as upstream (util.GetPendingPod), the node lock names it: the scheduler
// takes hami.io/mutex.lock = "<time>,<ns>,<pod>" on the node when it binds and
// holds it until Allocate finishes. Where the lock is absent, legacy or names a
// pod that is not waiting here, the pods bound to this node that are still
// Pending with hami.io/bind-phase=allocating, hami.io/vgpu-node = this node
// and devices left in hami.io/vgpu-devices-to-allocate are the candidates,
// oldest hami.io/bind-time first. Unlike upstream, a candidate must also have
// its next container ask for as many GPUs as kubelet does, so a pod whose
// devices do not match is never served in another's place.
//
//   PodLookup l = find_pending_pod(client, "node-1", {1});
//   if (!l.pod) { release stale lock if l.stale_lock; return error(l.error) }

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deviceplugin/pod_devices.hpp"
#include "k8s/client.hpp"
#include "k8s/objects.hpp"
#include "protocol/node_lock.hpp"

namespace hami::deviceplugin {

struct PendingPod {
  k8s::Pod pod;
  PodDevices to_allocate;  // decoded hami.io/vgpu-devices-to-allocate
  bool named_by_lock = false;
};

struct PodLookup {
  std::optional<PendingPod> pod;
  // The pod was found but its annotation cannot be read: fail that pod.
  std::optional<k8s::Pod> undecodable;
  std::string error;  // why no pod, when pod is empty
  // The node lock names a pod that does not exist: release it.
  std::optional<protocol::NodeLock> stale_lock;
};

// `first_request_sizes`: how many devices kubelet asks for, per container of
// this call; only candidates whose next containers match are taken.
PodLookup find_pending_pod(k8s::Client& client, const std::string& node,
                           const std::vector<size_t>& first_request_sizes);

// The index of the n-th container entry (0-based) that still has devices, or
// -1.
int nth_pending_container(const PodDevices& devices, size_t n);

}  // namespace hami::deviceplugin
