#include "scheduler/k8s_backend.hpp"

#include <algorithm>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/log.hpp"
#include "deviceplugin/annotations.hpp"
#include "deviceplugin/node_lock.hpp"
#include "k8s/paths.hpp"

namespace hami::scheduler {

namespace dp = hami::deviceplugin;
using nlohmann::json;

namespace {

const std::string* annotation(const json& object, const char* key) {
  auto m = object.find("metadata");
  if (m == object.end() || !m->is_object()) return nullptr;
  auto a = m->find("annotations");
  if (a == m->end() || !a->is_object()) return nullptr;
  auto v = a->find(key);
  if (v == a->end() || !v->is_string()) return nullptr;
  return v->get_ptr<const std::string*>();
}

k8s::ApiError invalid(std::string message) {
  return k8s::ApiError{k8s::ErrorKind::kInvalid, 0, "", std::move(message)};
}

}  // namespace

Result<k8s::Pod> K8sBindBackend::get_pod(const std::string& ns, const std::string& name) {
  auto j = client_.get(k8s::pod_path(ns, name));
  if (!j) return Error{j.error().message};
  auto pod = k8s::Pod::from_json(*j);
  if (!pod) return pod.error();
  return std::move(*pod);
}

Result<void> K8sBindBackend::lock_node(const std::string& node, const std::string& ns,
                                       const std::string& name) {
  // A live pod's lock is normally released within moments, once kubelet has
  // called Allocate for it. Failing at once sends this pod back to
  // kube-scheduler, which (1.20) may park it for up to a minute; so a held
  // lock is waited for, up to lock_wait_.
  const auto give_up = std::chrono::steady_clock::now() + lock_wait_;
  auto pause = std::chrono::milliseconds(20);
  for (;;) {
    bool contended = false;
    const auto now = now_();
    auto make = [&](const json& current) -> k8s::Result<std::optional<json>> {
      const std::string* held = annotation(current, dp::kNodeLock);
      if (held != nullptr && !held->empty()) {
        auto lock = dp::parse_node_lock(*held);
        bool take_over = false;
        if (!lock) {
          // Unreadable: nobody can ever release it by name; treat as stale.
          log::warn("node %s: unreadable lock '%s' replaced", node.c_str(), held->c_str());
          take_over = true;
        } else if (lock->held_by(ns, name)) {
          return std::optional<json>{};  // ours already (a retried bind)
        } else if (now - lock->time > lock_timeout_) {
          take_over = true;  // expired
        } else if (lock->names_pod()) {
          auto owner = client_.get(k8s::pod_path(lock->ns, lock->name));
          if (!owner && owner.error().not_found()) take_over = true;  // owner gone (PR #1271)
          // An owner bound to another node is never allocated here, so never
          // releases this lock: its bind here was cut short (the extender
          // killed between lock and binding) and a retry placed it elsewhere.
          if (owner) {
            const auto spec = owner->find("spec");
            const std::string bound_to = spec != owner->end() && spec->is_object()
                                             ? spec->value("nodeName", std::string())
                                             : std::string();
            if (!bound_to.empty() && bound_to != node) take_over = true;
          }
        }
        if (!take_over) {
          contended = true;
          return invalid("node " + node + " has been locked within " +
                         std::to_string(lock_timeout_.count()) + "s by " +
                         (lock ? lock->ns + "/" + lock->name : std::string("?")) +
                         ": node lock contention");
        }
      }
      return std::optional<json>(json{
          {"metadata", {{"annotations", {{dp::kNodeLock, dp::format_node_lock(now, ns, name)}}}}}});
    };
    auto r = client_.read_modify_patch(k8s::node_path(node), make);
    if (r) return {};
    if (!contended || std::chrono::steady_clock::now() + pause > give_up) {
      return Error{r.error().message};
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(200));
  }
}

void K8sBindBackend::unlock_node(const std::string& node, const std::string& ns,
                                 const std::string& name) {
  auto make = [&](const json& current) -> k8s::Result<std::optional<json>> {
    const std::string* held = annotation(current, dp::kNodeLock);
    if (held == nullptr) return std::optional<json>{};
    auto lock = dp::parse_node_lock(*held);
    // Only our own lock: another pod's may have replaced an expired one.
    if (!lock || !lock->held_by(ns, name)) return std::optional<json>{};
    return std::optional<json>(json{{"metadata", {{"annotations", {{dp::kNodeLock, nullptr}}}}}});
  };
  if (auto r = client_.read_modify_patch(k8s::node_path(node), make); !r) {
    log::warn("releasing the lock on node %s for %s/%s: %s", node.c_str(), ns.c_str(), name.c_str(),
              r.error().message.c_str());
  }
}

Result<void> K8sBindBackend::patch_pod_annotations(const std::string& ns, const std::string& name,
                                                   const std::map<std::string, std::string>& set) {
  std::map<std::string, std::optional<std::string>> changes(set.begin(), set.end());
  auto r = client_.patch_annotations(k8s::pod_path(ns, name), changes);
  if (!r) return Error{r.error().message};
  return {};
}

Result<void> K8sBindBackend::bind(const std::string& ns, const std::string& name,
                                  const std::string& uid, const std::string& node) {
  auto r = client_.bind_pod(ns, name, uid, node);
  if (!r) return Error{r.error().message};
  return {};
}

}  // namespace hami::scheduler
