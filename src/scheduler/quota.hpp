#pragma once
// Namespace quotas on GPU memory and cores, as upstream reads them from
// ResourceQuota objects (pkg/device/quota.go): spec.hard keys
// "limits.<memory resource>" and "limits.<core resource>"
// (limits.nvidia.com/gpumem in MiB, limits.nvidia.com/gpucores in percent
// of a GPU); "requests.*" and other keys are not ours. The memory limit is
// multiplied by memoryFactor, as the requests are. A pod counts its
// per-GPU value times its number of GPUs, init containers as upstream
// (max of the app containers' sum and the largest init container).
//
// What a namespace uses comes from the scheduler's cache (ClusterCache::
// View::namespace_usage: pods bound, placed or reserved there); this class
// holds only the limits. Where several ResourceQuotas of a namespace name a
// resource, the smallest limit holds (every quota must be satisfied, as
// Kubernetes' own quota admission has it; upstream kept whichever it saw
// last).
//
//   QuotaTracker quotas(config.resources);
//   quotas.quota_changed(resource_quota_json);              // watch events
//   QuotaRequest need = quota_request(prepared.request());
//   std::string why = quotas.check("team-a", usage, need);  // "" = fits

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "fit/resources.hpp"
#include "fit/types.hpp"
#include "scheduler/cache.hpp"

namespace hami::scheduler {

inline constexpr const char* kReasonQuota = "ResourceQuotaNotFit";

struct QuotaRequest {
  int64_t mem_mib = 0;  // fixed memory (gpumem), all GPUs
  int64_t cores = 0;
  // Some container asks by gpumem-percentage: its memory is known only once
  // the GPUs are chosen (the webhook counts it as 0, as upstream does).
  bool mem_percent = false;
};

QuotaRequest quota_request(const fit::PodRequest& request);

class QuotaTracker {
 public:
  explicit QuotaTracker(const fit::ResourceConfig& resources) : resources_(resources) {}

  // ResourceQuota watch events. An object without limits of ours removes
  // what it set before.
  void quota_changed(const nlohmann::json& resource_quota);
  void quota_deleted(const nlohmann::json& resource_quota);

  // Whether any namespace has a quota of ours (a cheap check before work).
  bool any() const { return objects_.load(std::memory_order_relaxed) > 0; }

  // "" when `need` fits the namespace's quotas on top of `used`, else
  // "ResourceQuotaNotFit: ..." naming the quota, the used, the requested and
  // the limit.
  std::string check(const std::string& ns, const NamespaceUsage& used,
                    const QuotaRequest& need) const;

  struct Limit {
    std::string ns;
    std::string resource;  // nvidia.com/gpumem (in MiB, times memoryFactor), nvidia.com/gpucores
    int64_t limit = 0;
    std::string quota;  // the ResourceQuota's name
  };
  // The effective limits, sorted by namespace then resource.
  std::vector<Limit> limits() const;

  const fit::ResourceConfig& resources() const { return resources_; }

 private:
  const fit::ResourceConfig& resources_;
  mutable std::mutex mu_;
  // namespace → ResourceQuota name → resource → limit
  std::map<std::string, std::map<std::string, std::map<std::string, int64_t>>> quotas_;
  std::atomic<size_t> objects_{0};
};

}  // namespace hami::scheduler
