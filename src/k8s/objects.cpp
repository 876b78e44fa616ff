#include "k8s/objects.hpp"

#include <nlohmann/json.hpp>

namespace hami::k8s {
namespace {

using nlohmann::json;

// Reads typed fields below one JSON value, naming the full path in errors:
// "pod default/x: spec.containers[1].resources.limits: expected object, got array".
class Reader {
 public:
  explicit Reader(std::string subject) : subject_(std::move(subject)) {}

  hami::Error type_error(const std::string& path, const char* want, const json& got) const {
    return hami::Error{subject_ + ": " + path + ": expected " + want + ", got " + got.type_name()};
  }
  hami::Error error(const std::string& path, const std::string& what) const {
    return hami::Error{subject_ + ": " + path + ": " + what};
  }

  // The member `key` of object `j`, or nullptr when absent or null.
  static const json* member(const json& j, const char* key) {
    if (!j.is_object()) return nullptr;
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return nullptr;
    return &*it;
  }

  hami::Result<void> object(const json* j, const std::string& path) const {
    if (j && !j->is_object()) return type_error(path, "object", *j);
    return {};
  }
  hami::Result<void> array(const json* j, const std::string& path) const {
    if (j && !j->is_array()) return type_error(path, "array", *j);
    return {};
  }
  hami::Result<void> string(const json& parent, const char* key, const std::string& path,
                            std::string& out) const {
    const json* j = member(parent, key);
    if (!j) return {};
    if (!j->is_string()) return type_error(path, "string", *j);
    out = j->get<std::string>();
    return {};
  }
  hami::Result<void> boolean(const json& parent, const char* key, const std::string& path,
                             bool& out) const {
    const json* j = member(parent, key);
    if (!j) return {};
    if (!j->is_boolean()) return type_error(path, "boolean", *j);
    out = j->get<bool>();
    return {};
  }
  hami::Result<void> integer(const json& parent, const char* key, const std::string& path,
                             std::optional<int64_t>& out) const {
    const json* j = member(parent, key);
    if (!j) return {};
    if (!j->is_number_integer()) return type_error(path, "integer", *j);
    out = j->get<int64_t>();
    return {};
  }
  // securityContext.runAsUser of `parent` (a pod spec or a container).
  hami::Result<void> run_as_user(const json& parent, const std::string& path,
                                 std::optional<int64_t>& out) const {
    const json* sc = member(parent, "securityContext");
    if (auto r = object(sc, path + ".securityContext"); !r) return r;
    if (!sc) return {};
    return integer(*sc, "runAsUser", path + ".securityContext.runAsUser", out);
  }
  hami::Result<void> string_map(const json& parent, const char* key, const std::string& path,
                                StringMap& out) const {
    const json* j = member(parent, key);
    if (auto r = object(j, path); !r) return r;
    if (!j) return {};
    for (const auto& [k, v] : j->items()) {
      if (!v.is_string()) return type_error(path + "[\"" + k + "\"]", "string", v);
      out.emplace(k, v.get<std::string>());
    }
    return {};
  }
  hami::Result<void> time(const json& parent, const char* key, const std::string& path,
                          std::optional<TimePoint>& out) const {
    std::string text;
    if (auto r = string(parent, key, path, text); !r) return r;
    if (text.empty()) return {};
    auto t = parse_time(text);
    if (!t) return error(path, t.error().message);
    out = *t;
    return {};
  }

 private:
  std::string subject_;
};

#define HAMI_TRY(expr)           \
  do {                           \
    if (auto r_ = (expr); !r_) { \
      return r_.error();         \
    }                            \
  } while (0)

hami::Result<void> read_meta(const Reader& rd, const json& metadata, const std::string& path,
                             ObjectMeta& m) {
  HAMI_TRY(rd.object(&metadata, path));
  HAMI_TRY(rd.string(metadata, "name", path + ".name", m.name));
  HAMI_TRY(rd.string(metadata, "namespace", path + ".namespace", m.ns));
  HAMI_TRY(rd.string(metadata, "uid", path + ".uid", m.uid));
  HAMI_TRY(rd.string(metadata, "resourceVersion", path + ".resourceVersion", m.resource_version));
  HAMI_TRY(rd.string_map(metadata, "labels", path + ".labels", m.labels));
  HAMI_TRY(rd.string_map(metadata, "annotations", path + ".annotations", m.annotations));
  HAMI_TRY(
      rd.time(metadata, "creationTimestamp", path + ".creationTimestamp", m.creation_timestamp));
  HAMI_TRY(
      rd.time(metadata, "deletionTimestamp", path + ".deletionTimestamp", m.deletion_timestamp));
  return {};
}

std::string subject_of(const char* kind, const json& obj) {
  std::string s = kind;
  const json* meta = Reader::member(obj, "metadata");
  if (!meta) return s;
  const json* ns = Reader::member(*meta, "namespace");
  const json* name = Reader::member(*meta, "name");
  std::string id;
  if (ns && ns->is_string()) id = ns->get<std::string>() + "/";
  if (name && name->is_string()) id += name->get<std::string>();
  if (!id.empty()) s += " " + id;
  return s;
}

hami::Result<void> read_containers(const Reader& rd, const json& spec, const char* key,
                                   const std::string& path, std::vector<Container>& out) {
  const json* list = Reader::member(spec, key);
  HAMI_TRY(rd.array(list, path));
  if (!list) return {};
  for (size_t i = 0; i < list->size(); ++i) {
    const json& c = (*list)[i];
    const std::string at = path + "[" + std::to_string(i) + "]";
    HAMI_TRY(rd.object(&c, at));
    Container& out_c = out.emplace_back();
    HAMI_TRY(rd.string(c, "name", at + ".name", out_c.name));
    HAMI_TRY(rd.run_as_user(c, at, out_c.run_as_user));
    const json* res = Reader::member(c, "resources");
    HAMI_TRY(rd.object(res, at + ".resources"));
    if (res) {
      HAMI_TRY(rd.string_map(*res, "limits", at + ".resources.limits", out_c.limits));
      HAMI_TRY(rd.string_map(*res, "requests", at + ".resources.requests", out_c.requests));
    }
    const json* env = Reader::member(c, "env");
    HAMI_TRY(rd.array(env, at + ".env"));
    if (!env) continue;
    for (size_t k = 0; k < env->size(); ++k) {
      const json& e = (*env)[k];
      const std::string eat = at + ".env[" + std::to_string(k) + "]";
      HAMI_TRY(rd.object(&e, eat));
      EnvVar v;
      HAMI_TRY(rd.string(e, "name", eat + ".name", v.name));
      if (v.name.empty()) return rd.error(eat + ".name", "missing");
      if (Reader::member(e, "valueFrom") == nullptr) {
        std::string value;
        HAMI_TRY(rd.string(e, "value", eat + ".value", value));
        v.value = std::move(value);
      }
      out_c.env.push_back(std::move(v));
    }
  }
  return {};
}

}  // namespace

hami::Result<ObjectMeta> ObjectMeta::from_json(const json& metadata) {
  ObjectMeta m;
  HAMI_TRY(read_meta(Reader("object"), metadata, "metadata", m));
  return m;
}

namespace {

// Presence is enough: the API server validated these on admission.
bool depends_on_other_pods(const json& spec) {
  if (const json* a = Reader::member(spec, "affinity"); a && a->is_object()) {
    for (const char* k : {"podAffinity", "podAntiAffinity"}) {
      if (const json* t = Reader::member(*a, k); t && !t->is_null()) return true;
    }
  }
  if (const json* t = Reader::member(spec, "topologySpreadConstraints");
      t && t->is_array() && !t->empty())
    return true;
  for (const char* list : {"initContainers", "containers"}) {
    const json* cs = Reader::member(spec, list);
    if (!cs || !cs->is_array()) continue;
    for (const json& c : *cs) {
      const json* ports = c.is_object() ? Reader::member(c, "ports") : nullptr;
      if (!ports || !ports->is_array()) continue;
      for (const json& p : *ports) {
        const json* hp = p.is_object() ? Reader::member(p, "hostPort") : nullptr;
        if (hp && hp->is_number_integer() && hp->get<int64_t>() > 0) return true;
      }
    }
  }
  return false;
}

}  // namespace

hami::Result<Pod> Pod::from_json(const json& obj) {
  const Reader rd(subject_of("pod", obj));
  if (!obj.is_object()) return rd.type_error("(top level)", "object", obj);
  Pod p;
  if (const json* meta = Reader::member(obj, "metadata")) {
    HAMI_TRY(read_meta(rd, *meta, "metadata", p.meta));
  }
  if (const json* spec = Reader::member(obj, "spec")) {
    HAMI_TRY(rd.object(spec, "spec"));
    HAMI_TRY(rd.string(*spec, "nodeName", "spec.nodeName", p.node_name));
    HAMI_TRY(rd.string(*spec, "schedulerName", "spec.schedulerName", p.scheduler_name));
    HAMI_TRY(rd.run_as_user(*spec, "spec", p.run_as_user));
    HAMI_TRY(
        read_containers(rd, *spec, "initContainers", "spec.initContainers", p.init_containers));
    HAMI_TRY(read_containers(rd, *spec, "containers", "spec.containers", p.containers));
    p.placement_depends_on_other_pods = depends_on_other_pods(*spec);
  }
  if (const json* status = Reader::member(obj, "status")) {
    HAMI_TRY(rd.object(status, "status"));
    HAMI_TRY(rd.string(*status, "phase", "status.phase", p.phase));
  }
  return p;
}

hami::Result<Node> Node::from_json(const json& obj) {
  const Reader rd(subject_of("node", obj));
  if (!obj.is_object()) return rd.type_error("(top level)", "object", obj);
  Node n;
  if (const json* meta = Reader::member(obj, "metadata")) {
    HAMI_TRY(read_meta(rd, *meta, "metadata", n.meta));
  }
  if (const json* spec = Reader::member(obj, "spec")) {
    HAMI_TRY(rd.object(spec, "spec"));
    HAMI_TRY(rd.boolean(*spec, "unschedulable", "spec.unschedulable", n.unschedulable));
  }
  const json* status = Reader::member(obj, "status");
  HAMI_TRY(rd.object(status, "status"));
  if (!status) return n;
  HAMI_TRY(rd.string_map(*status, "capacity", "status.capacity", n.capacity));
  HAMI_TRY(rd.string_map(*status, "allocatable", "status.allocatable", n.allocatable));
  const json* conditions = Reader::member(*status, "conditions");
  HAMI_TRY(rd.array(conditions, "status.conditions"));
  if (!conditions) return n;
  for (size_t i = 0; i < conditions->size(); ++i) {
    const json& c = (*conditions)[i];
    const std::string at = "status.conditions[" + std::to_string(i) + "]";
    HAMI_TRY(rd.object(&c, at));
    std::string type, value;
    HAMI_TRY(rd.string(c, "type", at + ".type", type));
    if (type != "Ready") continue;
    HAMI_TRY(rd.string(c, "status", at + ".status", value));
    if (value == "True") n.ready = true;
    if (value == "False") n.ready = false;
  }
  return n;
}

const std::string* string_annotation(const nlohmann::json& object, const char* key) {
  auto m = object.find("metadata");
  if (m == object.end() || !m->is_object()) return nullptr;
  auto a = m->find("annotations");
  if (a == m->end() || !a->is_object()) return nullptr;
  auto v = a->find(key);
  if (v == a->end() || !v->is_string()) return nullptr;
  return v->get_ptr<const std::string*>();
}

}  // namespace hami::k8s

#undef HAMI_TRY
