#include "scheduler/feed.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "common/log.hpp"
#include "fit/options.hpp"
#include "protocol/annotations.hpp"
#include "protocol/device_codec.hpp"
#include "protocol/mig_allocations.hpp"
#include "protocol/node_register.hpp"
#include "scheduler/node_topology.hpp"
#include "scheduler/pod_request.hpp"

namespace hami::scheduler {

Result<std::vector<fit::GpuDevice>> node_inventory(const k8s::Node& node) {
  std::vector<fit::GpuDevice> out;
  auto it = node.meta.annotations.find(protocol::kNodeRegister);
  if (it == node.meta.annotations.end() || it->second.empty()) return out;
  auto devices = protocol::decode_node_devices(it->second);
  if (!devices) {
    return Error{"node " + node.meta.name + ": " + protocol::kNodeRegister + ": " +
                 devices.error().message};
  }
  std::vector<std::string> cordoned;
  if (auto c = node.meta.annotations.find(kAnnoDeviceCordon); c != node.meta.annotations.end()) {
    cordoned = fit::parse_list(c->second);
  }
  out.reserve(devices->size());
  for (const protocol::NodeDevice& d : *devices) {
    fit::GpuDevice g;
    g.uuid = d.id;
    g.index = d.index;
    g.type = d.type;
    if (!d.mode.empty()) g.mode = d.mode;
    g.numa = std::max(0, d.numa);
    g.healthy = d.health;
    g.cordoned = std::find(cordoned.begin(), cordoned.end(), d.id) != cordoned.end();
    g.split_count = d.count;
    g.total_mem_mib = d.devmem;
    g.total_cores = d.devcore;
    // Only a mig GPU is cut per container: profiles on another would let
    // its pods skip the GPU's core checks (fit.cpp).
    if (g.mode == fit::kModeMig) {
      g.mig_profiles.reserve(d.mig_profiles.size());
      for (const protocol::MigProfileInfo& p : d.mig_profiles)
        g.mig_profiles.push_back({p.name, p.memory, p.slice_count, p.placements});
    }
    out.push_back(std::move(g));
  }
  return out;
}

Result<std::optional<PodCharge>> pod_charge(const k8s::Pod& pod,
                                            const protocol::DecisionTrust& trust,
                                            std::string* refused) {
  if (pod.phase == "Succeeded" || pod.phase == "Failed") return std::optional<PodCharge>{};
  const auto& a = pod.meta.annotations;
  auto node = a.find(protocol::kAssignedNode);
  auto alloc = a.find(protocol::kDevicesAllocated);
  if (node == a.end() || alloc == a.end() || node->second.empty()) {
    return std::optional<PodCharge>{};
  }
  if (std::string why = protocol::decision_refusal(pod, trust); !why.empty()) {
    if (refused != nullptr) *refused = std::move(why);
    return std::optional<PodCharge>{};
  }
  auto devices = protocol::decode_pod_devices(alloc->second);
  if (!devices) {
    return Error{"pod " + pod.meta.ns + "/" + pod.meta.name + ": " + protocol::kDevicesAllocated +
                 ": " + devices.error().message};
  }
  PodCharge c;
  // Read only under a decision we trust (checked above): a forged entry
  // must neither hold a placement nor, by its absence, free one.
  if (auto mig = a.find(protocol::kMigAllocations); mig != a.end()) {
    auto allocs = protocol::decode_mig_allocations(mig->second);
    if (!allocs) {
      return Error{"pod " + pod.meta.ns + "/" + pod.meta.name + ": " + protocol::kMigAllocations +
                   ": " + allocs.error().message};
    }
    c.mig = std::move(*allocs);
  }
  std::vector<fit::ContainerKind> kinds(pod.init_containers.size(), fit::ContainerKind::kInit);
  c.node = node->second;
  c.charges = fit::pod_charges(*devices, kinds);
  std::vector<bool> uses_gpu;
  for (const auto& container : *devices)
    uses_gpu.push_back(!container.empty());
  const int64_t user = pod_user(pod, uses_gpu);
  for (fit::DeviceCharge& ch : c.charges)
    ch.user = user;
  c.ns = pod.meta.ns;
  c.name = pod.meta.name;
  c.bound = true;
  return std::optional<PodCharge>(std::move(c));
}

void CacheFeed::node_changed(const nlohmann::json& json) {
  auto node = k8s::Node::from_json(json);
  if (!node) {
    ++bad_;
    log::warn("ignoring a node: %s", node.error().message.c_str());
    return;
  }
  auto inv = node_inventory(*node);
  if (!inv) {
    ++bad_;
    log::warn("%s; the node counts as having no GPUs", inv.error().message.c_str());
    cache_.set_node(node->meta.name, {});
    return;
  }
  auto links = node_links(node->meta.annotations, *inv);
  if (!links) log::warn("node %s: %s", node->meta.name.c_str(), links.error().message.c_str());
  cache_.set_node(node->meta.name, std::move(*inv), links ? std::move(*links) : fit::LinkScores{});
}

namespace {

const nlohmann::json* node_annotation(const nlohmann::json& node, const char* key) {
  auto m = node.find("metadata");
  if (m == node.end() || !m->is_object()) return nullptr;
  auto a = m->find("annotations");
  if (a == m->end() || !a->is_object()) return nullptr;
  auto v = a->find(key);
  return v == a->end() ? nullptr : &*v;
}

bool same_annotation(const nlohmann::json& a, const nlohmann::json& b, const char* key) {
  const nlohmann::json* x = node_annotation(a, key);
  const nlohmann::json* y = node_annotation(b, key);
  if (x == nullptr || y == nullptr) return x == y;
  return *x == *y;
}

}  // namespace

void CacheFeed::node_updated(const nlohmann::json& old_node, const nlohmann::json& node) {
  if (same_annotation(old_node, node, protocol::kNodeRegister) &&
      same_annotation(old_node, node, kAnnoDeviceCordon) &&
      same_annotation(old_node, node, protocol::kNodeScore) &&
      same_annotation(old_node, node, protocol::kNodeP2p)) {
    return;
  }
  node_changed(node);
}

void CacheFeed::node_deleted(const nlohmann::json& json) {
  auto node = k8s::Node::from_json(json);
  if (!node) return;
  cache_.remove_node(node->meta.name);
}

void CacheFeed::pod_changed(const nlohmann::json& json) {
  auto pod = k8s::Pod::from_json(json);
  if (!pod) {
    ++bad_;
    log::warn("ignoring a pod: %s", pod.error().message.c_str());
    return;
  }
  if (pod->phase == "Succeeded" || pod->phase == "Failed") {
    cache_.remove_pod(pod->meta.uid);
    return;
  }
  std::string refused;
  auto charge = pod_charge(*pod, trust_, &refused);
  if (!charge) {
    ++bad_;
    drop_unless_bound(*pod, charge.error().message);
    return;
  }
  if (!refused.empty()) {
    ++refused_;
    drop_unless_bound(*pod, refused);
    return;
  }
  if (!*charge) {
    drop_unless_bound(*pod, "");
    return;
  }
  cache_.set_pod(pod->meta.uid, std::move(**charge));
}

void CacheFeed::drop_unless_bound(const k8s::Pod& pod, const std::string& why) {
  const bool counted = cache_.read([&](const ClusterCache::View& v) {
    const PodCharge* c = v.pod(pod.meta.uid);
    return c != nullptr && c->bound && !c->reserved;
  });
  if (counted && !pod.node_name.empty()) {
    log::warn("pod %s/%s: %s; it stays counted with the GPUs the scheduler gave it until it ends",
              pod.meta.ns.c_str(), pod.meta.name.c_str(),
              why.empty() ? "its GPU decision was removed" : why.c_str());
    return;
  }
  if (!why.empty()) log::warn("%s; the pod counts as holding nothing", why.c_str());
  cache_.remove_confirmed(pod.meta.uid);
}

void CacheFeed::pod_deleted(const nlohmann::json& json) {
  auto pod = k8s::Pod::from_json(json);
  if (!pod) return;
  cache_.remove_pod(pod->meta.uid);
}

}  // namespace hami::scheduler
