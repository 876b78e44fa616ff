#pragma once
// Which pod kubelet is admitting when it calls Allocate, on a node whose
// registration carries hami.io/node-allocate-protocol=match-pods/v1 (our
// plugin sets it; our scheduler then binds there without the node lock, so
// several pods are bound and waiting for Allocate at once). kubelet does not
// name the pod; it is matched among the pods bound to this node:
//
//  1. Candidates: Pending, bound here, not being deleted, bind-phase
//     allocating, decision trusted (protocol/decision.hpp) and unaltered,
//     whose next containers ask for as many GPUs as kubelet does
//     (pending_pod.hpp's rules for the pod a lock names).
//  2. Of those, the ones whose next containers' GPUs are the GPUs of the
//     IDs kubelet asks for, when any: GetPreferredAllocation steered kubelet
//     to them, so the IDs say which pod it is unless two pods got the same
//     GPUs.
//  3. The first in kubelet's admission order as far as the annotations
//     tell: hami.io/bind-time, then creation time, then name.
//
// No answer, with the reason, when a Pending pod on the node asks for GPUs
// without a trusted decision (it could be the one kubelet admits), as with
// the lock. A node without the annotation, or with a node lock set (an
// upstream scheduler's), gets find_pending_pod: the pod the lock names.
//
//   PodLookup l = match_pending_pod(client, "node-1", {1}, {{"GPU-a"}}, policy);
//   if (!l.pod) return error(l.error);

#include <string>
#include <vector>

#include "deviceplugin/pending_pod.hpp"
#include "k8s/client.hpp"

namespace hami::deviceplugin {

// `sizes`: GPUs kubelet asks for, per container of this call; `gpus`: the
// physical GPUs of the IDs it asks for, per container (empty for
// GetPreferredAllocation, which has none yet).
PodLookup match_pending_pod(k8s::Client& client, const std::string& node,
                            const std::vector<size_t>& sizes,
                            const std::vector<std::vector<std::string>>& gpus,
                            const PendingPodPolicy& policy);

}  // namespace hami::deviceplugin
