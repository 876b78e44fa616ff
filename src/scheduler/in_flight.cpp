#include "scheduler/in_flight.hpp"

#include <algorithm>

#include "k8s/objects.hpp"
#include "protocol/annotations.hpp"

namespace hami::scheduler {

std::vector<std::string> allocation_keys(const protocol::PodDevices& devices) {
  std::vector<std::string> keys;
  for (const protocol::ContainerDevices& c : devices) {
    if (!c.empty()) keys.push_back(std::to_string(c.size()));
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

namespace {

bool intersect(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  // Both sorted (allocation_keys).
  auto i = a.begin();
  auto j = b.begin();
  while (i != a.end() && j != b.end()) {
    if (*i == *j) return true;
    if (*i < *j) {
      ++i;
    } else {
      ++j;
    }
  }
  return false;
}

}  // namespace

const InFlightAllocations::Entry* InFlightAllocations::find_blocker(
    const InFlightPod& p, std::chrono::steady_clock::time_point now) const {
  auto node = by_node_.find(p.node);
  if (node == by_node_.end()) return nullptr;
  for (const std::string& uid : node->second) {
    if (uid == p.uid) continue;
    const Entry& e = by_uid_.at(uid);
    if (now - e.since > kStaleAfter) continue;
    if (!intersect(e.pod.keys, p.keys)) continue;
    // Ordered the same way by kubelet and by the plugin only when e's
    // binding is written and e was created strictly earlier.
    const bool ordered =
        !e.writing && e.pod.created_s && p.created_s && *e.pod.created_s < *p.created_s;
    if (!ordered) return &e;
  }
  return nullptr;
}

std::string InFlightAllocations::claim(InFlightPod p, std::chrono::milliseconds wait) {
  std::sort(p.keys.begin(), p.keys.end());
  const auto deadline = std::chrono::steady_clock::now() + wait;
  std::unique_lock lk(mu_);
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    const Entry* e = find_blocker(p, now);
    if (e == nullptr) break;
    if (now >= deadline) return e->pod.who;
    changed_.wait_until(lk, deadline);
  }
  erase_unlocked(p.uid);
  by_node_[p.node].push_back(p.uid);
  const std::string uid = p.uid;
  by_uid_.insert_or_assign(uid, Entry{std::move(p), true, std::chrono::steady_clock::now()});
  return "";
}

std::string InFlightAllocations::blocker(const InFlightPod& p) const {
  InFlightPod sorted = p;
  std::sort(sorted.keys.begin(), sorted.keys.end());
  std::lock_guard lk(mu_);
  const Entry* e = find_blocker(sorted, std::chrono::steady_clock::now());
  return e == nullptr ? std::string() : e->pod.who;
}

std::vector<uint8_t> InFlightAllocations::blocked_on(const InFlightPod& p,
                                                     std::span<const std::string> nodes) const {
  std::vector<uint8_t> out(nodes.size(), 0);
  InFlightPod probe = p;
  std::sort(probe.keys.begin(), probe.keys.end());
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lk(mu_);
  if (by_node_.empty()) return out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    probe.node = nodes[i];
    out[i] = find_blocker(probe, now) != nullptr;
  }
  return out;
}

void InFlightAllocations::written(const std::string& uid) {
  {
    std::lock_guard lk(mu_);
    auto it = by_uid_.find(uid);
    if (it == by_uid_.end()) return;
    it->second.writing = false;
  }
  changed_.notify_all();
}

void InFlightAllocations::release(const std::string& uid) {
  {
    std::lock_guard lk(mu_);
    erase_unlocked(uid);
  }
  changed_.notify_all();
}

void InFlightAllocations::erase_unlocked(const std::string& uid) {
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end()) return;
  auto node = by_node_.find(it->second.pod.node);
  if (node != by_node_.end()) {
    std::erase(node->second, uid);
    if (node->second.empty()) by_node_.erase(node);
  }
  by_uid_.erase(it);
}

void InFlightAllocations::observe(const nlohmann::json& pod) {
  if (!pod.is_object()) return;
  auto parsed = k8s::Pod::from_json(pod);
  if (!parsed || parsed->meta.uid.empty()) return;
  const k8s::ObjectMeta* m = &parsed->meta;
  const std::string& node = parsed->node_name;
  if (node.empty()) return;  // not bound yet: a claim made for it stands
  const std::string phase = parsed->phase.empty() ? "Pending" : parsed->phase;
  auto phase_it = m->annotations.find(protocol::kBindPhase);
  const bool allocating =
      phase_it != m->annotations.end() && phase_it->second == protocol::kPhaseAllocating;
  if (!allocating || phase != "Pending" || m->deletion_timestamp) {
    release(m->uid);
    return;
  }
  {
    std::lock_guard lk(mu_);
    if (auto it = by_uid_.find(m->uid); it != by_uid_.end()) {
      it->second.writing = false;
    } else {
      auto text = m->annotations.find(protocol::kDevicesAllocated);
      if (text == m->annotations.end()) return;
      // Only decisions the scheduler made: the plugin serves no other.
      if (!protocol::decision_refusal(*parsed, trust_).empty()) return;
      auto devices = protocol::decode_pod_devices(text->second);
      if (!devices) return;  // not ours to order: the plugin refuses it too
      InFlightPod p{.node = node,
                    .uid = m->uid,
                    .who = m->ns + "/" + m->name,
                    .keys = allocation_keys(*devices),
                    .created_s = std::nullopt};
      if (m->creation_timestamp) {
        p.created_s = std::chrono::duration_cast<std::chrono::seconds>(
                          m->creation_timestamp->time_since_epoch())
                          .count();
      }
      by_node_[node].push_back(m->uid);
      by_uid_.insert_or_assign(m->uid,
                               Entry{std::move(p), false, std::chrono::steady_clock::now()});
    }
  }
  changed_.notify_all();
}

void InFlightAllocations::forget(const nlohmann::json& pod) {
  if (!pod.is_object()) return;
  const nlohmann::json meta = pod.value("metadata", nlohmann::json::object());
  if (!meta.is_object()) return;
  const std::string uid = meta.value("uid", "");
  if (!uid.empty()) release(uid);
}

size_t InFlightAllocations::size() const {
  std::lock_guard lk(mu_);
  return by_uid_.size();
}

}  // namespace hami::scheduler
