// ResourceQuota objects as the API server's watch sends them: the scheduler
// reads limits.<gpumem>/limits.<gpucores> out of spec.hard. Any input must
// give limits or none, never a crash, an exception or a negative limit; a
// quota removed leaves nothing behind.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "scheduler/quota.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return 0;
  hami::fit::ResourceConfig rc;
  rc.memory_factor = 3;
  hami::scheduler::QuotaTracker q(rc);
  q.quota_changed(j);
  for (const auto& l : q.limits()) {
    if (l.limit < 0) __builtin_trap();
    (void)q.check(l.ns, {l.limit, l.limit}, {1, 1, false});
  }
  q.quota_deleted(j);
  if (q.any() || !q.limits().empty()) __builtin_trap();
  return 0;
}
