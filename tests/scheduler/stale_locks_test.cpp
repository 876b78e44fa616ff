// Node locks whose pod a retry bound to another node are reported once, in
// either order of the two watch events; live locks, other schedulers' pods
// and locks naming no pod are left alone.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/node_lock.hpp"
#include "scheduler/stale_locks.hpp"

namespace hami::scheduler {
namespace {

using nlohmann::json;
using Released = std::tuple<std::string, std::string, std::string>;

json node(const std::string& name, const std::string& lock = "") {
  json n = {{"metadata", {{"name", name}}}};
  if (!lock.empty()) n["metadata"]["annotations"]["hami.io/mutex.lock"] = lock;
  return n;
}

std::string lock_by(const std::string& pod) {
  return protocol::format_node_lock(std::chrono::system_clock::now(), "default", pod);
}

json pod(const std::string& name, const std::string& bound_to, bool ours = true) {
  json p = {{"metadata", {{"name", name}, {"namespace", "default"}}}, {"spec", json::object()}};
  if (!bound_to.empty()) p["spec"]["nodeName"] = bound_to;
  if (ours) p["metadata"]["annotations"]["hami.io/vgpu-node"] = bound_to.empty() ? "a" : bound_to;
  return p;
}

class StaleLocksTest : public ::testing::Test {
 protected:
  std::vector<Released> released;
  StaleLocks stale{[this](const std::string& n, const std::string& ns, const std::string& p) {
    released.emplace_back(n, ns, p);
  }};
};

TEST_F(StaleLocksTest, LockThenPodBoundElsewhereIsReleasedOnce) {
  stale.node_seen(node("a", lock_by("p")));
  stale.pod_seen(pod("p", ""));  // pending: the lock may still be its bind's
  EXPECT_TRUE(released.empty());
  stale.pod_seen(pod("p", "b"));
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0], Released("a", "default", "p"));
  stale.pod_seen(pod("p", "b"));  // the same event again
  EXPECT_EQ(released.size(), 1u);
}

// The extender killed after locking c for p, restarted, and its retry locked
// a and bound p there: p holds two locks, and only c's is stale.
TEST_F(StaleLocksTest, APodHoldingTwoLocksAfterARetryReleasesTheOtherNodesOnly) {
  stale.node_seen(node("c", lock_by("p")));
  stale.pod_seen(pod("p", ""));
  stale.node_seen(node("a", lock_by("p")));
  EXPECT_TRUE(released.empty());
  stale.pod_seen(pod("p", "a"));
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0], Released("c", "default", "p"));
  EXPECT_EQ(stale.holder("a"), "default/p") << "its own bind's lock stays until the plugin's";
  stale.node_seen(node("a"));  // the plugin released it
  EXPECT_EQ(stale.locks(), 0u);
  EXPECT_EQ(released.size(), 1u);
}

TEST_F(StaleLocksTest, PodBoundElsewhereThenLockIsReleased) {
  stale.pod_seen(pod("p", "b"));
  stale.node_seen(node("a", lock_by("p")));
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0], Released("a", "default", "p"));
}

TEST_F(StaleLocksTest, LiveLocksAndOthersAreLeftAlone) {
  stale.node_seen(node("a", lock_by("p")));
  stale.pod_seen(pod("p", "a"));  // bound where it locked: the plugin releases it
  stale.node_seen(node("b", lock_by("q")));
  stale.pod_seen(pod("q", "c", /*ours=*/false));       // not a pod we placed
  stale.node_seen(node("c", "2024-05-01T10:00:00Z"));  // a lock naming no pod
  stale.node_seen(node("d", lock_by("r")));
  stale.node_seen(node("d"));  // released by its plugin
  stale.pod_seen(pod("r", "e"));
  stale.node_seen(node("f", lock_by("s")));
  stale.node_gone(node("f"));
  stale.pod_seen(pod("s", "g"));
  stale.pod_seen(pod("t", "h"));
  stale.pod_gone(pod("t", "h"));
  stale.node_seen(node("i", lock_by("t")));
  EXPECT_TRUE(released.empty());
  EXPECT_EQ(stale.locks(), 3u);  // a, b, i
}

TEST_F(StaleLocksTest, ALockTakenAgainAfterAFailedReleaseIsReportedAgain) {
  stale.pod_seen(pod("p", "b"));
  stale.node_seen(node("a", lock_by("p")));
  stale.node_seen(node("a", lock_by("p")));  // the release failed; the lock is still there
  EXPECT_EQ(released.size(), 2u);
}

}  // namespace
}  // namespace hami::scheduler
