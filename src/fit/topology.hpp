#pragma once
// Choosing GPUs by how well they are connected (a node's LinkScores, types.hpp).
// A set of GPUs is better connected than another when its weakest pair scores
// higher (a collective's ring or tree runs at its slowest hop), then when its
// pair scores sum higher (more fast paths for all-to-all traffic). fit.cpp
// uses these for the topology-aware policy and to break the other policies'
// ties:
//
//   ConnectScratch scratch;
//   std::vector<uint16_t> picked;
//   // pool: candidate GPUs (device positions) in the policy's walk order
//   choose_connected(node.links, /*forced=*/{}, pool, 2, scratch, picked);
//   // picked: the 2 indexes into pool of the best-connected pair
//   size_t lone = least_connected(node.links, pool);   // for a one-GPU container
//
// Every set is tried while there are at most kMaxExhaustiveSets of them (an
// 8-GPU node has at most 70); beyond that (16 GPUs, 8 wanted: 12,870) the set
// is grown greedily from the best pair. Upstream HAMi tries every set always
// and ranks by the sum alone.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "fit/types.hpp"

namespace hami::fit {

inline constexpr uint64_t kMaxExhaustiveSets = 5000;

// A set's connectedness: the weakest pair, then the sum of all pairs. A set
// of fewer than two GPUs has no pair: weakest is the largest value, total 0.
struct SetScore {
  uint32_t weakest = UINT32_MAX;
  uint32_t total = 0;
  bool better_than(const SetScore& o) const {
    return weakest != o.weakest ? weakest > o.weakest : total > o.total;
  }
};

// Working memory for choose_connected, reused across calls.
struct ConnectScratch {
  std::vector<uint32_t> forced_weakest;  // per pool entry: its weakest pair with forced
  std::vector<uint32_t> forced_total;    // per pool entry: its pairs with forced, summed
  std::vector<uint16_t> current;
  std::vector<SetScore> partial;
};

// Chooses `k` of `pool` (device positions, in the policy's walk order) that,
// together with every device of `forced`, make the best-connected set; among
// equally connected sets, the one earliest in walk order (so the first k of
// the pool when the scores cannot tell). `out` receives indexes into pool, in
// pool order. Positions must be below links.size().
void choose_connected(const LinkScores& links, std::span<const uint16_t> forced,
                      std::span<const uint16_t> pool, size_t k, ConnectScratch& scratch,
                      std::vector<uint16_t>& out);

// The index into `pool` of the device whose scores to the rest of the pool
// sum lowest, the earliest in walk order among equals: a one-GPU container
// takes it and leaves the well-connected GPUs together for containers that
// need several (upstream's computeWorstSingleCard).
size_t least_connected(const LinkScores& links, std::span<const uint16_t> pool);

// The connectedness of a set of device positions.
SetScore set_score(const LinkScores& links, std::span<const uint16_t> devices);

}  // namespace hami::fit
