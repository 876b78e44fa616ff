// Placement by GPU topology on simulated nodes: the topology-aware policy
// takes the best-connected set (two NVLink islands, PCIe switch pairs, a
// node whose best pair is taken), a one-GPU container the least connected
// GPU, and binpack and spread take the best-connected set among GPUs they
// cannot tell apart; the set search itself (weakest pair first, greedy past
// the exhaustive limit).
#include <gtest/gtest.h>

#include <initializer_list>
#include <tuple>

#include "fit/topology.hpp"
#include "fit_helpers.hpp"

namespace hami::fit {
namespace {

using testing::ctr;
using testing::gpu;
using testing::node;
using testing::used;
using Uuids = std::vector<std::vector<std::string>>;

// Upstream's pair scores (protocol::pair_score).
constexpr uint16_t kSys = 10;     // across NUMA nodes
constexpr uint16_t kNode = 20;    // one NUMA node
constexpr uint16_t kPix = 50;     // one PCIe switch
constexpr uint16_t kNv12 = 1220;  // 12 NVLinks, one NUMA node

LinkScores links(size_t n, uint16_t fallback,
                 std::initializer_list<std::tuple<size_t, size_t, uint16_t>> pairs) {
  LinkScores l(n);
  for (size_t a = 0; a < n; ++a)
    for (size_t b = a + 1; b < n; ++b)
      l.set(a, b, fallback);
  for (const auto& [a, b, s] : pairs)
    l.set(a, b, s);
  return l;
}

// n idle GPUs "GPU-<i>", the first half on NUMA 0, the rest on NUMA 1.
NodeDevices gpus(size_t n, LinkScores l) {
  NodeDevices d = node("n", {});
  for (size_t i = 0; i < n; ++i)
    d.devices.push_back(
        gpu("GPU-" + std::to_string(i), static_cast<int32_t>(i), 80000, i < n / 2 ? 0 : 1));
  d.links = std::move(l);
  return d;
}

// Two islands of four GPUs, every pair within an island NVLinked.
NodeDevices two_islands() {
  LinkScores l(8);
  for (size_t a = 0; a < 8; ++a)
    for (size_t b = a + 1; b < 8; ++b)
      l.set(a, b, (a < 4) == (b < 4) ? kNv12 : kSys);
  return gpus(8, std::move(l));
}

testing::Outcome place(const NodeDevices& n, std::vector<ContainerRequest> containers,
                       const char* policy) {
  return testing::run(n, testing::prepare(std::move(containers), testing::gpu_policy(policy)));
}

TEST(Topology, AwareTakesOneNvlinkIsland) {
  // Spread walks NUMA 1 first; both islands are equal, so the first in walk order.
  auto out = place(two_islands(), {ctr(4)}, "topology-aware");
  ASSERT_TRUE(out.fits) << out.reason;
  EXPECT_EQ(out.uuids, (Uuids{{"GPU-4", "GPU-5", "GPU-6", "GPU-7"}}));
}

TEST(Topology, AwareAvoidsABrokenIsland) {
  NodeDevices n = two_islands();
  n.devices[5] = used(n.devices[5], 10, 0, 0);  // every slice taken
  for (const char* policy : {"topology-aware", "spread"}) {
    SCOPED_TRACE(policy);  // spread: every idle GPU ties, so topology decides
    auto out = place(n, {ctr(4)}, policy);
    ASSERT_TRUE(out.fits) << out.reason;
    EXPECT_EQ(out.uuids, (Uuids{{"GPU-0", "GPU-1", "GPU-2", "GPU-3"}}));
  }
}

TEST(Topology, AwareRanksConnectionAboveUsage) {
  NodeDevices n = two_islands();
  n.devices[5] = used(n.devices[5], 10, 0, 0);
  n.devices[0] = used(n.devices[0], 1, 1000, 10);
  auto out = place(n, {ctr(4)}, "topology-aware");
  ASSERT_TRUE(out.fits) << out.reason;
  EXPECT_EQ(out.uuids, (Uuids{{"GPU-1", "GPU-2", "GPU-3", "GPU-0"}}));
  // Spread takes the idle GPUs first: three of one island and one of the other.
  out = place(n, {ctr(4)}, "spread");
  ASSERT_TRUE(out.fits) << out.reason;
  EXPECT_EQ(out.uuids, (Uuids{{"GPU-4", "GPU-6", "GPU-7", "GPU-1"}}));
}

TEST(Topology, TwoContainersTakeTheTwoIslands) {
  auto out = place(two_islands(), {ctr(4, 80000), ctr(4, 80000)}, "topology-aware");
  ASSERT_TRUE(out.fits) << out.reason;
  EXPECT_EQ(out.uuids,
            (Uuids{{"GPU-4", "GPU-5", "GPU-6", "GPU-7"}, {"GPU-0", "GPU-1", "GPU-2", "GPU-3"}}));
}

// Four GPUs, PCIe switches pairing 0 with 2 and 1 with 3, all on NUMA 0.
NodeDevices switch_pairs() {
  NodeDevices n = gpus(4, links(4, kNode, {{0, 2, kPix}, {1, 3, kPix}}));
  for (GpuDevice& d : n.devices)
    d.numa = 0;
  return n;
}

TEST(Topology, PoliciesTakeTheSwitchPairAmongEquals) {
  for (const char* policy : {"topology-aware", "spread", "binpack", "numa,binpack"}) {
    SCOPED_TRACE(policy);
    auto out = place(switch_pairs(), {ctr(2)}, policy);
    ASSERT_TRUE(out.fits) << out.reason;
    EXPECT_EQ(out.uuids, (Uuids{{"GPU-0", "GPU-2"}}));
  }
  // Without topology the walk order decides: the first two.
  NodeDevices plain = switch_pairs();
  plain.links = {};
  auto out = place(plain, {ctr(2)}, "binpack");
  ASSERT_TRUE(out.fits) << out.reason;
  EXPECT_EQ(out.uuids, (Uuids{{"GPU-0", "GPU-1"}}));
}

TEST(Topology, BinpackKeepsItsOrderAndCompletesTheBestPair) {
  // GPU-1 is in use: binpack takes it first, then of the idle GPUs the one
  // on its switch, GPU-3, not GPU-0 (the lowest index).
  NodeDevices n = switch_pairs();
  n.devices[1] = used(n.devices[1], 1, 1000, 10);
  auto out = place(n, {ctr(2)}, "binpack");
  ASSERT_TRUE(out.fits) << out.reason;
  EXPECT_EQ(out.uuids, (Uuids{{"GPU-1", "GPU-3"}}));
  // Spread puts the used GPU last; the idle ones tie, and 0-2 is the switch pair.
  out = place(n, {ctr(2)}, "spread");
  ASSERT_TRUE(out.fits) << out.reason;
  EXPECT_EQ(out.uuids, (Uuids{{"GPU-0", "GPU-2"}}));
}

TEST(Topology, AwareTakesTheNextBestPairWhenTheBestIsTaken) {
  // 0-1 NVLinked, 2-3 on one switch, the rest across NUMA nodes; GPU-1 full.
  NodeDevices n = gpus(4, links(4, kSys, {{0, 1, kNv12}, {2, 3, kPix}}));
  n.devices[1] = used(n.devices[1], 1, 80000, 10);
  auto out = place(n, {ctr(2)}, "topology-aware");
  ASSERT_TRUE(out.fits) << out.reason;
  EXPECT_EQ(out.uuids, (Uuids{{"GPU-2", "GPU-3"}}));
}

TEST(Topology, AwareGivesOneGpuTheLeastConnected) {
  // 0-1 and 2-3 NVLinked, GPU-4 alone on PCIe: a one-GPU container takes
  // GPU-4 and leaves both pairs whole, where spread would break a pair.
  NodeDevices n = gpus(5, links(5, kSys, {{0, 1, kNv12}, {2, 3, kNv12}}));
  auto out = place(n, {ctr(1)}, "topology-aware");
  ASSERT_TRUE(out.fits) << out.reason;
  EXPECT_EQ(out.uuids, (Uuids{{"GPU-4"}}));
  out = place(n, {ctr(1)}, "spread");
  ASSERT_TRUE(out.fits) << out.reason;
  EXPECT_EQ(out.uuids, (Uuids{{"GPU-2"}}));
}

TEST(Topology, WeakestPairRanksBeforeTheSum) {
  // {0,1,2}: one 18-NVLink pair and two cross-NUMA pairs (sum 1830, upstream's
  // pick); {3,4,5}: three 2-NVLink pairs (sum 660). A collective over the
  // first runs at its slowest hop.
  NodeDevices n = gpus(6, links(6, kSys, {{0, 1, 1820}, {3, 4, 220}, {3, 5, 220}, {4, 5, 220}}));
  auto out = place(n, {ctr(3)}, "topology-aware");
  ASSERT_TRUE(out.fits) << out.reason;
  EXPECT_EQ(out.uuids, (Uuids{{"GPU-3", "GPU-4", "GPU-5"}}));
}

TEST(Topology, NumaBindKeepsItsWalk) {
  // numa-bind restarts its selection per NUMA node and ignores topology: 0-3
  // are NVLinked across NUMA nodes, but the walk takes NUMA 1's GPUs.
  NodeDevices n = gpus(4, links(4, kSys, {{0, 3, kNv12}}));
  PodOptions o = testing::gpu_policy("topology-aware");
  o.numa_bind = true;
  auto out = testing::run(n, testing::prepare({ctr(2)}, o));
  ASSERT_TRUE(out.fits) << out.reason;
  EXPECT_EQ(out.uuids, (Uuids{{"GPU-2", "GPU-3"}}));
}

TEST(Topology, ScoresOfAnotherSizeAreIgnored) {
  NodeDevices n = switch_pairs();
  n.links = links(3, kNode, {{0, 2, kPix}});  // stale: the node has four GPUs now
  auto out = place(n, {ctr(2)}, "topology-aware");
  ASSERT_TRUE(out.fits) << out.reason;
  EXPECT_EQ(out.uuids, (Uuids{{"GPU-0", "GPU-1"}}));
}

TEST(ChooseConnected, ForcedMembersCountAndTiesGoToTheWalkOrder) {
  LinkScores l = links(5, kNode, {{0, 3, kPix}, {0, 4, kPix}});
  ConnectScratch s;
  std::vector<uint16_t> out;
  const std::vector<uint16_t> forced = {0};
  const std::vector<uint16_t> pool = {1, 2, 4, 3};  // walk order
  choose_connected(l, forced, pool, 1, s, out);
  EXPECT_EQ(out, (std::vector<uint16_t>{2}));  // device 4: first of 4 and 3
  choose_connected(l, {}, pool, 2, s, out);
  EXPECT_EQ(out, (std::vector<uint16_t>{0, 1}));  // nothing to tell: the first two
  choose_connected(l, forced, pool, 4, s, out);
  EXPECT_EQ(out, (std::vector<uint16_t>{0, 1, 2, 3}));
}

TEST(ChooseConnected, GreedyPastTheExhaustiveLimitStillFindsAnIsland) {
  // 16 GPUs in two NVLink islands of eight, 8 wanted: C(16, 8) = 12,870 sets.
  LinkScores l(16);
  for (size_t a = 0; a < 16; ++a)
    for (size_t b = a + 1; b < 16; ++b)
      l.set(a, b, (a % 2) == (b % 2) ? kNv12 : kSys);  // islands: even and odd
  std::vector<uint16_t> pool;
  for (uint16_t i = 0; i < 16; ++i)
    pool.push_back(i);
  ConnectScratch s;
  std::vector<uint16_t> out;
  choose_connected(l, {}, pool, 8, s, out);
  ASSERT_EQ(out.size(), 8u);
  for (const uint16_t i : out)
    EXPECT_EQ(i % 2, 0) << i;
  EXPECT_EQ(set_score(l, out).weakest, kNv12);
}

TEST(ChooseConnected, LeastConnectedPrefersTheEarliestAmongEquals) {
  LinkScores l = links(4, kNode, {{0, 1, kPix}});
  const std::vector<uint16_t> pool = {1, 3, 2, 0};
  EXPECT_EQ(least_connected(l, pool), 1u);  // device 3 ties with 2; 3 walks first
}

}  // namespace
}  // namespace hami::fit
