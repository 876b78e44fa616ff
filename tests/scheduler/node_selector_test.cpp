#include "scheduler/node_selector.hpp"

#include <gtest/gtest.h>

#include "scheduler/cache.hpp"
#include "scheduler/helpers.hpp"

namespace hami::scheduler {
namespace {

using nlohmann::json;

json node(const std::string& name, json labels) {
  return {{"metadata", {{"name", name}, {"labels", std::move(labels)}}}};
}

TEST(NodeLabelSelector, MatchesEveryPair) {
  auto s = NodeLabelSelector::parse("gpu=on,zone=a");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->describe(), "gpu=on,zone=a");
  EXPECT_TRUE(s->matches(node("n", {{"gpu", "on"}, {"zone", "a"}, {"x", "y"}})));
  EXPECT_FALSE(s->matches(node("n", {{"gpu", "on"}})));
  EXPECT_FALSE(s->matches(node("n", {{"gpu", "on"}, {"zone", "b"}})));
  EXPECT_FALSE(s->matches(json{{"metadata", {{"name", "n"}}}}));
  EXPECT_FALSE(s->matches(json::object()));
}

TEST(NodeLabelSelector, EmptySelectsEveryNode) {
  auto s = NodeLabelSelector::parse("");
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->empty());
  EXPECT_TRUE(s->matches(json::object()));
}

TEST(NodeLabelSelector, BadTextNamesTheForm) {
  auto s = NodeLabelSelector::parse("gpu");
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("key=value"), std::string::npos);
}

json labelled(const std::string& name, json labels) {
  json n = test::sched_node(name);
  n["metadata"]["labels"] = std::move(labels);
  return n;
}

size_t nodes_in(ClusterCache& cache) {
  return cache.read([](const ClusterCache::View& v) { return v.node_count(); });
}

TEST(NodeFeedFilter, OnlyMatchingNodesReachTheCache) {
  ClusterCache cache;
  CacheFeed feed(cache);
  NodeFeedFilter nodes(*NodeLabelSelector::parse("gpu=on"), feed);
  const json off = labelled("a", {{"gpu", "off"}});
  const json on = labelled("a", {{"gpu", "on"}});
  nodes.add(off);
  EXPECT_EQ(nodes_in(cache), 0u);
  nodes.update(off, on);  // labelled now: joins
  EXPECT_EQ(nodes_in(cache), 1u);
  nodes.update(on, on);
  EXPECT_EQ(nodes_in(cache), 1u);
  nodes.update(on, off);  // label taken away: leaves
  EXPECT_EQ(nodes_in(cache), 0u);
  nodes.add(on);
  nodes.remove(on);
  EXPECT_EQ(nodes_in(cache), 0u);
  nodes.add(labelled("b", {{"gpu", "on"}}));
  nodes.remove(labelled("b", {{"gpu", "off"}}));  // deleted after an update the watch missed
  EXPECT_EQ(nodes_in(cache), 0u);
}

}  // namespace
}  // namespace hami::scheduler
