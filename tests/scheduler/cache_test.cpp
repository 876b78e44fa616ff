// The incremental cache fed by watch events: node registration, pod
// allocation annotations, reservations and their replacement, deletion,
// dynamic MIG profiles and the placements pods hold.
#include <gtest/gtest.h>

#include <algorithm>

#include "fit/score.hpp"
#include "protocol/mig_allocations.hpp"
#include "scheduler/cache.hpp"
#include "scheduler/feed.hpp"
#include "scheduler/helpers.hpp"

namespace hami::scheduler {
namespace {

using test::placed_pod;
using test::sched_node;

struct Usage {
  int tenants, mem, cores;
  bool operator==(const Usage&) const = default;
};

Usage usage(const ClusterCache& c, const std::string& node, size_t gpu) {
  return c.read([&](const ClusterCache::View& v) {
    const fit::NodeDevices* n = v.node(node);
    if (n == nullptr || gpu >= n->devices.size()) return Usage{-1, -1, -1};
    const auto& d = n->devices[gpu];
    return Usage{d.used_tenants, d.used_mem_mib, d.used_cores};
  });
}

class CacheTest : public ::testing::Test {
 protected:
  ClusterCache cache;
  CacheFeed feed{cache};
};

TEST_F(CacheTest, NodeRegistrationBecomesInventory) {
  feed.node_changed(sched_node("a", 2, 16000));
  cache.read([](const ClusterCache::View& v) {
    const fit::NodeDevices* n = v.node("a");
    EXPECT_NE(n, nullptr);
    if (n == nullptr) return 0;
    EXPECT_EQ(n->devices.size(), 2u);
    EXPECT_EQ(n->devices[1].uuid, "GPU-a-1");
    EXPECT_EQ(n->devices[1].total_mem_mib, 16000);
    EXPECT_EQ(n->devices[1].split_count, 10);
    EXPECT_EQ(n->devices[1].type, "NVIDIA-Tesla T4");
    EXPECT_EQ(v.node_count(), 1u);
    return 0;
  });
}

TEST_F(CacheTest, NodeWithoutAnnotationIsUnregistered) {
  feed.node_changed({{"metadata", {{"name", "plain"}}}});
  EXPECT_EQ(cache.read([](const ClusterCache::View& v) { return v.node("plain"); }), nullptr);
}

TEST_F(CacheTest, BadRegistrationIsIgnoredNotFatal) {
  auto n = sched_node("bad");
  n["metadata"]["annotations"]["hami.io/node-nvidia-register"] = "[{\"id\": 5}";
  feed.node_changed(n);
  EXPECT_EQ(cache.read([](const ClusterCache::View& v) { return v.node("bad"); }), nullptr);
  EXPECT_EQ(feed.bad_objects(), 1u);
}

TEST_F(CacheTest, CordonMarksDevices) {
  auto n = sched_node("a", 2);
  n["metadata"]["annotations"]["hami.io/device-cordon"] = "GPU-a-1";
  feed.node_changed(n);
  cache.read([](const ClusterCache::View& v) {
    EXPECT_FALSE(v.node("a")->devices[0].cordoned);
    EXPECT_TRUE(v.node("a")->devices[1].cordoned);
    return 0;
  });
}

struct PodEventCase {
  const char* name;
  const char* allocated;
  const char* phase;
  Usage gpu0;
  Usage gpu1;
};

class PodEventTest : public CacheTest, public ::testing::WithParamInterface<PodEventCase> {};

TEST_P(PodEventTest, AllocationAnnotationCharges) {
  const PodEventCase& c = GetParam();
  feed.node_changed(sched_node("a", 2));
  auto p = placed_pod("p", "uid-p", "a", c.allocated);
  p["status"]["phase"] = c.phase;
  feed.pod_changed(p);
  EXPECT_EQ(usage(cache, "a", 0), c.gpu0);
  EXPECT_EQ(usage(cache, "a", 1), c.gpu1);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PodEventTest,
    ::testing::Values(
        PodEventCase{"one", "GPU-a-0,NVIDIA,3000,30:;", "Running", {1, 3000, 30}, {0, 0, 0}},
        PodEventCase{"two_gpus",
                     "GPU-a-0,NVIDIA,1000,10:GPU-a-1,NVIDIA,2000,20:;",
                     "Pending",
                     {1, 1000, 10},
                     {1, 2000, 20}},
        PodEventCase{"finished", "GPU-a-0,NVIDIA,3000,30:;", "Succeeded", {0, 0, 0}, {0, 0, 0}},
        PodEventCase{"failed", "GPU-a-0,NVIDIA,3000,30:;", "Failed", {0, 0, 0}, {0, 0, 0}},
        PodEventCase{"malformed", "GPU-a-0,NVIDIA,x,30:;", "Running", {0, 0, 0}, {0, 0, 0}},
        PodEventCase{
            "other_node_gpu", "GPU-b-0,NVIDIA,3000,30:;", "Running", {0, 0, 0}, {0, 0, 0}}),
    [](const auto& pi) { return std::string(pi.param.name); });

TEST_F(CacheTest, UpdateReplacesAndDeleteReleases) {
  feed.node_changed(sched_node("a", 2));
  feed.pod_changed(placed_pod("p", "u1", "a", "GPU-a-0,NVIDIA,3000,30:;"));
  feed.pod_changed(placed_pod("p", "u1", "a", "GPU-a-0,NVIDIA,3000,30:;"));  // resync: no double
  EXPECT_EQ(usage(cache, "a", 0), (Usage{1, 3000, 30}));
  feed.pod_changed(placed_pod("p", "u1", "a", "GPU-a-1,NVIDIA,500,5:;"));
  EXPECT_EQ(usage(cache, "a", 0), (Usage{0, 0, 0}));
  EXPECT_EQ(usage(cache, "a", 1), (Usage{1, 500, 5}));
  feed.pod_deleted(placed_pod("p", "u1", "a", "GPU-a-1,NVIDIA,500,5:;"));
  EXPECT_EQ(usage(cache, "a", 1), (Usage{0, 0, 0}));
  EXPECT_EQ(cache.read([](const ClusterCache::View& v) { return v.pod_count(); }), 0u);
}

TEST_F(CacheTest, NodeUpdateWithoutRegistrationChangeTakesNoLock) {
  const auto a = sched_node("a", 2);
  feed.node_changed(a);
  const uint64_t before = cache.stats().node_events;
  auto locked = a;
  locked["metadata"]["annotations"]["hami.io/mutex.lock"] = "2026-01-01T00:00:00Z,default,p";
  feed.node_updated(a, locked);
  EXPECT_EQ(cache.stats().node_events, before);
  auto cordoned = locked;
  cordoned["metadata"]["annotations"]["hami.io/device-cordon"] = "GPU-a-0";
  feed.node_updated(locked, cordoned);
  EXPECT_EQ(cache.stats().node_events, before + 1);
  cache.read([](const ClusterCache::View& v) {
    EXPECT_TRUE(v.node("a")->devices[0].cordoned);
    return 0;
  });
}

TEST_F(CacheTest, PodBeforeNodeCountsOnceNodeRegisters) {
  feed.pod_changed(placed_pod("p", "u1", "late", "GPU-late-1,NVIDIA,700,7:;"));
  feed.node_changed(sched_node("late", 2));
  EXPECT_EQ(usage(cache, "late", 1), (Usage{1, 700, 7}));
}

// prioritize reads the node's score from the cache: a node that registers
// after its pods were seen must be scored with them, not as empty.
TEST_F(CacheTest, NodeScoreCountsPodsSeenBeforeTheNode) {
  feed.pod_changed(placed_pod("p", "u1", "late", "GPU-late-1,NVIDIA,8000,50:;"));
  feed.node_changed(sched_node("late", 2));
  feed.node_changed(sched_node("empty", 2));
  cache.read([](const ClusterCache::View& v) {
    EXPECT_FLOAT_EQ(v.node_score("late"), fit::node_score(*v.node("late")));
    EXPECT_GT(v.node_score("late"), v.node_score("empty"));
    return 0;
  });
}

// Fitting compares GPU models by the id the cache gives each (type, mode).
TEST_F(CacheTest, SameModelSameIdOtherModelOtherId) {
  feed.node_changed(sched_node("a", 2, 16000, "NVIDIA H200"));
  feed.node_changed(sched_node("b", 1, 16000, "NVIDIA H200"));
  feed.node_changed(sched_node("c", 1, 16000, "NVIDIA A100"));
  cache.read([](const ClusterCache::View& v) {
    const uint32_t h200 = v.node("a")->devices[0].model_id;
    EXPECT_NE(h200, 0u);
    EXPECT_EQ(v.node("a")->devices[1].model_id, h200);
    EXPECT_EQ(v.node("b")->devices[0].model_id, h200);
    EXPECT_NE(v.node("c")->devices[0].model_id, 0u);
    EXPECT_NE(v.node("c")->devices[0].model_id, h200);
    return 0;
  });
}

TEST_F(CacheTest, NodeReRegistrationKeepsUsage) {
  feed.node_changed(sched_node("a", 2, 16000));
  feed.pod_changed(placed_pod("p", "u1", "a", "GPU-a-0,NVIDIA,3000,30:;"));
  feed.node_changed(sched_node("a", 2, 32000));  // memory rescaled
  EXPECT_EQ(usage(cache, "a", 0), (Usage{1, 3000, 30}));
  cache.read([](const ClusterCache::View& v) {
    EXPECT_EQ(v.node("a")->devices[0].total_mem_mib, 32000);
    return 0;
  });
  feed.node_deleted(sched_node("a"));
  EXPECT_EQ(cache.read([](const ClusterCache::View& v) { return v.node("a"); }), nullptr);
  feed.node_changed(sched_node("a", 2));  // back: its pods count again
  EXPECT_EQ(usage(cache, "a", 0), (Usage{1, 3000, 30}));
}

TEST_F(CacheTest, ReservationSurvivesAnnotationlessEventAndIsReplacedByTheRealOne) {
  feed.node_changed(sched_node("a", 2));
  cache.set_pod("u1", {.node = "a",
                       .charges = {{.uuid = "GPU-a-0", .tenants = 1, .mem_mib = 100, .cores = 1}},
                       .reserved = true});
  EXPECT_EQ(usage(cache, "a", 0), (Usage{1, 100, 1}));
  // The pod's own update from before bind's patch arrives: no allocation yet.
  feed.pod_changed(test::sched_pod("p", {{"nvidia.com/gpu", "1"}}, "u1"));
  EXPECT_EQ(usage(cache, "a", 0), (Usage{1, 100, 1}));
  // Then the annotated pod: replaces the reservation, never adds to it.
  feed.pod_changed(placed_pod("p", "u1", "a", "GPU-a-0,NVIDIA,100,1:;"));
  EXPECT_EQ(usage(cache, "a", 0), (Usage{1, 100, 1}));
  // A confirmed charge is no longer removable as a reservation (bind rollback).
  EXPECT_FALSE(cache.remove_reservation("u1", "a"));
  EXPECT_EQ(usage(cache, "a", 0), (Usage{1, 100, 1}));
}

TEST_F(CacheTest, FailedUnboundBindHoldsNothing) {
  feed.node_changed(sched_node("a", 2));
  auto p = placed_pod("p", "u1", "a", "GPU-a-0,NVIDIA,3000,30:;");
  p["spec"].erase("nodeName");
  p["metadata"]["annotations"]["hami.io/bind-phase"] = "failed";
  feed.pod_changed(p);
  EXPECT_EQ(usage(cache, "a", 0), (Usage{0, 0, 0}));
}

TEST_F(CacheTest, InitContainersCollapse) {
  feed.node_changed(sched_node("a", 1));
  auto p = placed_pod("p", "u1", "a", "GPU-a-0,NVIDIA,5000,50:;GPU-a-0,NVIDIA,1000,10:;");
  p["spec"]["initContainers"] = nlohmann::json::array({{{"name", "init"}, {"image", "x"}}});
  feed.pod_changed(p);
  // max(init 5000, app 1000), one tenant.
  EXPECT_EQ(usage(cache, "a", 0), (Usage{1, 5000, 50}));
}

// Issue 36: pods that no scheduler placed (schedulerName nobody, or
// spec.nodeName set at creation) carrying forged allocations were counted:
// four of them, never run, took every GPU of a node.
TEST_F(CacheTest, ForgedDecisionsHoldNothing) {
  feed.node_changed(sched_node("a", 2, 16000));
  const std::string full = "GPU-a-0,NVIDIA,16000,100:GPU-a-1,NVIDIA,16000,100:;";
  auto nobody = placed_pod("nobody", "u1", "a", full);
  nobody["spec"]["schedulerName"] = "nobody";
  auto unbound = placed_pod("unbound", "u2", "a", full);
  unbound["spec"].erase("nodeName");
  unbound["metadata"]["annotations"]["hami.io/bind-phase"] = "allocating";
  auto elsewhere = placed_pod("elsewhere", "u3", "b", full);
  elsewhere["metadata"]["annotations"]["hami.io/vgpu-node"] = "a";
  for (const auto& p : {nobody, unbound, elsewhere})
    feed.pod_changed(p);
  EXPECT_EQ(usage(cache, "a", 0), (Usage{0, 0, 0}));
  EXPECT_EQ(usage(cache, "a", 1), (Usage{0, 0, 0}));
  EXPECT_EQ(feed.refused_decisions(), 3u);
}

TEST(CacheTrustTest, WithAKeyOnlySignedDecisionsCount) {
  ClusterCache cache;
  protocol::DecisionTrust trust{.keys = test::test_keys(), .unsigned_schedulers = {}};
  CacheFeed feed(cache, trust);
  feed.node_changed(sched_node("a", 2, 16000));
  const std::string one = "GPU-a-0,NVIDIA,4000,40:;";
  // Unsigned, though it names our scheduler and is bound: anyone could
  // have written it (spec.nodeName preset, past the webhook).
  feed.pod_changed(placed_pod("forged", "u1", "a", one));
  EXPECT_EQ(usage(cache, "a", 0), (Usage{0, 0, 0}));
  // Signed with another key, or a signature taken from another pod, or the
  // devices raised after signing.
  feed.pod_changed(
      test::sign(placed_pod("other-key", "u2", "a", one), test::test_keys(std::string(40, 'x'))));
  auto copied = test::sign(placed_pod("copied", "u9", "a", one), test::test_keys());
  copied["metadata"]["uid"] = "u3";
  feed.pod_changed(copied);
  auto raised = test::sign(placed_pod("raised", "u4", "a", one), test::test_keys());
  raised["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"] = "GPU-a-0,NVIDIA,1,1:;";
  feed.pod_changed(raised);
  EXPECT_EQ(usage(cache, "a", 0), (Usage{0, 0, 0}));
  EXPECT_EQ(feed.refused_decisions(), 4u);
  // The scheduler's own.
  feed.pod_changed(test::sign(placed_pod("ours", "u5", "a", one), test::test_keys()));
  EXPECT_EQ(usage(cache, "a", 0), (Usage{1, 4000, 40}));
}

TEST(CacheTrustTest, UpstreamsUnsignedPodsCountWhenItsSchedulerIsTrusted) {
  ClusterCache cache;
  CacheFeed feed(cache, {.keys = test::test_keys(), .unsigned_schedulers = {"hami-upstream"}});
  feed.node_changed(sched_node("a", 1, 16000));
  auto upstream = placed_pod("up", "u1", "a", "GPU-a-0,NVIDIA,2000,20:;");
  upstream["spec"]["schedulerName"] = "hami-upstream";
  feed.pod_changed(upstream);
  EXPECT_EQ(usage(cache, "a", 0), (Usage{1, 2000, 20}));
}

// A counted pod keeps holding its GPU whatever happens to its annotations
// (its owner removing them to free the GPU for more pods), until it ends.
TEST(CacheTrustTest, ACountedPodStaysCountedUntilItEnds) {
  ClusterCache cache;
  CacheFeed feed(cache, {.keys = test::test_keys(), .unsigned_schedulers = {}});
  feed.node_changed(sched_node("a", 1, 16000));
  auto p = test::sign(placed_pod("p", "u1", "a", "GPU-a-0,NVIDIA,4000,40:;"), test::test_keys());
  feed.pod_changed(p);
  auto stripped = p;
  stripped["metadata"]["annotations"] = nlohmann::json::object();
  feed.pod_changed(stripped);
  EXPECT_EQ(usage(cache, "a", 0), (Usage{1, 4000, 40}));
  auto lowered = p;
  lowered["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"] = "GPU-a-0,NVIDIA,1,1:;";
  feed.pod_changed(lowered);
  EXPECT_EQ(usage(cache, "a", 0), (Usage{1, 4000, 40}));
  stripped["status"]["phase"] = "Succeeded";
  feed.pod_changed(stripped);
  EXPECT_EQ(usage(cache, "a", 0), (Usage{0, 0, 0}));
}

// Dynamic MIG: a pod of the H100 of test::mig_node holding a 2g.20gb at
// `start`, as our scheduler's bind records it.
nlohmann::json mig_pod(const std::string& name, const std::string& uid, unsigned start) {
  auto p = placed_pod(name, uid, "m", "GPU-m-0,NVIDIA,20000,0:;");
  p["metadata"]["annotations"][protocol::kMigAllocations] = protocol::encode_mig_allocations(
      {{.gpu_uuid = "GPU-m-0", .profile = "2g.20gb", .placement = {start, 2}}});
  return p;
}

// Node m's GPU's taken placements, by start (the cache keeps no order).
std::vector<protocol::MigPlacement> mig_taken(const ClusterCache& c) {
  auto out = c.read([](const ClusterCache::View& v) {
    const fit::NodeDevices* n = v.node("m");
    return n == nullptr ? std::vector<protocol::MigPlacement>{} : n->devices[0].mig_taken;
  });
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
  return out;
}

using Taken = std::vector<protocol::MigPlacement>;

// The registration's migProfiles become the GPU's profiles; every live pod's
// placements are taken, whatever the device plugin adds to its entries, and
// freed when the pod goes.
TEST(CacheMigTest, ProfilesFromTheRegistrationPlacementsFromLivePods) {
  ClusterCache cache;
  protocol::DecisionTrust trust{.keys = test::test_keys(), .unsigned_schedulers = {}};
  CacheFeed feed(cache, trust);
  feed.node_changed(test::mig_node("m"));
  cache.read([](const ClusterCache::View& v) {
    const fit::NodeDevices* n = v.node("m");
    EXPECT_NE(n, nullptr);
    if (n == nullptr) return 0;
    const auto& profiles = n->devices[0].mig_profiles;
    EXPECT_EQ(profiles.size(), 4u);
    if (profiles.size() == 4) {
      EXPECT_EQ(profiles[1], (fit::MigProfileSpec{"2g.20gb", 20096, 2, {{0, 2}, {2, 2}, {4, 2}}}));
    }
    return 0;
  });
  EXPECT_EQ(mig_taken(cache), Taken{});

  auto p1 = test::sign(mig_pod("p1", "u1", 0), test::test_keys());
  auto p2 = test::sign(mig_pod("p2", "u2", 2), test::test_keys());
  feed.pod_changed(p1);
  feed.pod_changed(p2);
  EXPECT_EQ(mig_taken(cache), (Taken{{0, 2}, {2, 2}}));
  // The plugin records the instance it made: still p1's, counted once.
  auto allocs = *protocol::decode_mig_allocations(
      p1["metadata"]["annotations"][protocol::kMigAllocations].get<std::string>());
  allocs[0].mig_uuid = "MIG-1";
  allocs[0].gpu_instance_id = 5;
  allocs[0].compute_instance_id = 0;
  p1["metadata"]["annotations"][protocol::kMigAllocations] =
      protocol::encode_mig_allocations(allocs);
  feed.pod_changed(p1);
  EXPECT_EQ(feed.refused_decisions(), 0u);
  EXPECT_EQ(mig_taken(cache), (Taken{{0, 2}, {2, 2}}));
  // A new registration keeps what the pods hold.
  feed.node_changed(test::mig_node("m"));
  EXPECT_EQ(mig_taken(cache), (Taken{{0, 2}, {2, 2}}));
  feed.pod_deleted(p1);
  EXPECT_EQ(mig_taken(cache), (Taken{{2, 2}}));
  p2["status"]["phase"] = "Succeeded";
  feed.pod_changed(p2);
  EXPECT_EQ(mig_taken(cache), Taken{});
}

// Profiles count only on a GPU in mig mode: on a time-sliced one they would
// let its pods skip the GPU's core checks.
TEST(CacheMigTest, ProfilesOnAGpuNotInMigModeAreIgnored) {
  ClusterCache cache;
  CacheFeed feed(cache);
  auto n = test::mig_node("m");
  auto devs = *protocol::decode_node_devices(
      n["metadata"]["annotations"]["hami.io/node-nvidia-register"].get<std::string>());
  devs[0].mode = "hami-core";
  n["metadata"]["annotations"]["hami.io/node-nvidia-register"] =
      protocol::encode_node_devices(devs);
  feed.node_changed(n);
  EXPECT_TRUE(cache.read(
      [](const ClusterCache::View& v) { return v.node("m")->devices[0].mig_profiles.empty(); }));
}

// Only a decision we trust holds placements, and a counted pod's stay held
// whatever is done to its annotation: a forged entry neither blocks a
// placement nor frees one.
TEST(CacheMigTest, ForgedPlacementsNeitherHoldNorFree) {
  ClusterCache cache;
  protocol::DecisionTrust trust{.keys = test::test_keys(), .unsigned_schedulers = {}};
  CacheFeed feed(cache, trust);
  feed.node_changed(test::mig_node("m"));
  // Unsigned: the whole GPU claimed by a pod nobody placed.
  auto forged = mig_pod("forged", "u1", 0);
  forged["metadata"]["annotations"][protocol::kMigAllocations] = protocol::encode_mig_allocations(
      {{.gpu_uuid = "GPU-m-0", .profile = "7g.80gb", .placement = {0, 8}}});
  feed.pod_changed(forged);
  EXPECT_EQ(mig_taken(cache), Taken{});
  EXPECT_EQ(feed.refused_decisions(), 1u);

  auto ours = test::sign(mig_pod("ours", "u2", 0), test::test_keys());
  feed.pod_changed(ours);
  EXPECT_EQ(mig_taken(cache), (Taken{{0, 2}}));
  auto moved = ours;
  moved["metadata"]["annotations"][protocol::kMigAllocations] = protocol::encode_mig_allocations(
      {{.gpu_uuid = "GPU-m-0", .profile = "2g.20gb", .placement = {4, 2}}});
  feed.pod_changed(moved);
  EXPECT_EQ(mig_taken(cache), (Taken{{0, 2}}));
  auto dropped = ours;
  dropped["metadata"]["annotations"].erase(protocol::kMigAllocations);
  feed.pod_changed(dropped);
  EXPECT_EQ(mig_taken(cache), (Taken{{0, 2}}));
  EXPECT_EQ(feed.refused_decisions(), 3u);
  // A signed pod without MIG that later carries an entry: not its decision.
  auto plain =
      test::sign(placed_pod("plain", "u3", "m", "GPU-m-0,NVIDIA,1000,0:;"), test::test_keys());
  feed.pod_changed(plain);
  plain["metadata"]["annotations"][protocol::kMigAllocations] = protocol::encode_mig_allocations(
      {{.gpu_uuid = "GPU-m-0", .profile = "2g.20gb", .placement = {2, 2}}});
  feed.pod_changed(plain);
  EXPECT_EQ(mig_taken(cache), (Taken{{0, 2}}));
  EXPECT_EQ(usage(cache, "m", 0), (Usage{2, 21000, 0}));
}

}  // namespace
}  // namespace hami::scheduler
