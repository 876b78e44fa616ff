#pragma once
// A node's GPU topology for placement (fit::LinkScores), from the device
// plugin's annotations: hami.io/node-nvidia-score (upstream's pair scores,
// written by our plugin or upstream's) and hami.io/node-nvidia-p2p (ours).
// Scores map onto the inventory's device positions by UUID; entries for GPUs
// the inventory lacks are skipped. A pair reported both ways with different
// scores gets the smaller (upstream's plugin writes 0 for a pair it finds
// asymmetric); a pair the P2P annotation says cannot reach its peer directly
// (any status but "ok" or "unknown") scores 0, below every connected pair.
//
//   auto links = node_links(node.meta.annotations, inventory);
//   if (!links) log::warn("%s", links.error().message.c_str());  // placed without topology
//   cache.set_node(name, std::move(inventory), links ? std::move(*links) : fit::LinkScores{});
//
// No score annotation, or fewer than two GPUs: empty scores, no error. A bad
// annotation of either kind is an error.

#include <string>
#include <vector>

#include "common/result.hpp"
#include "fit/types.hpp"
#include "k8s/objects.hpp"

namespace hami::scheduler {

Result<fit::LinkScores> node_links(const k8s::StringMap& annotations,
                                   const std::vector<fit::GpuDevice>& inventory);

}  // namespace hami::scheduler
