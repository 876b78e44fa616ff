// Upstream's score formulas, the node policy order with its tie-break, and the
// GPU walk order for every policy shape.
#include <gtest/gtest.h>

#include <ostream>

#include "fit/device_order.hpp"
#include "fit_helpers.hpp"

namespace hami::fit {
namespace {

using testing::gpu;
using testing::node;
using testing::used;

TEST(Score, NodeScoreFormula) {
  // ΣUsed/ΣCount = 5/20, ΣUsedcores/ΣTotalcore = 50/200, ΣUsedmem/ΣTotalmem = 40000/160000.
  const auto n = node("n", {used(gpu("GPU-0", 0), 5, 40000, 50), gpu("GPU-1", 1)});
  EXPECT_FLOAT_EQ(node_score(n), 10.0f * (0.25f + 0.25f + 0.25f));
  EXPECT_FLOAT_EQ(node_score(node("empty", {})), 0.0f);
  auto zero_mem = node("z", {gpu("GPU-0", 0, 0)});
  zero_mem.devices[0].used_tenants = 3;
  EXPECT_FLOAT_EQ(node_score(zero_mem), 0.0f);
}

TEST(Score, DeviceScoreFormulaAndWeights) {
  const GpuDevice d = gpu("GPU-0", 0, 1000);
  const DeviceUsage u{2, 500, 30};  // 0.2 slots, 0.3 cores, 0.5 memory
  EXPECT_FLOAT_EQ(device_score(d, u, {}), 10.0f * (0.2f + 0.3f + 0.5f));
  EXPECT_FLOAT_EQ(device_score(d, u, {1, 1, 3}), 10.0f * (0.2f + 0.3f + 1.5f));
  EXPECT_FLOAT_EQ(device_score(d, u, {0, 2, 0}), 10.0f * 0.6f);
  GpuDevice no_slots = d;
  no_slots.split_count = 0;
  EXPECT_FLOAT_EQ(device_score(no_slots, u, {}), 0.0f);
}

TEST(Score, NodePolicyOrderAndTies) {
  std::vector<ScoredNode> nodes = {{"c", 5, 0}, {"a", 9, 1}, {"b", 5, 2}, {"d", 1, 3}};
  sort_nodes_best_first(nodes, NodePolicy::kBinpack);
  std::vector<std::string_view> names;
  for (const auto& n : nodes)
    names.push_back(n.name);
  EXPECT_EQ(names, (std::vector<std::string_view>{"a", "b", "c", "d"}));
  sort_nodes_best_first(nodes, NodePolicy::kSpread);
  names.clear();
  for (const auto& n : nodes)
    names.push_back(n.name);
  EXPECT_EQ(names, (std::vector<std::string_view>{"d", "b", "c", "a"}));
}

TEST(Score, NodePriority) {
  EXPECT_EQ(node_priority(0, NodePolicy::kBinpack, 100), 0);
  EXPECT_EQ(node_priority(30, NodePolicy::kBinpack, 100), 100);
  EXPECT_EQ(node_priority(15, NodePolicy::kBinpack, 10), 5);
  EXPECT_EQ(node_priority(0, NodePolicy::kSpread, 100), 100);
  EXPECT_EQ(node_priority(30, NodePolicy::kSpread, 100), 0);
  EXPECT_EQ(node_priority(99, NodePolicy::kBinpack, 100), 100);  // over-committed: capped
  EXPECT_EQ(node_priority(-1, NodePolicy::kSpread, 100), 100);
}

// One pod on an 8-GPU node moves its score by ~0.6 of 30: spread over the
// range, the busiest of the nodes asked about still gets the top priority.
TEST(Score, NodePrioritiesSpanTheRangeOverTheNodesGiven) {
  const std::vector<float> scores{0.6f, 1.2f, -1, 0.0f};
  EXPECT_EQ(node_priorities(scores, NodePolicy::kBinpack, 10), (std::vector<int>{5, 10, 0, 0}));
  EXPECT_EQ(node_priorities(scores, NodePolicy::kSpread, 10), (std::vector<int>{5, 0, 0, 10}));
  // All equal: the absolute mapping.
  EXPECT_EQ(node_priorities(std::vector<float>{15, 15}, NodePolicy::kBinpack, 10),
            (std::vector<int>{5, 5}));
  EXPECT_EQ(node_priorities(std::vector<float>{-1}, NodePolicy::kBinpack, 10),
            (std::vector<int>{0}));
}

struct OrderCase {
  const char* policy;
  bool numa_bind;
  std::vector<int> want;  // indices of keys below, in walk order
};

// Names the row in test output instead of dumping its bytes.
void PrintTo(const OrderCase& c, std::ostream* os) {
  *os << c.policy << (c.numa_bind ? " numa-bind" : "");
}

// index: score, numa
//   0: 5, 0    1: 5, 1    2: 1, 0    3: 9, 1    4: 1, 1    5: 5, 0
const std::vector<DeviceKey> kKeys = {{5, 0, 0, 2}, {5, 1, 1, 1}, {1, 0, 2, 0},
                                      {9, 1, 3, 3}, {1, 1, 4, 0}, {5, 0, 5, 1}};

class WalkOrder : public ::testing::TestWithParam<OrderCase> {};

TEST_P(WalkOrder, MatchesUpstreamReversed) {
  const auto& c = GetParam();
  std::vector<uint16_t> order;
  order_devices(kKeys, *parse_gpu_policy(c.policy), c.numa_bind, order);
  std::vector<int> got(order.begin(), order.end());
  EXPECT_EQ(got, c.want);
}

INSTANTIATE_TEST_SUITE_P(
    Fit, WalkOrder,
    ::testing::Values(
        // Score first, then higher NUMA, then lower index.
        OrderCase{"spread", false, {4, 2, 1, 0, 5, 3}},
        OrderCase{"binpack", false, {3, 1, 0, 5, 4, 2}},
        // Fewest tenants first (2, 4), then higher NUMA, then index.
        OrderCase{"mutex", false, {4, 2, 1, 5, 0, 3}},
        OrderCase{"mutex", true, {4, 2, 1, 5, 0, 3}},  // mutex ignores numa-bind, as upstream
        // NUMA groups: spread from the highest NUMA, binpack from the lowest.
        OrderCase{"spread", true, {4, 1, 3, 2, 0, 5}},
        OrderCase{"binpack", true, {0, 5, 2, 3, 1, 4}},
        OrderCase{"numa", false, {1, 3, 4, 0, 2, 5}},
        OrderCase{"numa,binpack", false, {3, 1, 4, 0, 5, 2}},
        OrderCase{"spread,numa", false, {4, 2, 1, 0, 5, 3}},
        OrderCase{"binpack,spread", true, {3, 1, 4, 0, 5, 2}},
        OrderCase{"mutex,topology-aware", false, {2, 4, 0, 1, 5, 3}}));

}  // namespace
}  // namespace hami::fit
