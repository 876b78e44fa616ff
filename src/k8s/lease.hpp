#pragma once
// Leases (coordination.k8s.io/v1): the typed fields a leader elector uses, and
// get/create/update over a Client. Fields we do not model are kept from the
// object read, so an update never drops them.
//
//   auto lease = hami::k8s::get_lease(client, "kube-system", "hami-scheduler");
//   if (lease) { lease->holder_identity = "me"; update_lease(client, *lease); }  // 409 if raced

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "k8s/client.hpp"
#include "k8s/time.hpp"

namespace hami::k8s {

struct Lease {
  std::string ns;
  std::string name;
  std::string resource_version;  // set by the server; an update's precondition
  std::string holder_identity;
  std::optional<int> lease_duration_seconds;
  std::optional<TimePoint> acquire_time;
  std::optional<TimePoint> renew_time;
  int lease_transitions = 0;
  nlohmann::json raw = nlohmann::json::object();  // the object as read

  static hami::Result<Lease> from_json(const nlohmann::json& object);
  // The full object: `raw` with our fields written over it (times in MicroTime format).
  nlohmann::json to_json() const;
};

Result<Lease> get_lease(Client& client, const std::string& ns, const std::string& name);
Result<Lease> create_lease(Client& client, const Lease& lease);
// PUT with lease.resource_version as precondition: 409 Conflict if it changed.
Result<Lease> update_lease(Client& client, const Lease& lease);

}  // namespace hami::k8s
