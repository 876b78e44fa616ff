#pragma once
// A Kubernetes pod as the fitting core needs it: one ContainerRequest per
// container (init containers first, positional like the allocation
// annotation), the containers' kinds, and the pod's placement options from
// its annotations, checked and prepared.
//
//   auto r = hami::scheduler::pod_request(pod, config);
//   if (!r) return fail(r.error().message);   // "container 'main': nvidia.com/gpumem=…"
//   if (!r->prepared) return pass_through();  // asks for none of our resources
//   fit_pod(node, *r->prepared, scratch);

#include <optional>
#include <vector>

#include "common/result.hpp"
#include "fit/fit.hpp"
#include "k8s/objects.hpp"
#include "scheduler/config.hpp"

namespace hami::scheduler {

struct SchedulingRequest {
  std::optional<fit::PreparedPod> prepared;  // nullopt: no container asks for a GPU
  std::vector<fit::ContainerKind> kinds;
  int64_t user = fit::kUserUndeclared;  // pod_user(): also in prepared's options
};

// The user the pod's GPU containers run as, for MPS GPUs (one user per
// server): the runAsUser of the first container (init containers first)
// whose position uses_gpu marks and that declares one, else the pod's, else
// fit::kUserUndeclared.
int64_t pod_user(const k8s::Pod& pod, const std::vector<bool>& uses_gpu);

Result<SchedulingRequest> pod_request(const k8s::Pod& pod, const SchedulerConfig& config);

// Whether any container names one of our resources in limits or requests
// (count, memory, percentage, cores), valid or not: the webhook's "is this
// ours" test.
bool requests_our_resources(const k8s::Pod& pod, const SchedulerConfig& config);

}  // namespace hami::scheduler
