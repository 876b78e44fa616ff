#pragma once
// Which pods bind may act on: a pod of this scheduler (spec.schedulerName is
// ours), not yet on a node, still Pending. Anything else is refused with the
// reason, so a caller of /bind cannot place a pod that kube-scheduler did not
// schedule through us (and so skip its affinity and taint checks), or move
// one that runs.
//
//   if (std::string why = bind_refusal(pod, config); !why.empty()) return why;

#include <string>

#include "k8s/objects.hpp"
#include "scheduler/config.hpp"

namespace hami::scheduler {

// "" when bind may go on, else why not (for ExtenderBindingResult.Error).
std::string bind_refusal(const k8s::Pod& pod, const SchedulerConfig& config);

}  // namespace hami::scheduler
