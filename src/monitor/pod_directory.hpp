#pragma once
// Pod namespace and name for a pod UID. The state-file directories are named by
// pod UID only; the metrics carry namespace and pod, so the agent asks a
// PodDirectory. In a cluster that is the API server, asked only for the pods on
// this node (pod_directory_k8s.hpp); standalone there is nothing to ask and the
// metrics carry the UID.
//
//   PodDirectory& names = ...;
//   names.refresh_if_unknown(uids_seen_this_pass);
//   if (auto p = names.find(uid)) label(p->pod_namespace, p->name);

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hami::monitor {

struct PodName {
  std::string pod_namespace;
  std::string name;
};

class PodDirectory {
 public:
  virtual ~PodDirectory() = default;
  // Called once per pass with every pod UID that has state files, before find().
  virtual void refresh_if_unknown(const std::vector<std::string>& pod_uids) = 0;
  virtual std::optional<PodName> find(std::string_view pod_uid) const = 0;
};

}  // namespace hami::monitor
