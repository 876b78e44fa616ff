#include "deviceplugin/dynamic_mig.hpp"

#include <nlohmann/json.hpp>

#include "k8s/objects.hpp"
#include "protocol/annotations.hpp"

namespace hami::deviceplugin {

Result<std::vector<protocol::MigAllocation>> DynamicMigService::realise(
    std::vector<protocol::MigAllocation> allocs, const Commit& commit) {
  std::lock_guard lk(mu_);
  return manager_.realise(std::move(allocs), gpus_, commit);
}

Result<CleanupResult> DynamicMigService::cleanup(
    const std::vector<protocol::MigAllocation>& in_use) {
  std::lock_guard lk(mu_);
  return manager_.cleanup(in_use, gpus_);
}

std::vector<protocol::MigAllocation> mig_allocations_of(const std::vector<nlohmann::json>& pods,
                                                        const protocol::DecisionTrust& trust,
                                                        bool live_only) {
  std::vector<protocol::MigAllocation> out;
  for (const nlohmann::json& item : pods) {
    auto pod = k8s::Pod::from_json(item);
    if (!pod) continue;
    const auto& an = pod->meta.annotations;
    auto it = an.find(protocol::kMigAllocations);
    if (it == an.end()) continue;
    if (live_only && (pod->phase == "Succeeded" || pod->phase == "Failed")) continue;
    if (!an.count(protocol::kAssignedNode) || !an.count(protocol::kDevicesAllocated)) continue;
    if (!protocol::decision_refusal(*pod, trust).empty()) continue;
    auto allocs = protocol::decode_mig_allocations(it->second);
    if (!allocs) continue;
    for (protocol::MigAllocation& a : *allocs)
      if (a.realised()) out.push_back(std::move(a));
  }
  return out;
}

}  // namespace hami::deviceplugin
