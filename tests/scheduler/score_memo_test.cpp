// The memo filter leaves for prioritize: it answers only for the same pod,
// the same cache version and exactly the same names.
#include "scheduler/score_memo.hpp"

#include <gtest/gtest.h>

#include "scheduler/cache.hpp"
#include "scheduler/feed.hpp"
#include "scheduler/helpers.hpp"

namespace hami::scheduler {
namespace {

TEST(ScoreMemo, AnswersOnlyForTheSamePodVersionAndNames) {
  ScoreMemo memo;
  const std::vector<std::string> names = {"a", "b"};
  memo.store("u1", 7, names, {1.5f, -1});
  auto hit = memo.find("u1", 7, names);
  ASSERT_TRUE(hit);
  EXPECT_EQ(*hit, (std::vector<float>{1.5f, -1}));
  EXPECT_FALSE(memo.find("u2", 7, names));                               // other pod
  EXPECT_FALSE(memo.find("u1", 8, names));                               // cache changed
  EXPECT_FALSE(memo.find("u1", 7, std::vector<std::string>{"a"}));       // fewer names
  EXPECT_FALSE(memo.find("u1", 7, std::vector<std::string>{"b", "a"}));  // other order
  EXPECT_FALSE(memo.find("", 7, names));                                 // no UID
  memo.store("", 9, names, {0, 0});  // a pod without a UID is not remembered
  EXPECT_TRUE(memo.find("u1", 7, names));
}

TEST(ScoreMemo, CacheVersionMovesWithEveryChange) {
  ClusterCache cache;
  CacheFeed feed{cache};
  auto version = [&] {
    return cache.read([](const ClusterCache::View& v) { return v.version(); });
  };
  uint64_t v = version();
  feed.node_changed(test::sched_node("a", 2));
  EXPECT_GT(version(), v);
  v = version();
  feed.pod_changed(test::placed_pod("p", "u1", "a", "GPU-a-0,NVIDIA,700,7:;"));
  EXPECT_GT(version(), v);
  v = version();
  feed.pod_deleted(test::placed_pod("p", "u1", "a", "GPU-a-0,NVIDIA,700,7:;"));
  EXPECT_GT(version(), v);
  v = version();
  feed.node_deleted(test::sched_node("a"));
  EXPECT_GT(version(), v);
}

}  // namespace
}  // namespace hami::scheduler
