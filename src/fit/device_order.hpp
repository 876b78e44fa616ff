#pragma once
// The order in which a node's GPUs are tried for a container, by GPU policy.
// Upstream sorts the list and then walks it from the last element; this
// computes that walk order directly (first = tried first):
//
//   binpack            highest score first, then higher NUMA
//   spread (default)   lowest score first, then higher NUMA
//   mutex              fewest tenants first, then higher NUMA
//   numa-bind          NUMA groups kept together (binpack: lowest NUMA first;
//                      spread: highest first), by score within a group
//   chain "numa,binpack"  by each key in turn (numa: higher NUMA first);
//                      numa-bind puts numa first if the chain does not
//   ties               the lower device index first
//
//   std::vector<DeviceKey> keys = ...;   // one per candidate GPU
//   std::vector<uint16_t> order;
//   order_devices(keys, options.gpu_policy, options.numa_bind, order);
//
// Upstream broke the remaining ties by sort.Sort's whim, and a chain's by the
// higher index first; here the lower index goes first everywhere.

#include <cstdint>
#include <span>
#include <vector>

#include "fit/options.hpp"

namespace hami::fit {

struct DeviceKey {
  float score = 0;
  int32_t numa = 0;
  int32_t index = 0;    // device index on the node, the last tie-break
  int32_t tenants = 0;  // for mutex
};

namespace detail {
// Each branch is upstream's Less (gpu_policy.go) with the operands swapped,
// because upstream's Fit walks its ascending list from the end.
inline bool by_chain(const DeviceKey& a, const DeviceKey& b, const GpuPolicy& p, bool numa_bind) {
  if (numa_bind && p.chain[0] != SortKey::kNuma && a.numa != b.numa) return a.numa > b.numa;
  for (uint8_t i = 0; i < p.chain_len; ++i) {
    switch (p.chain[i]) {
      case SortKey::kBinpack:
        if (a.score != b.score) return a.score > b.score;
        break;
      case SortKey::kSpread:
        if (a.score != b.score) return a.score < b.score;
        break;
      case SortKey::kNuma:
        if (a.numa != b.numa) return a.numa > b.numa;
        break;
    }
  }
  return a.index < b.index;
}
}  // namespace detail

// Whether a is tried before b. Inline: fitting calls it per GPU per node.
inline bool tried_before(const DeviceKey& a, const DeviceKey& b, const GpuPolicy& p,
                         bool numa_bind) {
  using Order = GpuPolicy::Order;
  if (p.order == Order::kChain) return detail::by_chain(a, b, p, numa_bind);
  if (p.order == Order::kMutex) {
    if (a.tenants != b.tenants) return a.tenants < b.tenants;
    if (a.numa != b.numa) return a.numa > b.numa;
    return a.index < b.index;
  }
  const bool binpack = p.order == Order::kBinpack;
  if (numa_bind) {
    if (a.numa != b.numa) return binpack ? a.numa < b.numa : a.numa > b.numa;
    if (a.score != b.score) return binpack ? a.score > b.score : a.score < b.score;
    return a.index < b.index;
  }
  if (a.score != b.score) return binpack ? a.score > b.score : a.score < b.score;
  if (a.numa != b.numa) return a.numa > b.numa;
  return a.index < b.index;
}

// Whether the policy cannot tell a from b: only the last tie-breaks (the
// device index, and for a single policy the NUMA node) would order them.
// Placement lets GPU topology choose among such GPUs (fit.cpp).
inline bool same_rank(const DeviceKey& a, const DeviceKey& b, const GpuPolicy& p) {
  using Order = GpuPolicy::Order;
  if (p.order == Order::kMutex) return a.tenants == b.tenants;
  if (p.order != Order::kChain) return a.score == b.score;
  for (uint8_t i = 0; i < p.chain_len; ++i) {
    if (p.chain[i] == SortKey::kNuma ? a.numa != b.numa : a.score != b.score) return false;
  }
  return true;
}

// order receives positions into keys, in walk order.
void order_devices(std::span<const DeviceKey> keys, const GpuPolicy& policy, bool numa_bind,
                   std::vector<uint16_t>& order);

}  // namespace hami::fit
