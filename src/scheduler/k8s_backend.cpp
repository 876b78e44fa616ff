#include "scheduler/k8s_backend.hpp"

#include <algorithm>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/log.hpp"
#include "k8s/paths.hpp"
#include "protocol/annotations.hpp"
#include "protocol/node_lock.hpp"

namespace hami::scheduler {

using nlohmann::json;

using k8s::string_annotation;

Result<k8s::Pod> K8sBindBackend::get_pod(const std::string& ns, const std::string& name) {
  auto j = client_.get(k8s::pod_path(ns, name));
  if (!j) return Error{j.error().message};
  auto pod = k8s::Pod::from_json(*j);
  if (!pod) return pod.error();
  return std::move(*pod);
}

namespace {

// What to do about a node's lock annotation.
struct LockDecision {
  enum Kind { kTake, kOurs, kContended } kind = kTake;
  std::string holder;  // "<ns>/<pod>" when contended
};

}  // namespace

Result<void, LockError> K8sBindBackend::lock_node(const std::string& node, const std::string& ns,
                                                  const std::string& name,
                                                  std::chrono::milliseconds wait) {
  // A live pod's lock is normally released within moments, once kubelet has
  // called Allocate for it, so one is waited for up to `wait`.
  const auto give_up = std::chrono::steady_clock::now() + wait;
  auto pause = std::chrono::milliseconds(20);
  std::optional<json> current;
  bool from_watch = false;
  if (node_source_) {
    current = node_source_(node);
    from_watch = current.has_value();
  }
  int conflicts = 0;
  // Our patch just met a newer version of the node: whoever changed it is
  // alive and at work (a lock taken this moment is being bound).
  bool just_changed = false;
  for (;;) {
    if (!current) {
      auto g = client_.get(k8s::node_path(node));
      if (!g) return LockError{false, "read node " + node + ": " + g.error().message};
      current = std::move(*g);
      from_watch = false;
    }
    const auto now = now_();
    LockDecision d;
    if (const std::string* held = string_annotation(*current, protocol::kNodeLock);
        held != nullptr && !held->empty()) {
      auto lock = protocol::parse_node_lock(*held);
      if (!lock) {
        // Unreadable: nobody can ever release it by name; treat as stale.
        log::warn("node %s: unreadable lock '%s' replaced", node.c_str(), held->c_str());
      } else if (lock->held_by(ns, name)) {
        d.kind = LockDecision::kOurs;  // a retried bind
      } else if (now - lock->time > lock_timeout_) {
        // expired: taken over
      } else {
        d.kind = LockDecision::kContended;
        d.holder = lock->names_pod() ? lock->ns + "/" + lock->name : "?";
        // A lock older than a moment may be stale (its owner gone or bound
        // elsewhere): only a fresh read and the owner's state tell.
        const bool young = now - lock->time <= std::chrono::seconds(1);
        if (from_watch && !young) {
          current.reset();
          continue;
        }
        if (!from_watch && lock->names_pod() && !(just_changed && young)) {
          auto owner = client_.get(k8s::pod_path(lock->ns, lock->name));
          // Owner gone (PR #1271), or bound to another node: it is never
          // allocated here, so never releases this lock (its bind here was
          // cut short, e.g. the extender killed between lock and binding,
          // and a retry placed it elsewhere).
          if (!owner && owner.error().not_found()) d.kind = LockDecision::kTake;
          if (owner) {
            const auto spec = owner->find("spec");
            const std::string bound_to = spec != owner->end() && spec->is_object()
                                             ? spec->value("nodeName", std::string())
                                             : std::string();
            if (!bound_to.empty() && bound_to != node) d.kind = LockDecision::kTake;
            // Ended (kubelet refused its admission, e.g. an Allocate the
            // device plugin refused without releasing the lock): it is
            // never allocated again.
            const auto status = owner->find("status");
            const std::string phase = status != owner->end() && status->is_object()
                                          ? status->value("phase", std::string())
                                          : std::string();
            if (phase == "Succeeded" || phase == "Failed") d.kind = LockDecision::kTake;
          }
        }
      }
    }
    if (d.kind == LockDecision::kOurs) return {};
    if (d.kind == LockDecision::kContended) {
      const std::string msg = "node " + node + " has been locked within " +
                              std::to_string(lock_timeout_.count()) + "s by " + d.holder +
                              ": node lock contention";
      if (std::chrono::steady_clock::now() + pause > give_up) return LockError{true, msg};
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(200));
      current.reset();
      continue;
    }
    const std::string rv = current->value("metadata", json::object()).value("resourceVersion", "");
    json patch = {
        {"metadata",
         {{"resourceVersion", rv},
          {"annotations", {{protocol::kNodeLock, protocol::format_node_lock(now, ns, name)}}}}}};
    auto r = client_.merge_patch(k8s::node_path(node), patch);
    if (r) return {};
    if (!r.error().conflict()) {
      return LockError{false, "lock node " + node + ": " + r.error().message};
    }
    if (++conflicts >= 5) {
      // Others keep writing the node (locks taken and released as fast as
      // we read it): that is contention too, and bind can go elsewhere.
      return LockError{true, "node " + node + " changed under each of 5 attempts to lock it (" +
                                 r.error().message + "): node lock contention"};
    }
    current.reset();  // changed since: read it again
    just_changed = true;
  }
}

void K8sBindBackend::unlock_node(const std::string& node, const std::string& ns,
                                 const std::string& name) {
  auto make = [&](const json& current) -> k8s::Result<std::optional<json>> {
    const std::string* held = string_annotation(current, protocol::kNodeLock);
    if (held == nullptr) return std::optional<json>{};
    auto lock = protocol::parse_node_lock(*held);
    // Only our own lock: another pod's may have replaced an expired one.
    if (!lock || !lock->held_by(ns, name)) return std::optional<json>{};
    return std::optional<json>(
        json{{"metadata", {{"annotations", {{protocol::kNodeLock, nullptr}}}}}});
  };
  if (auto r = client_.read_modify_patch(k8s::node_path(node), make); !r) {
    log::warn("releasing the lock on node %s for %s/%s: %s", node.c_str(), ns.c_str(), name.c_str(),
              r.error().message.c_str());
  }
}

Result<void> K8sBindBackend::bind(const std::string& ns, const std::string& name,
                                  const std::string& uid, const std::string& node,
                                  const std::map<std::string, std::string>& annotations) {
  auto r = client_.bind_pod(ns, name, uid, node, annotations);
  if (!r) return Error{r.error().message};
  return {};
}

}  // namespace hami::scheduler
