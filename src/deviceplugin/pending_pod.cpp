#include "deviceplugin/pending_pod.hpp"

#include <algorithm>
#include <charconv>
#include <limits>

#include "k8s/paths.hpp"
#include "protocol/annotations.hpp"

namespace hami::deviceplugin {

using protocol::kAssignedNode;
using protocol::kBindPhase;
using protocol::kBindTime;
using protocol::kDevicesToAllocate;
using protocol::kNodeLock;
using protocol::kPhaseAllocating;
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
  enum Kind { kOk, kNot, kUndecodable } kind = kOk;
  std::string reason;
  PodDevices devices;
};

Verdict judge(const k8s::Pod& pod, const std::string& node, const std::vector<size_t>& sizes) {
  Verdict v;
  auto no = [&](std::string why) {
    v.kind = Verdict::kNot;
    v.reason = "pod " + pod_name(pod) + " " + std::move(why);
    return v;
  };
  if (pod.node_name != node && get_annotation(pod, kAssignedNode) != node)
    return no("is not assigned to node " + node);
  if (pod.meta.deletion_timestamp) return no("is being deleted");
  const std::string phase = get_annotation(pod, kBindPhase);
  if (phase != kPhaseAllocating) {
    return no("has " + std::string(kBindPhase) + "=" + (phase.empty() ? "<unset>" : phase) +
              ", not " + kPhaseAllocating);
  }
  auto it = pod.meta.annotations.find(kDevicesToAllocate);
  if (it == pod.meta.annotations.end()) return no(std::string("has no ") + kDevicesToAllocate);
  auto devices = decode_pod_devices(it->second);
  if (!devices) {
    v.kind = Verdict::kUndecodable;
    v.reason = "pod " + pod_name(pod) + ": " + kDevicesToAllocate + " '" +
               it->second.substr(0, 200) + "' cannot be read: " + devices.error().message;
    return v;
  }
  for (size_t j = 0; j < sizes.size(); ++j) {
    const int k = nth_pending_container(*devices, j);
    if (k < 0) return no("has no container left with GPUs to allocate");
    const size_t have = (*devices)[static_cast<size_t>(k)].size();
    if (have != sizes[j]) {
      return no("does not match: device number not matched (kubelet asks for " +
                std::to_string(sizes[j]) + " GPUs, the scheduler assigned " + std::to_string(have) +
                " to its next container)");
    }
  }
  v.devices = std::move(*devices);
  return v;
}

int64_t bind_time(const k8s::Pod& pod) {
  const std::string t = get_annotation(pod, kBindTime);
  int64_t v = 0;
  const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || p != t.data() + t.size())
    return std::numeric_limits<int64_t>::max();
  return v;
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
                           const std::vector<size_t>& sizes) {
  PodLookup out;
  auto node_obj = client.get(k8s::node_path(node));
  if (!node_obj) {
    out.error = "cannot read node " + node + ": " + node_obj.error().message;
    return out;
  }
  std::string lock_note;
  const nlohmann::json* lock_value = nullptr;
  if (auto md = node_obj->find("metadata"); md != node_obj->end() && md->is_object()) {
    if (auto an = md->find("annotations"); an != md->end() && an->is_object()) {
      if (auto l = an->find(kNodeLock); l != an->end() && l->is_string()) lock_value = &*l;
    }
  }
  if (lock_value == nullptr) {
    lock_note = "node " + node + " has no " + kNodeLock;
  } else if (auto lock = parse_node_lock(lock_value->get<std::string>()); !lock) {
    lock_note = "node " + node + ": " + lock.error().message;
  } else if (!lock->names_pod()) {
    lock_note = "the node lock on " + node + " names no pod (legacy form)";
  } else {
    const std::string who = lock->ns + "/" + lock->name;
    auto pj = client.get(k8s::pod_path(lock->ns, lock->name));
    if (!pj && pj.error().not_found()) {
      out.stale_lock = *lock;
      lock_note = "the node lock on " + node + " names pod " + who + ", which does not exist";
    } else if (!pj) {
      out.error = "cannot read pod " + who + " named by the node lock: " + pj.error().message;
      return out;
    } else if (auto pod = k8s::Pod::from_json(*pj); !pod) {
      lock_note = "pod " + who + " named by the node lock cannot be read: " + pod.error().message;
    } else {
      Verdict v = judge(*pod, node, sizes);
      if (v.kind == Verdict::kOk) {
        out.pod = PendingPod{std::move(*pod), std::move(v.devices), true};
        return out;
      }
      if (v.kind == Verdict::kUndecodable) {
        out.undecodable = std::move(*pod);
        out.error = v.reason;
        return out;
      }
      lock_note = "the node lock names " + v.reason;
    }
  }

  k8s::ListOptions lo;
  lo.field_selector = "spec.nodeName=" + node + ",status.phase=Pending";
  auto list = client.list(k8s::pod_path(""), lo);
  if (!list) {
    out.error = lock_note + "; cannot list the pods on " + node + ": " + list.error().message;
    return out;
  }
  std::vector<std::pair<int64_t, PendingPod>> found;
  std::string first_reason;
  for (const nlohmann::json& item : list->items) {
    auto pod = k8s::Pod::from_json(item);
    if (!pod) continue;
    if (pod->meta.annotations.count(kBindPhase) == 0) continue;  // not ours
    Verdict v = judge(*pod, node, sizes);
    if (v.kind == Verdict::kUndecodable && !out.undecodable) {
      out.undecodable = *pod;
      out.error = v.reason;
    }
    if (v.kind != Verdict::kOk) {
      if (first_reason.empty()) first_reason = v.reason;
      continue;
    }
    const int64_t t = bind_time(*pod);
    found.emplace_back(t, PendingPod{std::move(*pod), std::move(v.devices), false});
  }
  if (found.empty()) {
    if (out.undecodable) return out;
    out.error = "no pod waiting for GPUs on node " + node + ": " + lock_note +
                ", and no Pending pod bound to it has " + kBindPhase + "=" + kPhaseAllocating +
                " with devices left in " + kDevicesToAllocate + " for this request" +
                (first_reason.empty() ? "" : " (" + first_reason + ")") +
                "; was the pod scheduled by the HAMi scheduler?";
    return out;
  }
  std::stable_sort(found.begin(), found.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  out.pod = std::move(found.front().second);
  out.undecodable.reset();
  out.error.clear();
  return out;
}

}  // namespace hami::deviceplugin
