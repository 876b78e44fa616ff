#pragma once
// REST paths of the API server: core ("/api/v1/...") and grouped
// ("/apis/<group>/<version>/..."), namespaced or cluster-scoped, with an
// optional object name and subresource. Each segment is percent-encoded.
//
//   core_path("pods", "default", "x")                → /api/v1/namespaces/default/pods/x
//   core_path("pods", "default", "x", "binding")     → .../pods/x/binding
//   core_path("nodes", "", "n1")                     → /api/v1/nodes/n1
//   group_path("coordination.k8s.io", "v1", "leases", "kube-system", "hami")

#include <string>
#include <string_view>

namespace hami::k8s {

std::string core_path(std::string_view resource, std::string_view ns = {},
                      std::string_view name = {}, std::string_view subresource = {});
std::string group_path(std::string_view group, std::string_view version, std::string_view resource,
                       std::string_view ns = {}, std::string_view name = {},
                       std::string_view subresource = {});

inline std::string pod_path(std::string_view ns, std::string_view name = {}) {
  return core_path("pods", ns, name);
}
inline std::string node_path(std::string_view name = {}) {
  return core_path("nodes", {}, name);
}
inline std::string lease_path(std::string_view ns, std::string_view name = {}) {
  return group_path("coordination.k8s.io", "v1", "leases", ns, name);
}

// Percent-encodes everything but RFC 3986 unreserved characters.
std::string url_encode(std::string_view text);

}  // namespace hami::k8s
