#pragma once
// Upstream's scoring formulas (§3.7) and the node-level policy order.
//
// Node score, on the node's usage before the pod:
//   10 × (ΣUsed/ΣCount + ΣUsedcores/ΣTotalcore + ΣUsedmem/ΣTotalmem), 0 if a total is 0.
// GPU score, with the pod's weights:
//   10 × (w_slot·Used/Count + w_core·Usedcores/Totalcore + w_mem·Usedmem/Totalmem).
// Both in float, as upstream computes them, so equal scores tie as they do there.
//
//   std::vector<ScoredNode> fits = ...;  // {name, node_score(node), i}
//   sort_nodes_best_first(fits, NodePolicy::kBinpack);  // most used first
//   int p = node_priority(fits[0].score, NodePolicy::kBinpack, 100);  // for prioritize
//
// Upstream's GPU score also adds the container's own request, but only from
// requests whose vendor key equals the device's model string ("NVIDIA" never
// equals "NVIDIA H200"), so for NVIDIA it always ranks by usage alone; so does
// this one.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "fit/options.hpp"
#include "fit/types.hpp"

namespace hami::fit {

inline constexpr float kScoreWeight = 10.0f;  // upstream util.Weight
// The most a node or unweighted GPU score can be (three ratios of 1).
inline constexpr float kMaxNodeScore = 3 * kScoreWeight;

// The mutable part of a GPU, which fitting updates on a scratch copy.
struct DeviceUsage {
  int32_t tenants = 0;
  int32_t mem_mib = 0;
  int32_t cores = 0;
};

inline DeviceUsage usage_of(const GpuDevice& d) {
  return {d.used_tenants, d.used_mem_mib, d.used_cores};
}

float device_score(const GpuDevice& d, const DeviceUsage& u, const ScoringWeights& w);
float node_score(const NodeDevices& node);

struct ScoredNode {
  std::string_view name;
  float score = 0;
  uint32_t index = 0;  // the caller's, e.g. into its candidate list
};

// Whether a is the better node: binpack prefers the higher score (most used),
// spread the lower; equal scores go to the smaller name, where upstream's
// order was whatever its goroutines happened to append.
inline bool node_before(const ScoredNode& a, const ScoredNode& b, NodePolicy policy) {
  if (a.score != b.score) {
    return policy == NodePolicy::kBinpack ? a.score > b.score : a.score < b.score;
  }
  return a.name < b.name;
}
void sort_nodes_best_first(std::span<ScoredNode> nodes, NodePolicy policy);

// The node's score as a priority in [0, max_priority], higher = preferred by
// the policy, for the extender's prioritize verb.
int node_priority(float score, NodePolicy policy, int max_priority);

// Priorities of several nodes for one pod, spread over the whole range as
// kube-scheduler normalises its own plugins' scores: the node the policy
// likes best of those given gets max_priority, the one it likes least 0,
// linearly between. Negative scores (unknown nodes) get 0 and take no part;
// when every known node scores the same, node_priority's mapping of that
// score. Without this, a pod's share of a node (1/32 of an 8-GPU node) moves
// the priority by less than one step, and kube-scheduler's own scores, which
// spread pods, decide alone.
std::vector<int> node_priorities(std::span<const float> scores, NodePolicy policy,
                                 int max_priority);

}  // namespace hami::fit
