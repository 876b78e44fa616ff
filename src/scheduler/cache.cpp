#include "scheduler/cache.hpp"

#include <mutex>

#include "fit/score.hpp"

namespace hami::scheduler {

const fit::NodeDevices* ClusterCache::View::node(std::string_view name) const {
  return c_.node_unlocked(name);
}

float ClusterCache::View::node_score(std::string_view name) const {
  auto it = c_.nodes_.find(name);
  if (it == c_.nodes_.end() || !it->second.registered) return -1;
  return it->second.score;
}

const ClusterCache::NodeState* ClusterCache::View::node_state(std::string_view name) const {
  auto it = c_.nodes_.find(name);
  if (it == c_.nodes_.end() || !it->second.registered) return nullptr;
  return &it->second;
}

const PodCharge* ClusterCache::View::pod(const std::string& uid) const {
  auto it = c_.pods_.find(uid);
  return it == c_.pods_.end() ? nullptr : &it->second;
}

const fit::NodeDevices* ClusterCache::node_unlocked(std::string_view name) const {
  auto it = nodes_.find(name);
  if (it == nodes_.end() || !it->second.registered) return nullptr;
  return &it->second.devices;
}

ClusterCache::NodeState& ClusterCache::node_entry(const std::string& name) {
  auto [it, inserted] = nodes_.try_emplace(name);
  if (inserted) it->second.devices.name = name;
  return it->second;
}

NamespaceUsage ClusterCache::ns_usage(const std::string& ns) const {
  auto it = ns_usage_.find(ns);
  return it == ns_usage_.end() ? NamespaceUsage{} : it->second;
}

void ClusterCache::charge(const std::string& uid, const PodCharge& p) {
  ++version_;
  if (!p.charges.empty()) {
    NamespaceUsage& u = ns_usage_[p.ns];
    for (const fit::DeviceCharge& c : p.charges) {
      u.mem_mib += c.mem_mib;
      u.cores += c.cores;
    }
  }
  NodeState& n = node_entry(p.node);
  n.pods.insert(uid);
  if (n.registered) {
    stats_.unknown_devices += fit::apply_charges(n.devices, p.charges);
    fit::apply_mig(n.devices, p.mig);
    n.score = fit::node_score(n.devices);
  }
}

void ClusterCache::uncharge(const std::string& uid, const PodCharge& p) {
  ++version_;
  if (auto u = ns_usage_.find(p.ns); u != ns_usage_.end() && !p.charges.empty()) {
    for (const fit::DeviceCharge& c : p.charges) {
      u->second.mem_mib -= c.mem_mib;
      u->second.cores -= c.cores;
    }
    if (u->second.mem_mib <= 0 && u->second.cores <= 0) ns_usage_.erase(u);
  }
  auto it = nodes_.find(p.node);
  if (it == nodes_.end()) return;
  NodeState& n = it->second;
  n.pods.erase(uid);
  if (n.registered) {
    fit::remove_charges(n.devices, p.charges);
    fit::remove_mig(n.devices, p.mig);
    n.score = fit::node_score(n.devices);
  }
  // A node entry kept only to remember pods on an unregistered node goes with
  // its last pod.
  if (!n.registered && n.pods.empty()) nodes_.erase(it);
}

void ClusterCache::set_node(const std::string& name, std::vector<fit::GpuDevice> inventory,
                            fit::LinkScores links) {
  std::unique_lock lock(mu_);
  ++version_;
  ++stats_.node_events;
  if (inventory.empty()) {
    unregister_locked(name);
    return;
  }
  NodeState& n = node_entry(name);
  for (fit::GpuDevice& d : inventory) {
    d.used_tenants = 0;
    d.used_mem_mib = 0;
    d.used_cores = 0;
    d.mig_taken.clear();
    d.model_id = model_id(d.type, d.mode);
  }
  n.devices.devices = std::move(inventory);
  n.devices.links = std::move(links);
  if (!n.registered) ++registered_;
  n.registered = true;
  // The inventory may have changed (a GPU gone, memory rescaled): usage is
  // recomputed from this node's pods only, never from the whole cluster.
  for (const std::string& uid : n.pods) {
    auto p = pods_.find(uid);
    if (p == pods_.end()) continue;
    stats_.unknown_devices += fit::apply_charges(n.devices, p->second.charges);
    fit::apply_mig(n.devices, p->second.mig);
  }
  n.score = fit::node_score(n.devices);
}

uint32_t ClusterCache::model_id(const std::string& type, const std::string& mode) {
  // Real clusters have a handful of models; a flood of made-up names stops
  // getting ids (and is compared by name) instead of growing the table.
  constexpr size_t kMaxModels = 4096;
  std::string key = type;
  key.push_back('\0');
  key.append(mode);
  auto it = models_.find(key);
  if (it != models_.end()) return it->second;
  if (models_.size() >= kMaxModels) return 0;
  const auto id = static_cast<uint32_t>(models_.size() + 1);
  models_.emplace(std::move(key), id);
  return id;
}

void ClusterCache::remove_node(const std::string& name) {
  std::unique_lock lock(mu_);
  ++version_;
  ++stats_.node_events;
  unregister_locked(name);
}

void ClusterCache::unregister_locked(const std::string& name) {
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return;
  if (it->second.registered) --registered_;
  it->second.registered = false;
  it->second.devices.devices.clear();
  // Pods still charged there keep their entries: if the node comes back they
  // count again; their own delete events remove them.
  if (it->second.pods.empty()) nodes_.erase(it);
}

void ClusterCache::set_pod_unlocked(const std::string& uid, PodCharge charge_) {
  auto it = pods_.find(uid);
  if (it != pods_.end()) {
    uncharge(uid, it->second);
    it->second = std::move(charge_);
  } else {
    it = pods_.emplace(uid, std::move(charge_)).first;
  }
  charge(uid, it->second);
}

const PodCharge* ClusterCache::pod_unlocked(const std::string& uid) const {
  auto it = pods_.find(uid);
  return it == pods_.end() ? nullptr : &it->second;
}

bool ClusterCache::remove_pod_unlocked(const std::string& uid) {
  auto it = pods_.find(uid);
  if (it == pods_.end()) return false;
  uncharge(uid, it->second);
  pods_.erase(it);
  return true;
}

void ClusterCache::set_pod(const std::string& uid, PodCharge charge_) {
  std::unique_lock lock(mu_);
  ++stats_.pod_events;
  set_pod_unlocked(uid, std::move(charge_));
}

bool ClusterCache::remove_pod(const std::string& uid) {
  std::unique_lock lock(mu_);
  ++stats_.pod_events;
  return remove_pod_unlocked(uid);
}

bool ClusterCache::remove_reservation(const std::string& uid, const std::string& node) {
  std::unique_lock lock(mu_);
  auto it = pods_.find(uid);
  if (it == pods_.end() || !it->second.reserved || it->second.node != node) return false;
  return remove_pod_unlocked(uid);
}

bool ClusterCache::remove_confirmed(const std::string& uid) {
  std::unique_lock lock(mu_);
  auto it = pods_.find(uid);
  if (it == pods_.end() || it->second.reserved) return false;
  return remove_pod_unlocked(uid);
}

ClusterCache::Stats ClusterCache::stats() const {
  std::shared_lock lock(mu_);
  return stats_;
}

}  // namespace hami::scheduler
