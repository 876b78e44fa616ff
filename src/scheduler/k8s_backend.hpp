#pragma once
// BindBackend over the Kubernetes API: the pod read, upstream's node lock
// (§3.8: node annotation hami.io/mutex.lock = "<RFC3339>,<ns>,<pod>", set by
// a merge patch carrying the node's resourceVersion so two schedulers cannot
// both take it; an expired lock, one held by this pod, or one whose owner pod
// is gone is taken over; one a live pod holds is waited for, briefly), and
// pods/binding with upstream's annotations.
//
//   K8sBindBackend backend(client, config.node_lock_timeout);
//   backend.set_node_source([&](const std::string& n) { return nodes.get("", n); });
//   Extender ext(cache, config, &backend, &metrics);

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "k8s/client.hpp"
#include "scheduler/extender.hpp"

namespace hami::scheduler {

class K8sBindBackend : public BindBackend {
 public:
  K8sBindBackend(k8s::Client& client, std::chrono::seconds lock_timeout)
      : client_(client), lock_timeout_(lock_timeout) {}

  void set_clock(std::function<std::chrono::system_clock::time_point()> now) {
    now_ = std::move(now);
  }
  // A node as the watch last saw it (the daemon's node Reflector). The lock
  // is then taken with one PATCH carrying that copy's resourceVersion; a
  // stale copy costs a 409 and a read, as without it.
  void set_node_source(std::function<std::optional<nlohmann::json>(const std::string&)> f) {
    node_source_ = std::move(f);
  }

  Result<k8s::Pod> get_pod(const std::string& ns, const std::string& name) override;
  Result<void, LockError> lock_node(const std::string& node, const std::string& ns,
                                    const std::string& name,
                                    std::chrono::milliseconds wait) override;
  void unlock_node(const std::string& node, const std::string& ns,
                   const std::string& name) override;
  Result<void> bind(const std::string& ns, const std::string& name, const std::string& uid,
                    const std::string& node,
                    const std::map<std::string, std::string>& annotations) override;

 private:
  k8s::Client& client_;
  std::chrono::seconds lock_timeout_;
  std::function<std::chrono::system_clock::time_point()> now_ = [] {
    return std::chrono::system_clock::now();
  };
  std::function<std::optional<nlohmann::json>(const std::string&)> node_source_;
};

}  // namespace hami::scheduler
