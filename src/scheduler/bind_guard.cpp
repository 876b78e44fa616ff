#include "scheduler/bind_guard.hpp"

namespace hami::scheduler {

std::string bind_refusal(const k8s::Pod& pod, const SchedulerConfig& config) {
  const std::string who = "pod " + pod.meta.ns + "/" + pod.meta.name;
  if (pod.scheduler_name != config.scheduler_name) {
    return who + " has schedulerName \"" + pod.scheduler_name + "\", not \"" +
           config.scheduler_name + "\": this extender binds only the pods of its own scheduler";
  }
  if (!pod.node_name.empty()) return who + " is already bound to node " + pod.node_name;
  // The API server sets Pending at creation; an object without a phase has
  // not been through it (tests), and is taken as Pending.
  if (!pod.phase.empty() && pod.phase != "Pending") {
    return who + " is " + pod.phase + ", not Pending: only a pending pod is bound";
  }
  return "";
}

}  // namespace hami::scheduler
