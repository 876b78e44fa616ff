#pragma once
// BindBackend over the Kubernetes API: the pod read, upstream's node lock
// (§3.8: node annotation hami.io/mutex.lock = "<RFC3339>,<ns>,<pod>", set by
// a merge patch carrying the node's resourceVersion so two schedulers cannot
// both take it; an expired lock, one held by this pod, or one whose owner pod
// is gone is taken over; one a live pod holds is waited for, briefly), the
// pod annotations and pods/binding.
//
//   K8sBindBackend backend(client, config.node_lock_timeout);
//   Extender ext(cache, config, &backend, &metrics);

#include <chrono>
#include <functional>
#include <map>
#include <string>

#include "k8s/client.hpp"
#include "scheduler/extender.hpp"

namespace hami::scheduler {

class K8sBindBackend : public BindBackend {
 public:
  // `lock_wait`: how long lock_node waits for a lock another live pod holds
  // before it reports contention (0: at once, as upstream).
  K8sBindBackend(k8s::Client& client, std::chrono::seconds lock_timeout,
                 std::chrono::milliseconds lock_wait = {})
      : client_(client), lock_timeout_(lock_timeout), lock_wait_(lock_wait) {}

  void set_clock(std::function<std::chrono::system_clock::time_point()> now) {
    now_ = std::move(now);
  }

  Result<k8s::Pod> get_pod(const std::string& ns, const std::string& name) override;
  Result<void> lock_node(const std::string& node, const std::string& ns,
                         const std::string& name) override;
  void unlock_node(const std::string& node, const std::string& ns,
                   const std::string& name) override;
  Result<void> patch_pod_annotations(const std::string& ns, const std::string& name,
                                     const std::map<std::string, std::string>& set) override;
  Result<void> bind(const std::string& ns, const std::string& name, const std::string& uid,
                    const std::string& node) override;

 private:
  k8s::Client& client_;
  std::chrono::seconds lock_timeout_;
  std::chrono::milliseconds lock_wait_;
  std::function<std::chrono::system_clock::time_point()> now_ = [] {
    return std::chrono::system_clock::now();
  };
};

}  // namespace hami::scheduler
