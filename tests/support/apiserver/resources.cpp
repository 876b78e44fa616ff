#include "support/apiserver/resources.hpp"

namespace hami::test {
namespace {

const std::vector<ResourceType>& all() {
  static const std::vector<ResourceType> types = {
      {"",
       "v1",
       "pods",
       "Pod",
       true,
       true,
       {"spec.nodeName", "spec.schedulerName", "spec.restartPolicy", "spec.serviceAccountName",
        "status.phase", "status.podIP", "status.nominatedNodeName"}},
      {"", "v1", "nodes", "Node", false, true, {"spec.unschedulable"}},
      {"",
       "v1",
       "events",
       "Event",
       true,
       false,
       {"involvedObject.kind", "involvedObject.name", "involvedObject.namespace",
        "involvedObject.uid", "reason", "type"}},
      {"", "v1", "configmaps", "ConfigMap", true, false, {}},
      {"", "v1", "resourcequotas", "ResourceQuota", true, false, {}},
      {"coordination.k8s.io", "v1", "leases", "Lease", true, false, {}},
  };
  return types;
}

}  // namespace

const ResourceType* find_resource(std::string_view group, std::string_view version,
                                  std::string_view plural) {
  for (const auto& t : all()) {
    if (t.group == group && t.version == version && t.plural == plural) return &t;
  }
  return nullptr;
}

const ResourceType* find_resource(std::string_view plural) {
  for (const auto& t : all()) {
    if (t.plural == plural) return &t;
  }
  return nullptr;
}

}  // namespace hami::test
