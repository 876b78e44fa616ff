#include "fit/score.hpp"

#include <algorithm>
#include <cmath>

namespace hami::fit {

float device_score(const GpuDevice& d, const DeviceUsage& u, const ScoringWeights& w) {
  if (d.split_count == 0 || d.total_cores == 0 || d.total_mem_mib == 0) return 0;
  const float used = static_cast<float>(u.tenants) / static_cast<float>(d.split_count);
  const float core = static_cast<float>(u.cores) / static_cast<float>(d.total_cores);
  const float mem = static_cast<float>(u.mem_mib) / static_cast<float>(d.total_mem_mib);
  return kScoreWeight * (static_cast<float>(w.slot) * used + static_cast<float>(w.core) * core +
                         static_cast<float>(w.memory) * mem);
}

float node_score(const NodeDevices& node) {
  int64_t used = 0, used_cores = 0, used_mem = 0;
  int64_t total = 0, total_cores = 0, total_mem = 0;
  for (const GpuDevice& d : node.devices) {
    used += d.used_tenants;
    used_cores += d.used_cores;
    used_mem += d.used_mem_mib;
    total += d.split_count;
    total_cores += d.total_cores;
    total_mem += d.total_mem_mib;
  }
  if (total == 0 || total_cores == 0 || total_mem == 0) return 0;
  return kScoreWeight * (static_cast<float>(used) / static_cast<float>(total) +
                         static_cast<float>(used_cores) / static_cast<float>(total_cores) +
                         static_cast<float>(used_mem) / static_cast<float>(total_mem));
}

void sort_nodes_best_first(std::span<ScoredNode> nodes, NodePolicy policy) {
  std::sort(nodes.begin(), nodes.end(), [policy](const ScoredNode& a, const ScoredNode& b) {
    return node_before(a, b, policy);
  });
}

int node_priority(float score, NodePolicy policy, int max_priority) {
  // Usage beyond the totals (over-committed annotations) still ranks, capped.
  const float s = std::clamp(score, 0.0f, kMaxNodeScore);
  const float preferred = policy == NodePolicy::kBinpack ? s : kMaxNodeScore - s;
  return static_cast<int>(
      std::lround(preferred / kMaxNodeScore * static_cast<float>(max_priority)));
}

std::vector<int> node_priorities(std::span<const float> scores, NodePolicy policy,
                                 int max_priority) {
  std::vector<int> out(scores.size(), 0);
  float lo = kMaxNodeScore, hi = 0;
  bool any = false;
  for (float s : scores) {
    if (s < 0) continue;
    const float c = std::min(s, kMaxNodeScore);
    lo = std::min(lo, c);
    hi = std::max(hi, c);
    any = true;
  }
  if (!any) return out;
  // Below this the nodes are as good as equal (float noise).
  constexpr float kEqual = 1e-4f;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (scores[i] < 0) continue;
    if (hi - lo < kEqual) {
      out[i] = node_priority(scores[i], policy, max_priority);
      continue;
    }
    const float c = std::min(scores[i], kMaxNodeScore);
    const float preferred = policy == NodePolicy::kBinpack ? c - lo : hi - c;
    out[i] =
        static_cast<int>(std::lround(preferred / (hi - lo) * static_cast<float>(max_priority)));
  }
  return out;
}

}  // namespace hami::fit
