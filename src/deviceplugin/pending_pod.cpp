#include "deviceplugin/pending_pod.hpp"

#include <algorithm>
#include <set>
#include <tuple>

#include "deviceplugin/pod_match.hpp"

#include "k8s/paths.hpp"
#include "protocol/annotations.hpp"

namespace hami::deviceplugin {

using protocol::kAssignedNode;
using protocol::kBindPhase;
using protocol::kDevicesAllocated;
using protocol::kDevicesToAllocate;
using protocol::kNodeLock;
using protocol::kPhaseAllocating;
using protocol::kPhaseSuccess;
using protocol::parse_node_lock;
namespace {

std::string get_annotation(const k8s::Pod& pod, const char* key) {
  auto it = pod.meta.annotations.find(key);
  return it == pod.meta.annotations.end() ? std::string() : it->second;
}

std::string pod_name(const k8s::Pod& pod) {
  return pod.meta.ns + "/" + pod.meta.name;
}

struct Verdict {
  // kNot: not servable now (perhaps later, or another pod is meant);
  // kRefused: never servable as it is.
  enum Kind { kOk, kNot, kRefused } kind = kOk;
  std::string reason;
  PodDevices devices;
};

// Whether what is left to allocate is part of the decision: each entry empty
// (served) or the decision's entry for that container.
std::string outside_decision(const PodDevices& left, const PodDevices& decided) {
  if (left.size() != decided.size()) {
    return std::string(kDevicesToAllocate) + " has " + std::to_string(left.size()) +
           " container entries but " + kDevicesAllocated + " has " + std::to_string(decided.size());
  }
  for (size_t i = 0; i < left.size(); ++i) {
    if (!left[i].empty() && left[i] != decided[i]) {
      return std::string(kDevicesToAllocate) + " entry " + std::to_string(i) +
             " is not what the scheduler decided in " + kDevicesAllocated;
    }
  }
  return "";
}

Verdict judge(const k8s::Pod& pod, const std::string& node, const std::vector<size_t>& sizes,
              const protocol::DecisionTrust& trust) {
  Verdict v;
  auto no = [&](Verdict::Kind kind, std::string why) {
    v.kind = kind;
    v.reason = "pod " + pod_name(pod) + " " + std::move(why);
    return v;
  };
  if (pod.node_name != node) {
    return no(Verdict::kNot,
              "is not bound to node " + node + " (spec.nodeName \"" + pod.node_name + "\")");
  }
  if (pod.meta.deletion_timestamp) return no(Verdict::kNot, "is being deleted");
  const std::string phase = get_annotation(pod, kBindPhase);
  if (phase != kPhaseAllocating) {
    return no(Verdict::kNot, "has " + std::string(kBindPhase) + "=" +
                                 (phase.empty() ? "<unset>" : phase) + ", not " + kPhaseAllocating);
  }
  if (get_annotation(pod, kAssignedNode).empty() ||
      !pod.meta.annotations.count(kDevicesAllocated)) {
    return no(Verdict::kRefused, std::string("has no ") + kAssignedNode + " and " +
                                     kDevicesAllocated + ": no scheduler placed it");
  }
  if (std::string why = protocol::decision_refusal(pod, trust); !why.empty()) {
    v.kind = Verdict::kRefused;
    v.reason = std::move(why);
    return v;
  }
  auto it = pod.meta.annotations.find(kDevicesToAllocate);
  if (it == pod.meta.annotations.end()) {
    return no(Verdict::kRefused, std::string("has no ") + kDevicesToAllocate);
  }
  auto devices = decode_pod_devices(it->second);
  if (!devices) {
    return no(Verdict::kRefused, std::string("has ") + kDevicesToAllocate + " '" +
                                     it->second.substr(0, 200) +
                                     "', which cannot be read: " + devices.error().message);
  }
  auto decided = decode_pod_devices(get_annotation(pod, kDevicesAllocated));
  if (!decided) {
    return no(Verdict::kRefused, std::string("has a ") + kDevicesAllocated +
                                     " that cannot be read: " + decided.error().message);
  }
  if (std::string why = outside_decision(*devices, *decided); !why.empty()) {
    return no(Verdict::kRefused,
              "was changed after the scheduler bound it: " + why + "; it gets no GPU");
  }
  for (size_t j = 0; j < sizes.size(); ++j) {
    const int k = nth_pending_container(*devices, j);
    if (k < 0) return no(Verdict::kNot, "has no container left with GPUs to allocate");
    const size_t have = (*devices)[static_cast<size_t>(k)].size();
    if (have != sizes[j]) {
      return no(Verdict::kNot, "does not match: device number not matched (kubelet asks for " +
                                   std::to_string(sizes[j]) + " GPUs, the scheduler assigned " +
                                   std::to_string(have) + " to its next container)");
    }
  }
  v.devices = std::move(*devices);
  return v;
}

bool asks_for(const k8s::Pod& pod, const std::string& resource) {
  for (const auto* list : {&pod.init_containers, &pod.containers}) {
    for (const k8s::Container& c : *list) {
      if (c.limits.count(resource) || c.requests.count(resource)) return true;
    }
  }
  return false;
}

// A GPU pod waiting on the node that the scheduler did not place, and why it
// is not trusted (empty `name`: none).
struct Rival {
  std::string name;
  std::string why;
};

// A pod on this node, other than `named`, that kubelet may be admitting now:
// Pending, asking for our resource, not admitted (kubelet sets
// status.startTime once it has, and tenants cannot write status) and not
// served by us. No name when there is none.
// `ours`: a pod this plugin serves or has served, not a rival.
template <class Ours>
Rival rival(const std::vector<nlohmann::json>& items, const PendingPodPolicy& policy, Ours&& ours) {
  for (const nlohmann::json& item : items) {
    auto pod = k8s::Pod::from_json(item);
    if (!pod || ours(*pod)) continue;
    if (pod->phase != "Pending" || pod->meta.deletion_timestamp) continue;
    if (!asks_for(*pod, policy.resource_name)) continue;
    const auto status = item.find("status");
    if (status != item.end() && status->is_object() && status->contains("startTime")) continue;
    const bool decided = pod->meta.annotations.count(kDevicesAllocated) != 0;
    const std::string refusal = decided ? protocol::decision_refusal(*pod, policy.trust) : "";
    if (get_annotation(*pod, kBindPhase) == kPhaseSuccess && decided && refusal.empty()) {
      continue;  // served by us; kubelet has yet to report it started
    }
    return {pod_name(*pod), decided && !refusal.empty() ? refusal : "it carries no decision"};
  }
  return {};
}

}  // namespace

int nth_pending_container(const PodDevices& devices, size_t n) {
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i].empty()) continue;
    if (n == 0) return static_cast<int>(i);
    --n;
  }
  return -1;
}

PodLookup find_pending_pod(k8s::Client& client, const std::string& node,
                           const std::vector<size_t>& sizes, const PendingPodPolicy& policy) {
  PodLookup out;
  const std::string none = "no pod waiting for GPUs on node " + node + ": ";
  auto node_obj = client.get(k8s::node_path(node));
  if (!node_obj) {
    out.error = "cannot read node " + node + ": " + node_obj.error().message;
    return out;
  }
  const nlohmann::json* lock_value = nullptr;
  if (auto md = node_obj->find("metadata"); md != node_obj->end() && md->is_object()) {
    if (auto an = md->find("annotations"); an != md->end() && an->is_object()) {
      if (auto l = an->find(kNodeLock); l != an->end() && l->is_string()) lock_value = &*l;
    }
  }
  const std::string only_locked =
      ": only the pod the scheduler locked the node for is served, so a pod that the HAMi "
      "scheduler did not place here (spec.nodeName set at creation, another scheduler) gets "
      "no GPU";
  if (lock_value == nullptr) {
    out.error = none + "node " + node + " has no " + kNodeLock + only_locked;
    return out;
  }
  auto lock = parse_node_lock(lock_value->get<std::string>());
  if (!lock) {
    out.error = none + "node " + node + ": " + lock.error().message + only_locked;
    return out;
  }
  if (!lock->names_pod()) {
    out.error =
        none + "the node lock on " + node + " names no pod (an old scheduler's form)" + only_locked;
    return out;
  }
  const std::string who = lock->ns + "/" + lock->name;
  auto pj = client.get(k8s::pod_path(lock->ns, lock->name));
  if (!pj && pj.error().not_found()) {
    out.stale_lock = *lock;
    out.error = none + "the node lock on " + node + " names pod " + who + ", which does not exist";
    return out;
  }
  if (!pj) {
    out.error = "cannot read pod " + who + " named by the node lock: " + pj.error().message;
    return out;
  }
  auto pod = k8s::Pod::from_json(*pj);
  if (!pod) {
    out.error =
        none + "pod " + who + " named by the node lock cannot be read: " + pod.error().message;
    return out;
  }
  Verdict v = judge(*pod, node, sizes, policy.trust);
  if (v.kind == Verdict::kRefused) {
    out.refused = std::move(*pod);
    out.error = v.reason;
    return out;
  }
  if (v.kind == Verdict::kNot) {
    out.error = none + "the node lock names " + v.reason;
    return out;
  }
  k8s::ListOptions lo;
  lo.field_selector = "spec.nodeName=" + node + ",status.phase=Pending";
  auto list = client.list(k8s::pod_path(""), lo);
  if (!list) {
    out.error = "cannot list the pods on " + node + " to check that kubelet is admitting " + who +
                ": " + list.error().message;
    return out;
  }
  if (Rival other = rival(list->items, policy,
                          [&](const k8s::Pod& p) { return p.meta.uid == pod->meta.uid; });
      !other.name.empty()) {
    out.error = "node " + node + " is locked for pod " + who + ", but pod " + other.name +
                " also waits there for " + policy.resource_name +
                " without being placed by the HAMi scheduler (" + other.why +
                "), and kubelet does not say which of the two it is admitting: neither gets a "
                "GPU until " +
                other.name + " is gone (delete it; GPU pods must not set spec.nodeName)";
    return out;
  }
  out.pod = PendingPod{std::move(*pod), std::move(v.devices)};
  return out;
}

namespace {

// Matched among the node's pods: the node says so and no lock names a pod
// (an upstream scheduler's, or one taken before the annotation was seen).
bool matches_pods(const nlohmann::json& node) {
  const auto md = node.find("metadata");
  if (md == node.end() || !md->is_object()) return false;
  const auto an = md->find("annotations");
  if (an == md->end() || !an->is_object()) return false;
  return an->value(protocol::kNodeAllocateProtocol, "") == protocol::kAllocateMatchPods &&
         an->value(kNodeLock, "").empty();
}

// kubelet's admission order as the annotations tell it: bind time (seconds),
// creation time, name.
std::tuple<int64_t, k8s::TimePoint, std::string> admission_key(const k8s::Pod& pod) {
  int64_t bound = 0;
  const std::string t = get_annotation(pod, protocol::kBindTime);
  try {
    bound = t.empty() ? 0 : std::stoll(t);
  } catch (const std::exception&) {
    bound = 0;
  }
  return {bound, pod.meta.creation_timestamp.value_or(k8s::TimePoint{}), pod_name(pod)};
}

}  // namespace

PodLookup match_pending_pod(k8s::Client& client, const std::string& node,
                            const std::vector<size_t>& sizes,
                            const std::vector<std::vector<std::string>>& gpus,
                            const PendingPodPolicy& policy) {
  PodLookup out;
  auto node_obj = client.get(k8s::node_path(node));
  if (!node_obj) {
    out.error = "cannot read node " + node + ": " + node_obj.error().message;
    return out;
  }
  if (!matches_pods(*node_obj)) return find_pending_pod(client, node, sizes, policy);
  // Phase is checked here: a pod not yet given one is as good as Pending.
  k8s::ListOptions lo;
  lo.field_selector = "spec.nodeName=" + node;
  auto list = client.list(k8s::pod_path(""), lo);
  if (!list) {
    out.error = "cannot list the pods on " + node +
                " to find the one kubelet is admitting: " + list.error().message;
    return out;
  }
  struct Candidate {
    k8s::Pod pod;
    PodDevices devices;
    bool same_gpus = false;
  };
  std::vector<Candidate> found;
  std::vector<std::string> not_matching;
  for (const nlohmann::json& item : list->items) {
    auto pod = k8s::Pod::from_json(item);
    if (!pod || (pod->phase != "Pending" && !pod->phase.empty())) continue;
    if (get_annotation(*pod, kBindPhase) != kPhaseAllocating) continue;
    Verdict v = judge(*pod, node, sizes, policy.trust);
    if (v.kind != Verdict::kOk) {
      if (not_matching.size() < 3) not_matching.push_back(v.reason);
      continue;
    }
    Candidate c{std::move(*pod), std::move(v.devices)};
    c.same_gpus = !gpus.empty();
    for (size_t j = 0; j < gpus.size() && c.same_gpus; ++j) {
      const int k = nth_pending_container(c.devices, j);
      std::set<std::string> decided;
      for (const auto& d : c.devices[static_cast<size_t>(k)])
        decided.insert(d.uuid);
      c.same_gpus = decided == std::set<std::string>(gpus[j].begin(), gpus[j].end());
    }
    found.push_back(std::move(c));
  }
  // A pod the scheduler did not place (forged, altered, spec.nodeName
  // preset) may be the one kubelet admits: nobody is served until it is gone.
  auto trusted = [&](const k8s::Pod& p) {
    const std::string phase = get_annotation(p, kBindPhase);
    return (phase == kPhaseAllocating || phase == kPhaseSuccess) &&
           p.meta.annotations.count(kDevicesAllocated) &&
           protocol::decision_refusal(p, policy.trust).empty();
  };
  if (Rival other = rival(list->items, policy, trusted); !other.name.empty()) {
    out.error = "pod " + other.name + " waits on node " + node + " for " + policy.resource_name +
                " without a decision of the HAMi scheduler (" + other.why +
                "), and kubelet does not say which pod it is admitting: no pod gets a GPU until " +
                other.name + " is gone (delete it; GPU pods must not set spec.nodeName)";
    return out;
  }
  if (found.empty()) {
    std::string sz;
    for (size_t n : sizes)
      sz += (sz.empty() ? "" : ", ") + std::to_string(n);
    out.error = "no pod waiting for GPUs on node " + node + " matches kubelet's request for " + sz +
                " GPU(s)";
    for (const std::string& why : not_matching)
      out.error += "; " + why;
    return out;
  }
  const bool any_same =
      std::any_of(found.begin(), found.end(), [](const Candidate& c) { return c.same_gpus; });
  auto best = found.end();
  for (auto it = found.begin(); it != found.end(); ++it) {
    if (any_same && !it->same_gpus) continue;
    if (best == found.end() || admission_key(it->pod) < admission_key(best->pod)) best = it;
  }
  out.pod = PendingPod{std::move(best->pod), std::move(best->devices)};
  return out;
}

}  // namespace hami::deviceplugin
