#include "scheduler/stale_locks.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "common/log.hpp"
#include "protocol/annotations.hpp"
#include "protocol/node_lock.hpp"

namespace hami::scheduler {

using nlohmann::json;

namespace {

const std::string* string_at(const json& obj, const char* section, const char* key) {
  auto s = obj.find(section);
  if (s == obj.end() || !s->is_object()) return nullptr;
  auto v = s->find(key);
  return v != s->end() && v->is_string() ? v->get_ptr<const std::string*>() : nullptr;
}

const std::string* annotation(const json& obj, const char* key) {
  auto m = obj.find("metadata");
  if (m == obj.end() || !m->is_object()) return nullptr;
  return string_at(*m, "annotations", key);
}

}  // namespace

void StaleLocks::check(const std::string& holder) {
  auto l = locked_.find(holder);
  auto b = bound_to_.find(holder);
  if (l == locked_.end() || b == bound_to_.end()) return;
  std::vector<std::string>& nodes = l->second;
  const size_t slash = holder.find('/');
  for (auto it = nodes.begin(); it != nodes.end();) {
    if (*it == b->second) {
      ++it;
      continue;
    }
    pending_.push_back({*it, holder.substr(0, slash), holder.substr(slash + 1)});
    // Reported once; if the release fails, the node's next event shows the
    // lock again and it is reported again.
    holder_of_.erase(*it);
    it = nodes.erase(it);
  }
  if (nodes.empty()) locked_.erase(l);
}

void StaleLocks::forget_lock(const std::string& node) {
  auto it = holder_of_.find(node);
  if (it == holder_of_.end()) return;
  if (auto l = locked_.find(it->second); l != locked_.end()) {
    std::erase(l->second, node);
    if (l->second.empty()) locked_.erase(l);
  }
  holder_of_.erase(it);
}

void StaleLocks::node_seen(const json& node) {
  const std::string* name = string_at(node, "metadata", "name");
  if (name == nullptr) return;
  std::string holder;
  if (const std::string* v = annotation(node, protocol::kNodeLock); v != nullptr && !v->empty()) {
    if (auto lock = protocol::parse_node_lock(*v); lock && lock->names_pod())
      holder = lock->ns + "/" + lock->name;
  }
  std::vector<Pending> todo;
  {
    std::lock_guard lk(mu_);
    if (auto it = holder_of_.find(*name); it != holder_of_.end() && it->second != holder)
      forget_lock(*name);
    if (!holder.empty()) {
      holder_of_[*name] = holder;
      std::vector<std::string>& nodes = locked_[holder];
      if (std::find(nodes.begin(), nodes.end(), *name) == nodes.end()) nodes.push_back(*name);
      check(holder);
    }
    todo.swap(pending_);
  }
  for (const Pending& p : todo) {
    log::info("node %s is locked by pod %s/%s, which is bound to another node: releasing it",
              p.node.c_str(), p.ns.c_str(), p.pod.c_str());
    release_(p.node, p.ns, p.pod);
  }
}

void StaleLocks::node_gone(const json& node) {
  const std::string* name = string_at(node, "metadata", "name");
  if (name == nullptr) return;
  std::lock_guard lk(mu_);
  forget_lock(*name);
}

void StaleLocks::pod_seen(const json& pod) {
  const std::string* ns = string_at(pod, "metadata", "namespace");
  const std::string* name = string_at(pod, "metadata", "name");
  if (ns == nullptr || name == nullptr || annotation(pod, protocol::kAssignedNode) == nullptr)
    return;
  const std::string* node = string_at(pod, "spec", "nodeName");
  const std::string key = *ns + "/" + *name;
  std::vector<Pending> todo;
  {
    std::lock_guard lk(mu_);
    if (node == nullptr || node->empty()) {
      bound_to_.erase(key);
      return;
    }
    bound_to_[key] = *node;
    check(key);
    todo.swap(pending_);
  }
  for (const Pending& p : todo) {
    log::info("node %s is locked by pod %s/%s, which is bound to another node: releasing it",
              p.node.c_str(), p.ns.c_str(), p.pod.c_str());
    release_(p.node, p.ns, p.pod);
  }
}

void StaleLocks::pod_gone(const json& pod) {
  const std::string* ns = string_at(pod, "metadata", "namespace");
  const std::string* name = string_at(pod, "metadata", "name");
  if (ns == nullptr || name == nullptr) return;
  std::lock_guard lk(mu_);
  bound_to_.erase(*ns + "/" + *name);
}

std::string StaleLocks::holder(const std::string& node) const {
  std::lock_guard lk(mu_);
  auto it = holder_of_.find(node);
  return it == holder_of_.end() ? std::string() : it->second;
}

size_t StaleLocks::locks() const {
  std::lock_guard lk(mu_);
  return holder_of_.size();
}

}  // namespace hami::scheduler
