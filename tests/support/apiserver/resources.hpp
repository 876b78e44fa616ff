#pragma once
// The resource types the test API server serves, with what the real server
// knows about each: group/version, kind, scope, whether status is a separate
// subresource, and which fields a field selector may name.
//
//   const auto* pods = hami::test::find_resource("", "v1", "pods");
//   pods->api_version();   // "v1"; leases: "coordination.k8s.io/v1"

#include <string>
#include <string_view>
#include <vector>

namespace hami::test {

struct ResourceType {
  std::string group;  // "" for the core group
  std::string version;
  std::string plural;
  std::string kind;
  bool namespaced = true;
  bool status_subresource = false;        // PUT/PATCH of the object leave status alone
  std::vector<std::string> field_labels;  // besides metadata.name and metadata.namespace

  std::string api_version() const { return group.empty() ? version : group + "/" + version; }
};

// nullptr when not served.
const ResourceType* find_resource(std::string_view group, std::string_view version,
                                  std::string_view plural);
// By plural alone ("pods", "nodes", "leases", "events", "configmaps").
const ResourceType* find_resource(std::string_view plural);

}  // namespace hami::test
