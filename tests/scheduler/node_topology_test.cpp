// A node's GPU topology as the scheduler reads it: the plugin's pair scores
// and P2P annotations onto the inventory's positions, into the cache by the
// feed (and again when only they change), and from there into the fit.
#include "scheduler/node_topology.hpp"

#include <gtest/gtest.h>

#include "fit/fit.hpp"
#include "fit/options.hpp"
#include "protocol/node_register.hpp"
#include "scheduler/cache.hpp"
#include "scheduler/feed.hpp"
#include "scheduler/helpers.hpp"

namespace hami::scheduler {
namespace {

using protocol::DeviceLinks;

std::vector<fit::GpuDevice> inventory(std::initializer_list<const char*> uuids) {
  std::vector<fit::GpuDevice> out;
  for (const char* u : uuids) {
    fit::GpuDevice d;
    d.uuid = u;
    out.push_back(d);
  }
  return out;
}

// Four GPUs: a-b NVLinked (4 links on one switch), c-d on one switch, the
// rest across NUMA nodes.
std::vector<DeviceLinks> four_gpus() {
  return {{"a", {{"b", 450, "ok"}, {"c", 10, "ok"}, {"d", 10, "ok"}}},
          {"b", {{"a", 450, "ok"}, {"c", 10, "ok"}, {"d", 10, "ok"}}},
          {"c", {{"a", 10, "ok"}, {"b", 10, "ok"}, {"d", 50, "ok"}}},
          {"d", {{"a", 10, "ok"}, {"b", 10, "ok"}, {"c", 50, "ok"}}}};
}

TEST(NodeLinks, ScoresLandOnTheInventorysPositions) {
  // The inventory lists the GPUs in another order than the annotation.
  const k8s::StringMap an = {
      {"hami.io/node-nvidia-score", protocol::encode_pair_scores(four_gpus())}};
  auto links = node_links(an, inventory({"d", "c", "b", "a"}));
  ASSERT_TRUE(links) << links.error().message;
  ASSERT_EQ(links->size(), 4u);
  EXPECT_EQ(links->at(2, 3), 450);  // b-a
  EXPECT_EQ(links->at(0, 1), 50);   // d-c
  EXPECT_EQ(links->at(0, 3), 10);
  EXPECT_EQ(links->at(1, 1), 0);
}

TEST(NodeLinks, AsymmetricPairsTakeTheSmallerAndUnknownGpusAreSkipped) {
  const k8s::StringMap an = {
      {"hami.io/node-nvidia-score",
       R"([{"uuid":"a","score":{"b":450,"x":900}},{"uuid":"b","score":{"a":20,"c":30}},)"
       R"({"uuid":"gone","score":{"a":1800}}])"}};
  auto links = node_links(an, inventory({"a", "b", "c"}));
  ASSERT_TRUE(links) << links.error().message;
  EXPECT_EQ(links->at(0, 1), 20);  // 450 one way, 20 the other
  EXPECT_EQ(links->at(1, 2), 30);  // said one way only
  EXPECT_EQ(links->at(0, 2), 0);   // never said
}

TEST(NodeLinks, PairsWithoutP2pScoreZero) {
  auto gpus = four_gpus();
  gpus[0].peers[0].p2p = "disabled_by_regkey";  // a-b
  gpus[2].peers[2].p2p = "unknown";             // c-d: no penalty for not knowing
  const k8s::StringMap an = {{"hami.io/node-nvidia-score", protocol::encode_pair_scores(gpus)},
                             {"hami.io/node-nvidia-p2p", protocol::encode_p2p(gpus)}};
  auto links = node_links(an, inventory({"a", "b", "c", "d"}));
  ASSERT_TRUE(links) << links.error().message;
  EXPECT_EQ(links->at(0, 1), 0);
  EXPECT_EQ(links->at(2, 3), 50);
  EXPECT_EQ(links->at(0, 2), 10);
}

TEST(NodeLinks, NothingToReadIsNoTopologyAndBadTextAnError) {
  auto none = node_links({}, inventory({"a", "b"}));
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
  const k8s::StringMap one = {{"hami.io/node-nvidia-score", R"([{"uuid":"a","score":{}}])"}};
  auto single = node_links(one, inventory({"a"}));
  ASSERT_TRUE(single);
  EXPECT_TRUE(single->empty());
  auto bad = node_links({{"hami.io/node-nvidia-score", "[{"}}, inventory({"a", "b"}));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("hami.io/node-nvidia-score"), std::string::npos);
  auto bad_p2p =
      node_links({{"hami.io/node-nvidia-score", "[]"}, {"hami.io/node-nvidia-p2p", "{}"}},
                 inventory({"a", "b"}));
  EXPECT_FALSE(bad_p2p);
}

// The GPUs a topology-aware pod of two gets on the cached node.
std::vector<std::string> two_gpu_pick(const ClusterCache& cache, const std::string& node) {
  fit::PodOptions o;
  o.gpu_policy = *fit::parse_gpu_policy("topology-aware");
  fit::ContainerRequest c;
  c.nums = 2;
  c.mem_mib = 1000;
  auto pod = fit::PreparedPod::make(fit::PodRequest{{c}}, o);
  EXPECT_TRUE(pod);
  return cache.read([&](const ClusterCache::View& v) {
    std::vector<std::string> out;
    const fit::NodeDevices* n = v.node(node);
    if (n == nullptr || !pod) return out;
    auto placed = fit::place_pod(*n, *pod);
    EXPECT_TRUE(placed) << placed.error().message;
    if (placed)
      for (const auto& d : (*placed)[0])
        out.push_back(d.uuid);
    return out;
  });
}

TEST(NodeLinks, TheFeedKeepsTheCachesScoresAndTheFitUsesThem) {
  ClusterCache cache;
  CacheFeed feed{cache};
  auto node = test::sched_node("n", 4);  // GPU-n-0 .. GPU-n-3, all NUMA 0
  // GPU-n-1 and GPU-n-3 NVLinked; everything else across NUMA nodes.
  std::vector<DeviceLinks> links;
  for (int a = 0; a < 4; ++a) {
    DeviceLinks d{"GPU-n-" + std::to_string(a), {}};
    for (int b = 0; b < 4; ++b)
      if (a != b)
        d.peers.push_back({"GPU-n-" + std::to_string(b), (a % 2 && b % 2) ? 1210 : 10, "ok"});
    links.push_back(d);
  }
  const nlohmann::json old = node;
  node["metadata"]["annotations"]["hami.io/node-nvidia-score"] =
      protocol::encode_pair_scores(links);
  feed.node_updated(old, node);  // only the scores changed: still re-read
  EXPECT_EQ(two_gpu_pick(cache, "n"), (std::vector<std::string>{"GPU-n-1", "GPU-n-3"}));

  // The plugin learns that pair has no P2P: the next best is any pair (all
  // 10), the first in spread's walk.
  for (auto& d : links)
    for (auto& p : d.peers)
      if (p.score == 1210) p.p2p = "not_supported";
  const nlohmann::json before = node;
  node["metadata"]["annotations"]["hami.io/node-nvidia-p2p"] = protocol::encode_p2p(links);
  feed.node_updated(before, node);
  EXPECT_EQ(two_gpu_pick(cache, "n"), (std::vector<std::string>{"GPU-n-0", "GPU-n-1"}));
}

}  // namespace
}  // namespace hami::scheduler
