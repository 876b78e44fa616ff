#pragma once
// PodDirectory backed by the API server, asking only for the pods bound to
// this node (a list with fieldSelector spec.nodeName=<node>): no cluster-wide
// watch on every node, which upstream's monitor ran and which costs the API
// server a stream per node. The list is re-read when a pass meets a pod UID it
// does not know (at most once per 10 s) and every resync interval.
//
//   auto d = make_k8s_pod_directory("", "node-1", std::chrono::minutes(5));
//   if (!d) log(d.error().message);   // no kubeconfig, no in-cluster config

#include <chrono>
#include <memory>
#include <string>

#include "common/result.hpp"
#include "monitor/pod_directory.hpp"

namespace hami::monitor {

// `kubeconfig` empty: $KUBECONFIG, in-cluster, then ~/.kube/config.
Result<std::unique_ptr<PodDirectory>> make_k8s_pod_directory(const std::string& kubeconfig,
                                                             const std::string& node_name,
                                                             std::chrono::seconds resync);

}  // namespace hami::monitor
