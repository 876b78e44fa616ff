#include "k8s/lease.hpp"

#include "k8s/objects.hpp"
#include "k8s/paths.hpp"

namespace hami::k8s {
namespace {

using nlohmann::json;

hami::Result<std::optional<TimePoint>> time_field(const json& spec, const char* key) {
  if (!spec.contains(key) || spec[key].is_null()) return std::optional<TimePoint>{};
  if (!spec[key].is_string()) return hami::Error{std::string("spec.") + key + ": not a string"};
  auto t = parse_time(spec[key].get<std::string>());
  if (!t) return hami::Error{std::string("spec.") + key + ": " + t.error().message};
  return std::optional<TimePoint>{*t};
}

Result<Lease> decode(const std::string& what, Result<json> r) {
  if (!r) return r.error();
  auto lease = Lease::from_json(*r);
  if (!lease) return ApiError{ErrorKind::kDecode, 200, "", what + ": " + lease.error().message};
  return std::move(*lease);
}

}  // namespace

hami::Result<Lease> Lease::from_json(const json& obj) {
  if (!obj.is_object()) return hami::Error{"lease: not an object"};
  Lease l;
  l.raw = obj;
  auto meta = ObjectMeta::from_json(obj.value("metadata", json::object()));
  if (!meta) return hami::Error{"lease: " + meta.error().message};
  l.ns = meta->ns;
  l.name = meta->name;
  l.resource_version = meta->resource_version;
  const json spec = obj.value("spec", json::object());
  if (!spec.is_object()) return hami::Error{"lease: spec: not an object"};
  if (spec.contains("holderIdentity") && !spec["holderIdentity"].is_null()) {
    if (!spec["holderIdentity"].is_string())
      return hami::Error{"lease: spec.holderIdentity: not a string"};
    l.holder_identity = spec["holderIdentity"];
  }
  if (spec.contains("leaseDurationSeconds") && !spec["leaseDurationSeconds"].is_null()) {
    if (!spec["leaseDurationSeconds"].is_number_integer()) {
      return hami::Error{"lease: spec.leaseDurationSeconds: not an integer"};
    }
    l.lease_duration_seconds = spec["leaseDurationSeconds"].get<int>();
  }
  if (spec.contains("leaseTransitions") && !spec["leaseTransitions"].is_null()) {
    if (!spec["leaseTransitions"].is_number_integer()) {
      return hami::Error{"lease: spec.leaseTransitions: not an integer"};
    }
    l.lease_transitions = spec["leaseTransitions"].get<int>();
  }
  auto acquire = time_field(spec, "acquireTime");
  if (!acquire) return hami::Error{"lease: " + acquire.error().message};
  l.acquire_time = *acquire;
  auto renew = time_field(spec, "renewTime");
  if (!renew) return hami::Error{"lease: " + renew.error().message};
  l.renew_time = *renew;
  return l;
}

json Lease::to_json() const {
  json j = raw.is_object() ? raw : json::object();
  j["apiVersion"] = "coordination.k8s.io/v1";
  j["kind"] = "Lease";
  json& meta = j["metadata"];
  if (!meta.is_object()) meta = json::object();
  meta["name"] = name;
  meta["namespace"] = ns;
  if (resource_version.empty()) {
    meta.erase("resourceVersion");
  } else {
    meta["resourceVersion"] = resource_version;
  }
  json& spec = j["spec"];
  if (!spec.is_object()) spec = json::object();
  auto set_or_erase = [&](const char* key, json value, bool present) {
    if (present) {
      spec[key] = std::move(value);
    } else {
      spec.erase(key);
    }
  };
  set_or_erase("holderIdentity", holder_identity, !holder_identity.empty());
  set_or_erase("leaseDurationSeconds", lease_duration_seconds.value_or(0),
               lease_duration_seconds.has_value());
  set_or_erase("acquireTime", acquire_time ? format_micro_time(*acquire_time) : "",
               acquire_time.has_value());
  set_or_erase("renewTime", renew_time ? format_micro_time(*renew_time) : "",
               renew_time.has_value());
  spec["leaseTransitions"] = lease_transitions;
  return j;
}

Result<Lease> get_lease(Client& client, const std::string& ns, const std::string& name) {
  const std::string path = lease_path(ns, name);
  return decode("GET " + path, client.get(path));
}

Result<Lease> create_lease(Client& client, const Lease& lease) {
  const std::string path = lease_path(lease.ns);
  json obj = lease.to_json();
  obj["metadata"].erase("resourceVersion");
  return decode("POST " + path, client.create(path, obj));
}

Result<Lease> update_lease(Client& client, const Lease& lease) {
  const std::string path = lease_path(lease.ns, lease.name);
  return decode("PUT " + path, client.update(path, lease.to_json()));
}

}  // namespace hami::k8s
