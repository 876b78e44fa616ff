#pragma once
// Typed views of the Pod and Node fields our daemons read, parsed from the API's
// JSON. Absent or null fields take their zero value (a pod still being created
// has no name, an unscheduled one no node); a field of the wrong type is an
// error naming the object and the field, so bad input from the API server, the
// scheduler or a webhook request is reported instead of misread.
//
//   auto pod = hami::k8s::Pod::from_json(json);
//   if (!pod) return fail(pod.error().message);
//   for (const auto& c : pod->containers) c.limits.count("nvidia.com/gpu");
//   int64_t gpus =
//   *hami::fit::parse_whole_quantity(pod->containers[0].limits.at("nvidia.com/gpu"));

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/result.hpp"
#include "k8s/time.hpp"

namespace hami::k8s {

using StringMap = std::map<std::string, std::string>;

struct ObjectMeta {
  std::string name;
  std::string ns;  // metadata.namespace; empty for cluster-scoped objects
  std::string uid;
  std::string resource_version;
  StringMap labels;
  StringMap annotations;
  std::optional<TimePoint> creation_timestamp;
  std::optional<TimePoint> deletion_timestamp;  // set once deletion has begun

  static hami::Result<ObjectMeta> from_json(const nlohmann::json& metadata);
  bool operator==(const ObjectMeta&) const = default;
};

struct EnvVar {
  std::string name;
  std::optional<std::string> value;  // nullopt when the value comes from valueFrom
  bool operator==(const EnvVar&) const = default;
};

struct Container {
  std::string name;
  StringMap limits;  // resource name → quantity text, see quantity.hpp
  StringMap requests;
  std::vector<EnvVar> env;
  std::optional<int64_t> run_as_user;  // securityContext.runAsUser
  bool operator==(const Container&) const = default;
};

struct Pod {
  ObjectMeta meta;
  std::string node_name;               // spec.nodeName; empty until bound
  std::string scheduler_name;          // spec.schedulerName
  std::optional<int64_t> run_as_user;  // spec.securityContext.runAsUser
  std::vector<Container> init_containers;
  std::vector<Container> containers;
  std::string phase;  // status.phase: Pending, Running, Succeeded, Failed, Unknown
  // Whether where the pod may go depends on where other pods are: pod
  // affinity or anti-affinity, topology spread constraints, a host port.
  bool placement_depends_on_other_pods = false;

  static hami::Result<Pod> from_json(const nlohmann::json& pod);
  bool operator==(const Pod&) const = default;
};

struct Node {
  ObjectMeta meta;
  StringMap capacity;
  StringMap allocatable;
  bool unschedulable = false;
  std::optional<bool> ready;  // the Ready condition; nullopt when absent or Unknown

  static hami::Result<Node> from_json(const nlohmann::json& node);
};

// metadata.annotations[key] of an object as JSON, without parsing the rest;
// nullptr when absent or not a string.
const std::string* string_annotation(const nlohmann::json& object, const char* key);

}  // namespace hami::k8s
