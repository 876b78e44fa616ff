#include "scheduler/in_flight.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace hami::scheduler {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

InFlightPod pod(const std::string& name, std::vector<std::string> keys,
                std::optional<int64_t> created, const std::string& node = "a") {
  return {.node = node,
          .uid = "u-" + name,
          .who = "default/" + name,
          .keys = std::move(keys),
          .created_s = created};
}

json watched(const std::string& name, const std::string& node, const std::string& phase,
             const std::string& devices) {
  return {{"metadata",
           {{"name", name},
            {"namespace", "default"},
            {"uid", "u-" + name},
            {"creationTimestamp", "2026-11-28T08:00:00Z"},
            {"annotations",
             {{"hami.io/bind-phase", phase},
              {"hami.io/vgpu-node", node},
              {"hami.io/vgpu-devices-allocated", devices}}}}},
          {"spec", {{"nodeName", node}, {"schedulerName", "hami-scheduler"}}},
          {"status", {{"phase", "Pending"}}}};
}

TEST(AllocationKeys, TheGpuCountsOfTheContainersWithGpus) {
  protocol::PodDevices d = {{},
                            {{"GPU-b", "NVIDIA", 1, 0}, {"GPU-a", "NVIDIA", 1, 0}},
                            {{"GPU-a", "NVIDIA", 1, 0}},
                            {{"GPU-c", "NVIDIA", 1, 0}}};
  EXPECT_EQ(allocation_keys(d), (std::vector<std::string>{"1", "2"}));
}

// The plugin and kubelet order two pods of one size alike only when the one
// bound first was created strictly earlier and its binding is written.
TEST(InFlightAllocations, PodsOfOneSizeWaitUnlessBothOrdersAgree) {
  InFlightAllocations f;
  ASSERT_EQ(f.claim(pod("p1", {"1"}, 100), milliseconds(0)), "");
  // p1's binding not written yet: even a later-created pod waits.
  EXPECT_EQ(f.blocker(pod("p2", {"1"}, 101)), "default/p1");
  f.written("u-p1");
  EXPECT_EQ(f.blocker(pod("p2", {"1"}, 101)), "");
  // Created in the same second, or earlier, or unknown: kubelet may admit
  // them in either order.
  EXPECT_EQ(f.blocker(pod("p2", {"1"}, 100)), "default/p1");
  EXPECT_EQ(f.blocker(pod("p2", {"1"}, 99)), "default/p1");
  EXPECT_EQ(f.blocker(pod("p2", {"1"}, std::nullopt)), "default/p1");
  // Another size, or another node: told apart.
  EXPECT_EQ(f.blocker(pod("p2", {"2"}, 100)), "");
  EXPECT_EQ(f.blocker(pod("p2", {"1"}, 100, "b")), "");
  // One container of that size is enough to confuse them (kubelet calls
  // Allocate per container).
  EXPECT_EQ(f.blocker(pod("p2", {"1", "2"}, 100)), "default/p1");
}

TEST(InFlightAllocations, BlockedOnAnswersBlockerForEachNode) {
  InFlightAllocations f;
  const std::vector<std::string> nodes{"a", "b", "c"};
  EXPECT_EQ(f.blocked_on(pod("p", {"1"}, 100), nodes), (std::vector<uint8_t>{0, 0, 0}));
  ASSERT_EQ(f.claim(pod("p1", {"1"}, 100, "a"), milliseconds(0)), "");
  ASSERT_EQ(f.claim(pod("p2", {"2"}, 100, "b"), milliseconds(0)), "");
  for (const auto& probe : {pod("p", {"1"}, 100, "z"), pod("p", {"2"}, 100, "z"),
                            pod("p", {"1", "2"}, 100, "z"), pod("p", {"4"}, 100, "z")}) {
    const std::vector<uint8_t> got = f.blocked_on(probe, nodes);
    ASSERT_EQ(got.size(), nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) {
      InFlightPod on = probe;
      on.node = nodes[i];
      EXPECT_EQ(got[i] != 0, !f.blocker(on).empty()) << nodes[i];
    }
  }
  EXPECT_EQ(f.blocked_on(pod("p", {"1", "2"}, 100), nodes), (std::vector<uint8_t>{1, 1, 0}));
}

TEST(InFlightAllocations, AClaimWaitsUntilTheWatchShowsTheOtherAllocated) {
  InFlightAllocations f;
  ASSERT_EQ(f.claim(pod("p1", {"1"}, 100), milliseconds(0)), "");
  f.written("u-p1");
  EXPECT_EQ(f.claim(pod("p2", {"1"}, 100), milliseconds(20)), "default/p1");
  std::thread plugin([&] {
    std::this_thread::sleep_for(milliseconds(50));
    f.observe(watched("p1", "a", "success", "GPU-0,NVIDIA,1000,0:;"));
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(f.claim(pod("p2", {"1"}, 100), milliseconds(5000)), "");
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(4000));
  plugin.join();
  EXPECT_EQ(f.size(), 1u);  // p2 only
}

TEST(InFlightAllocations, AFailedBindingOrADeletedPodHoldsNobodyBack) {
  InFlightAllocations f;
  ASSERT_EQ(f.claim(pod("p1", {"1"}, 100), milliseconds(0)), "");
  f.release("u-p1");
  EXPECT_EQ(f.blocker(pod("p2", {"1"}, 100)), "");
  ASSERT_EQ(f.claim(pod("p3", {"1"}, 100), milliseconds(0)), "");
  f.forget(json{{"metadata", {{"uid", "u-p3"}}}});
  EXPECT_EQ(f.size(), 0u);
}

// A restarted scheduler learns the pods in flight from the watch; a pod not
// yet bound says nothing, so it cannot undo a claim made before its binding.
TEST(InFlightAllocations, TheWatchTeachesPodsInFlightAndNeverUndoesAClaim) {
  InFlightAllocations f;
  f.observe(watched("p1", "a", "allocating", "GPU-0,NVIDIA,1000,0:;"));
  EXPECT_EQ(f.blocker(pod("p2", {"1"}, 0)), "default/p1");
  // Created 2026-11-28T08:00:00Z; a pod created a second later is ordered.
  EXPECT_EQ(f.blocker(pod("p2", {"1"}, 1795852801)), "");
  EXPECT_EQ(f.blocker(pod("p2", {"1"}, 1795852800)), "default/p1");

  ASSERT_EQ(f.claim(pod("p3", {"2"}, 100), milliseconds(0)), "");
  json unbound = watched("p3", "", "", "");
  unbound["spec"].erase("nodeName");
  f.observe(unbound);
  EXPECT_EQ(f.blocker(pod("p4", {"2"}, 100)), "default/p3");
  // Bad annotations from the watch are nobody's: the plugin refuses them.
  f.observe(watched("p5", "a", "allocating", "not-a-decision"));
  // Nor a decision no trusted scheduler made (a forged pod, spec.nodeName
  // preset): it must not hold honest pods back.
  json forged = watched("p6", "a", "allocating", "GPU-0,NVIDIA,1,1:;");
  forged["spec"]["schedulerName"] = "nobody";
  f.observe(forged);
  EXPECT_EQ(f.size(), 2u);  // p1 and p3
  f.observe(json("garbage"));
  f.observe(json::object());
}

}  // namespace
}  // namespace hami::scheduler
