#include "monitor/feedback.hpp"

#include <map>
#include <utility>

namespace hami::monitor {

std::vector<FeedbackOutput> observe(std::span<const FeedbackInput> containers) {
  std::vector<FeedbackOutput> out(containers.size());
  // Active containers per GPU and priority.
  std::map<std::pair<std::string, int32_t>, int> active;
  for (size_t i = 0; i < containers.size(); ++i) {
    const FeedbackInput& c = containers[i];
    FeedbackOutput& o = out[i];
    o.recent_kernel = c.recent_kernel > 0 ? c.recent_kernel - 1 : c.recent_kernel;
    o.active = o.recent_kernel > 0;
    if (!o.active || c.mps_client) continue;
    for (const std::string& gpu : c.gpu_uuids)
      ++active[{gpu, c.priority}];
  }
  for (size_t i = 0; i < containers.size(); ++i) {
    const FeedbackInput& c = containers[i];
    FeedbackOutput& o = out[i];
    bool higher_active = false;
    bool peers_active = false;
    // An MPS client shares the SMs with the others at once: nothing holds it.
    for (const std::string& gpu : c.mps_client ? std::span<const std::string>{}
                                               : std::span<const std::string>(c.gpu_uuids)) {
      for (auto it = active.lower_bound({gpu, INT32_MIN});
           it != active.end() && it->first.first == gpu; ++it) {
        if (it->first.second < c.priority) higher_active = true;
        if (it->first.second == c.priority && it->second > 1) peers_active = true;
      }
    }
    if (higher_active) {
      o.recent_kernel = -1;
    } else if (o.recent_kernel < 0) {
      o.recent_kernel = 0;
    }
    o.utilization_switch = higher_active || peers_active ? 1 : 0;
    o.changed = o.recent_kernel != c.recent_kernel || o.utilization_switch != c.utilization_switch;
  }
  return out;
}

}  // namespace hami::monitor
