// filter / prioritize / bind on plain data: every fitting node returned with
// reasons for the rest, policy scores, reservations visible at once, a
// re-filter dropping the old reservation, every bind failure rolled back,
// and binds that lose their node (taken, or locked) redirected.
#include <gtest/gtest.h>

#include <functional>

#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "protocol/annotations.hpp"
#include "protocol/mig_allocations.hpp"
#include "scheduler/extender.hpp"
#include "scheduler/feed.hpp"
#include "scheduler/helpers.hpp"
#include "scheduler/memory_backend.hpp"

namespace hami::scheduler {
namespace {

using nlohmann::json;
using test::sched_node;
using test::sched_pod;

k8s::Pod pod_of(const json& j) {
  auto p = k8s::Pod::from_json(j);
  EXPECT_TRUE(p) << p.error().message;
  return *p;
}

class ExtenderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    feed.node_changed(sched_node("a", 2, 16000));
    feed.node_changed(sched_node("b", 2, 16000));
    feed.node_changed(sched_node("small", 1, 2000));
    ext.set_clock(
        [] { return std::chrono::system_clock::time_point(std::chrono::seconds(1700000000)); });
  }
  json add(const std::string& name, std::map<std::string, std::string> limits,
           const std::string& uid, std::map<std::string, std::string> annotations = {}) {
    json p = test::bindable_pod(name, limits, uid, annotations);
    backend.add_pod(p);
    return p;
  }

  json add_created(const std::string& name, std::map<std::string, std::string> limits,
                   const std::string& created) {
    json p = test::bindable_pod(name, limits, "u-" + name, {});
    p["metadata"]["creationTimestamp"] = created;
    backend.add_pod(p);
    return p;
  }
  // The device plugin's answer as the pod watch brings it.
  void allocated(const std::string& name) {
    json p = backend.pod("default", name);
    p["metadata"]["annotations"]["hami.io/bind-phase"] = "success";
    ext.pod_seen(p);
  }
  ClusterCache cache;
  CacheFeed feed{cache};
  SchedulerConfig config;
  Metrics metrics;
  test::MemoryBackend backend;
  Extender ext{cache, config, &backend, &metrics};
  std::vector<std::string> all{"a", "b", "small", "ghost"};
};

TEST_F(ExtenderTest, FilterReturnsEveryFittingNodeAndWhyTheOthersFail) {
  json p = add("p", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}}, "u1");
  FilterResult r = ext.filter(pod_of(p), all);
  EXPECT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.nodes, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.failed.at("small"), "1/1 CardInsufficientMemory");
  EXPECT_EQ(r.failed.at("ghost"), "node unregistered");
  EXPECT_EQ(metrics.failures(Verb::kFilter, "NoNodeFits"), 0u);
}

// Registration with one GPU per mode given ("hami-core" or "mps").
json node_with_modes(const std::string& name, const std::vector<std::string>& modes) {
  std::vector<protocol::NodeDevice> devs;
  for (size_t i = 0; i < modes.size(); ++i) {
    devs.push_back({.id = "GPU-" + name + "-" + std::to_string(i),
                    .index = static_cast<int32_t>(i),
                    .count = 10,
                    .devmem = 16000,
                    .devcore = 100,
                    .type = "NVIDIA-Tesla T4",
                    .mode = modes[i],
                    .health = true});
  }
  json n = sched_node(name, 0);
  n["metadata"]["annotations"]["hami.io/node-nvidia-register"] =
      protocol::encode_node_devices(devs);
  return n;
}

// A GPU in mps mode serves only pods asking nvidia.com/vgpu-mode: mps; the
// others never land there, and the MPS pods never on a time-sliced GPU, even
// on a node with one GPU of each.
TEST_F(ExtenderTest, SharingModesNeverMixOnOneGpu) {
  feed.node_changed(node_with_modes("mixed", {"hami-core", "mps"}));
  feed.node_changed(node_with_modes("mps", {"mps"}));
  const std::vector<std::string> nodes{"a", "mixed", "mps"};
  const std::map<std::string, std::string> limits{
      {"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}, {"nvidia.com/gpucores", "20"}};
  const std::map<std::string, std::string> mps{{"nvidia.com/vgpu-mode", "mps"}};

  FilterResult plain = ext.filter(pod_of(add("plain", limits, "u-plain")), nodes);
  EXPECT_EQ(plain.nodes, (std::vector<std::string>{"a", "mixed"}));
  EXPECT_EQ(plain.failed.at("mps"), "1/1 CardTypeMismatch");
  FilterResult m = ext.filter(pod_of(add("m", limits, "u-m", mps)), nodes);
  EXPECT_EQ(m.nodes, (std::vector<std::string>{"mixed", "mps"}));
  EXPECT_EQ(m.failed.at("a"), "2/2 CardTypeMismatch");

  // Bind pods of both kinds onto the mixed node in turn: each lands on the
  // GPU of its mode, whatever the other GPU's load says about spreading.
  for (int k = 0; k < 8; ++k) {
    const bool is_mps = k % 2 == 0;
    const std::string name = (is_mps ? "mps-" : "ts-") + std::to_string(k);
    const std::map<std::string, std::string> an =
        is_mps ? mps : std::map<std::string, std::string>{};
    add(name, limits, "u-" + name, an);
    ASSERT_EQ(ext.bind({"default", name, "u-" + name, "mixed"}), "") << name;
    backend.release_all_locks();
    const std::string alloc =
        backend.pod("default", name)["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"];
    EXPECT_EQ(alloc, std::string(is_mps ? "GPU-mixed-1" : "GPU-mixed-0") + ",NVIDIA,1000,20:;")
        << name;
  }
  // The time-sliced GPU now has room for a 16000 - 4000 MiB pod; the MPS one
  // too, but a plain pod is still not sent there.
  FilterResult big = ext.filter(
      pod_of(add("big", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "1000"}}, "u-big")),
      std::vector<std::string>{"mixed"});
  EXPECT_TRUE(big.nodes.empty());
  EXPECT_EQ(big.failed.at("mixed"), "1/2 CardTypeMismatch, 1/2 AllocatedCardsInsufficientRequest");
}

// An MPS server serves one Linux user at a time (another user's clients wait
// until the first user's exit), so an MPS GPU takes pods of one user: the
// pod's runAsUser (its GPU container's, else the pod's; none declared counts
// as one more user). Time-sliced GPUs do not care.
TEST_F(ExtenderTest, AnMpsGpuTakesPodsOfOneUserOnly) {
  feed.node_changed(node_with_modes("mps", {"mps"}));
  const std::vector<std::string> nodes{"mps"};
  const std::map<std::string, std::string> limits{
      {"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}, {"nvidia.com/gpucores", "20"}};
  const std::map<std::string, std::string> mps{{"nvidia.com/vgpu-mode", "mps"}};
  auto as_user = [](json p, std::optional<int64_t> pod_uid, std::optional<int64_t> ctr_uid) {
    if (pod_uid) p["spec"]["securityContext"]["runAsUser"] = *pod_uid;
    if (ctr_uid) p["spec"]["containers"][0]["securityContext"]["runAsUser"] = *ctr_uid;
    return p;
  };
  // The first pod, user 1000, is placed and seen back from the API server.
  json first = as_user(test::bindable_pod("first", limits, "u-first", mps), 1000, std::nullopt);
  backend.add_pod(first);
  ASSERT_EQ(ext.bind({"default", "first", "u-first", "mps"}), "");
  backend.release_all_locks();
  feed.pod_changed(backend.pod("default", "first"));

  // Root (container level beats the pod's 1000) is kept off with the reason.
  json root = as_user(test::bindable_pod("root", limits, "u-root", mps), 1000, 0);
  FilterResult r = ext.filter(pod_of(root), nodes);
  EXPECT_TRUE(r.nodes.empty());
  EXPECT_EQ(r.failed.at("mps"), "1/1 MpsUserMismatch");
  // So is a pod that declares no user.
  json unset = test::bindable_pod("unset", limits, "u-unset", mps);
  EXPECT_EQ(ext.filter(pod_of(unset), nodes).failed.at("mps"), "1/1 MpsUserMismatch");
  // The same user joins.
  json same = as_user(test::bindable_pod("same", limits, "u-same", mps), std::nullopt, 1000);
  EXPECT_EQ(ext.filter(pod_of(same), nodes).nodes, nodes);

  // Once the first user's pod is gone, another user may have the GPU.
  feed.pod_deleted(backend.pod("default", "first"));
  EXPECT_EQ(ext.filter(pod_of(root), nodes).nodes, nodes);
}

TEST_F(ExtenderTest, PodWithoutOurResourcesPassesThrough) {
  json p = add("plain", {{"cpu", "1"}}, "u2");
  FilterResult r = ext.filter(pod_of(p), all);
  EXPECT_FALSE(r.ours);
  EXPECT_EQ(r.nodes, all);
  EXPECT_TRUE(r.failed.empty());
}

TEST_F(ExtenderTest, BadRequestIsAnError) {
  json p = add("bad", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3.5"}}, "u3");
  FilterResult r = ext.filter(pod_of(p), all);
  EXPECT_NE(r.error.find("nvidia.com/gpumem"), std::string::npos) << r.error;
  json q = add("badpol", {{"nvidia.com/gpu", "1"}}, "u4",
               {{"hami.io/gpu-scheduler-policy", "bin-pack"}});
  r = ext.filter(pod_of(q), all);
  EXPECT_NE(r.error.find("hami.io/gpu-scheduler-policy"), std::string::npos) << r.error;
}

TEST_F(ExtenderTest, PrioritizeFollowsNodePolicy) {
  feed.pod_changed(test::placed_pod("busy", "ub", "b", "GPU-b-0,NVIDIA,8000,50:;"));
  json bin =
      add("p", {{"nvidia.com/gpu", "1"}}, "u1", {{"hami.io/node-scheduler-policy", "binpack"}});
  auto pb = ext.prioritize(pod_of(bin), std::vector<std::string>{"a", "b", "ghost"});
  ASSERT_TRUE(pb);
  ASSERT_EQ(pb->size(), 3u);
  EXPECT_EQ((*pb)[2].score, 0);
  // b's node score: 10·(1/20 + 50/200 + 8000/32000) = 5.5 of 30, a's 0: the
  // busiest of the nodes asked about gets 10, the idlest 0.
  EXPECT_EQ((*pb)[0].score, 0);
  EXPECT_EQ((*pb)[1].score, 10) << "binpack prefers the busier node b";
  json spr =
      add("q", {{"nvidia.com/gpu", "1"}}, "u2", {{"hami.io/node-scheduler-policy", "spread"}});
  auto ps = ext.prioritize(pod_of(spr), std::vector<std::string>{"a", "b"});
  ASSERT_TRUE(ps);
  EXPECT_EQ((*ps)[0].score, 10) << "spread prefers the idle node a";
  EXPECT_EQ((*ps)[1].score, 0);
  for (const auto& h : *ps) {
    EXPECT_GE(h.score, 0);
    EXPECT_LE(h.score, 10);
  }
}

// prioritize answers from filter's scores only while they are still the
// cache's: after a change (another pod placed) it scores the nodes again.
TEST_F(ExtenderTest, PrioritizeAfterFilterScoresTheCacheAsItIsNow) {
  json p =
      add("p", {{"nvidia.com/gpu", "1"}}, "u1", {{"hami.io/node-scheduler-policy", "binpack"}});
  const std::vector<std::string> ab{"a", "b"};
  FilterResult f = ext.filter(pod_of(p), ab);
  ASSERT_EQ(f.nodes, ab);
  auto before = ext.prioritize(pod_of(p), f.nodes);
  ASSERT_TRUE(before);
  EXPECT_EQ((*before)[0].score, (*before)[1].score) << "both nodes idle";
  // Between filter and prioritize another pod lands on b.
  ext.filter(pod_of(p), ab);
  feed.pod_changed(test::placed_pod("busy", "ub", "b", "GPU-b-0,NVIDIA,8000,50:;"));
  auto after = ext.prioritize(pod_of(p), f.nodes);
  ASSERT_TRUE(after);
  EXPECT_EQ((*after)[0].score, 0);
  EXPECT_EQ((*after)[1].score, 10) << "binpack now prefers the busier node b";
  // And the same answer as an extender that never filtered this pod.
  Extender fresh{cache, config, &backend, nullptr};
  auto want = fresh.prioritize(pod_of(p), f.nodes);
  ASSERT_TRUE(want);
  EXPECT_EQ((*after)[0].score, (*want)[0].score);
  EXPECT_EQ((*after)[1].score, (*want)[1].score);
}

TEST_F(ExtenderTest, BindWritesUpstreamAnnotationsAndReservesAtOnce) {
  json p = add("p", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "10000"}}, "u1");
  EXPECT_EQ(ext.bind({"default", "p", "u1", "small"})
                .rfind("pod no longer fits node small: 1/1 CardInsufficientMemory; ", 0),
            0u);
  ASSERT_EQ(ext.bind({"default", "p", "u1", "a"}), "");
  const json after = backend.pod("default", "p");
  const json& an = after["metadata"]["annotations"];
  EXPECT_EQ(an["hami.io/vgpu-node"], "a");
  EXPECT_EQ(an["hami.io/vgpu-time"], "1700000000");
  EXPECT_EQ(an["hami.io/bind-time"], "1700000000");
  EXPECT_EQ(an["hami.io/bind-phase"], "allocating");
  EXPECT_EQ(an["hami.io/vgpu-devices-to-allocate"], an["hami.io/vgpu-devices-allocated"]);
  const std::string alloc = an["hami.io/vgpu-devices-allocated"];
  EXPECT_TRUE(alloc == "GPU-a-0,NVIDIA,10000,0:;" || alloc == "GPU-a-1,NVIDIA,10000,0:;") << alloc;
  EXPECT_EQ(after["spec"]["nodeName"], "a");
  EXPECT_EQ(backend.lock_holder("a"), "default/p");
  // The next filter sees the reservation at once: a second 10000 MiB pod fits
  // only the other GPU of a, and not twice.
  backend.release_all_locks();
  json q = add("q", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "10000"}}, "u2");
  FilterResult r = ext.filter(pod_of(q), std::vector<std::string>{"a", "b"});
  EXPECT_EQ(r.nodes, (std::vector<std::string>{"b"}));
  EXPECT_EQ(r.failed.at("a"), "1/2 CardInsufficientMemory, 1/2 AllocatedCardsInsufficientRequest");
}

// With a decision key, bind signs what it decided, and the watch bringing
// the bound pod back counts it (and only it) under the same trust.
TEST_F(ExtenderTest, BindSignsItsDecision) {
  config.decisions = {.keys = test::test_keys(), .unsigned_schedulers = {}};
  add("p", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}}, "u1");
  ASSERT_EQ(ext.bind({"default", "p", "u1", "a"}), "");
  const json after = backend.pod("default", "p");
  const std::string sig = after["metadata"]["annotations"].value("hami.io/decision-signature", "");
  EXPECT_EQ(sig.rfind("v1:", 0), 0u) << sig;
  auto bound = k8s::Pod::from_json(after);
  ASSERT_TRUE(bound);
  EXPECT_EQ(protocol::decision_refusal(*bound, config.decisions), "");
  EXPECT_EQ(test::sign(after, test::test_keys()), after)
      << "the signature covers uid, node, devices";
}

// Dynamic MIG (docs/mig-dynamic.md): on a GPU registering migProfiles each
// pod gets the smallest profile that holds it, at a placement no other live
// pod holds, recorded in the binding and covered by the signature. A pod gone
// frees its placement, a forged claim holds none, and a full GPU fails with
// CardMigTopologyInfeasible. Under either node protocol alike.
TEST_F(ExtenderTest, DynamicMigPodsGetTheirOwnPlacementsRecordedAndSigned) {
  config.decisions = {.keys = test::test_keys(), .unsigned_schedulers = {}};
  CacheFeed watch(cache, config.decisions);
  watch.node_changed(test::mig_node("m"));
  const std::vector<std::string> nodes{"m"};
  const std::map<std::string, std::string> limits{{"nvidia.com/gpu", "1"},
                                                  {"nvidia.com/gpumem", "20000"}};
  auto with_mig = [](json p, unsigned start, unsigned size, const char* profile) {
    p["metadata"]["annotations"][protocol::kMigAllocations] = protocol::encode_mig_allocations(
        {{.gpu_uuid = "GPU-m-0", .profile = profile, .placement = {start, size}}});
    return p;
  };
  // The whole GPU claimed by a pod nobody scheduled: it holds nothing.
  json forged = test::placed_pod("forged", "u-forged", "m", "GPU-m-0,NVIDIA,1000,0:;");
  watch.pod_changed(with_mig(forged, 0, 8, "7g.80gb"));
  EXPECT_EQ(watch.refused_decisions(), 1u);

  auto bind = [&](const std::string& name) {
    json p = add(name, limits, "u-" + name);
    FilterResult f = ext.filter(pod_of(p), nodes);
    EXPECT_EQ(f.nodes, nodes) << name << ": " << (f.failed.empty() ? "" : f.failed.begin()->second);
    std::string e = ext.bind({"default", name, "u-" + name, "m"});
    backend.release_all_locks();
    return e;
  };
  auto recorded = [&](const std::string& name) {
    const json an = backend.pod("default", name)["metadata"]["annotations"];
    auto a = protocol::decode_mig_allocations(an.value(protocol::kMigAllocations, ""));
    EXPECT_TRUE(a && a->size() == 1) << name;
    return a && a->size() == 1 ? (*a)[0] : protocol::MigAllocation{};
  };
  ASSERT_EQ(bind("p1"), "");
  EXPECT_EQ(recorded("p1"), (protocol::MigAllocation{.container_index = 0,
                                                     .device_index = 0,
                                                     .gpu_uuid = "GPU-m-0",
                                                     .profile = "2g.20gb",
                                                     .placement = {0, 2}}));
  const json p1 = backend.pod("default", "p1");
  EXPECT_EQ(p1["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"],
            "GPU-m-0,NVIDIA,20000,0:;");
  EXPECT_EQ(protocol::decision_refusal(pod_of(p1), config.decisions), "");
  EXPECT_NE(protocol::decision_refusal(pod_of(with_mig(p1, 2, 2, "2g.20gb")), config.decisions), "")
      << "the signature covers the placement";
  EXPECT_EQ(test::sign(p1, test::test_keys()), p1);

  ASSERT_EQ(bind("p2"), "");
  EXPECT_EQ(recorded("p2").placement, (protocol::MigPlacement{2, 2}));
  // The watch brings p1 back bound, then its deletion: its slices are free.
  watch.pod_changed(p1);
  EXPECT_EQ(watch.refused_decisions(), 1u);
  watch.pod_deleted(p1);
  // On a node whose plugin matches pods, no lock; the record is the same.
  ext.set_matches_pods([](const std::string&) { return true; });
  const int locks = backend.lock_calls();
  ASSERT_EQ(bind("p3"), "");
  EXPECT_EQ(backend.lock_calls(), locks);
  EXPECT_EQ(recorded("p3").placement, (protocol::MigPlacement{0, 2}));
  allocated("p3");
  ASSERT_EQ(bind("p4"), "");
  EXPECT_EQ(recorded("p4").placement, (protocol::MigPlacement{4, 2}));
  // Slice 6 alone is left: no 2g.20gb anywhere, and no larger profile.
  json p5 = add("p5", limits, "u-p5");
  FilterResult full = ext.filter(pod_of(p5), nodes);
  EXPECT_TRUE(full.nodes.empty());
  EXPECT_EQ(full.failed["m"], "1/1 CardMigTopologyInfeasible");
  EXPECT_NE(ext.bind({"default", "p5", "u-p5", "m"}).find("CardMigTopologyInfeasible"),
            std::string::npos);
  // A pod that fits a 1g.10gb still gets the last slice.
  allocated("p4");
  json small = add("small", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "8000"}}, "u-small");
  ASSERT_EQ(ext.filter(pod_of(small), nodes).nodes, nodes);
  ASSERT_EQ(ext.bind({"default", "small", "u-small", "m"}), "");
  EXPECT_EQ(recorded("small").profile, "1g.10gb");
  EXPECT_EQ(recorded("small").placement, (protocol::MigPlacement{6, 1}));
}

TEST_F(ExtenderTest, ReFilterDropsThePreviousReservation) {
  json p = add("p", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "16000"}}, "u1");
  ASSERT_EQ(ext.bind({"default", "p", "u1", "a"}), "");
  backend.release_all_locks();
  // The pod comes back to filter (its binding was lost): a is free again.
  FilterResult r = ext.filter(pod_of(p), std::vector<std::string>{"a"});
  EXPECT_EQ(r.nodes, (std::vector<std::string>{"a"}));
}

struct FailureCase {
  const char* step;
  const char* reason;
};

class BindFailureTest : public ExtenderTest, public ::testing::WithParamInterface<FailureCase> {};

TEST_P(BindFailureTest, EveryFailureReleasesLockAndReservation) {
  json p = add("p", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "16000"}}, "u1");
  backend.fail_next(GetParam().step);
  const std::string err = ext.bind({"default", "p", "u1", "a"});
  EXPECT_NE(err.find("injected"), std::string::npos) << err;
  EXPECT_EQ(backend.lock_holder("a"), "");
  EXPECT_EQ(metrics.failures(Verb::kBind, GetParam().reason), 1u);
  EXPECT_EQ(backend.binds(), 0);
  // The GPUs are free again for the next pod.
  json q = add("q", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "16000"}}, "u2");
  EXPECT_EQ(ext.filter(pod_of(q), std::vector<std::string>{"a"}).nodes.size(), 1u);
  EXPECT_EQ(ext.bind({"default", "q", "u2", "a"}), "");
}

INSTANTIATE_TEST_SUITE_P(Steps, BindFailureTest,
                         ::testing::Values(FailureCase{"lock", "BindFailed"},
                                           FailureCase{"bind", "BindFailed"}),
                         [](const auto& pi) { return std::string(pi.param.step); });

TEST_F(ExtenderTest, BindReservesFromFiltersCopyBeforeReadingThePod) {
  // kube-scheduler binds asynchronously: the next pod is filtered while this
  // bind still waits for the API server. It must already see this pod.
  json p = add("p", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "16000"}}, "u1");
  json q = add("q", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "16000"}}, "u2");
  ASSERT_EQ(ext.filter(pod_of(p), all).nodes, (std::vector<std::string>{"a", "b"}));
  std::vector<std::string> q_fits;
  bool asked = false;
  backend.on_lock = [&](const std::string&) {
    asked = true;
    q_fits = ext.filter(pod_of(q), std::vector<std::string>{"a"}).nodes;
  };
  ASSERT_EQ(ext.bind({"default", "p", "u1", "a"}), "");
  ASSERT_TRUE(asked);
  EXPECT_TRUE(q_fits.empty()) << "filter during p's bind did not see p's GPU as taken";
  EXPECT_EQ(backend.pod_reads(), 0) << "filter's copy serves bind without a read";
  // Without filter's copy (a restarted extender), bind reads the pod first.
  json r = add("r", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}}, "u3");
  backend.on_lock = nullptr;
  EXPECT_EQ(ext.bind({"default", "r", "u3", "b"}), "");
  EXPECT_EQ(backend.pod_reads(), 1);
}

TEST_F(ExtenderTest, PodDeletedBeforeBindReleasesTheEarlyReservation) {
  json p = add("p", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "16000"}}, "u1");
  ASSERT_EQ(ext.filter(pod_of(p), std::vector<std::string>{"a"}).nodes.size(), 1u);
  json gone = p;
  gone["metadata"]["name"] = "gone";
  gone["metadata"]["uid"] = "u9";
  ASSERT_EQ(ext.filter(pod_of(gone), std::vector<std::string>{"a"}).nodes.size(), 1u);
  // "gone" was never stored in the backend: its binding fails after the
  // reservation, which is released.
  EXPECT_NE(ext.bind({"default", "gone", "u9", "a"}), "");
  EXPECT_EQ(ext.bind({"default", "p", "u1", "a"}), "") << "the failed bind kept its reservation";
}

TEST_F(ExtenderTest, LockHeldByAnotherPodRefusesBind) {
  json p = add("p", {{"nvidia.com/gpu", "1"}}, "u1");
  backend.set_lock("a", "default/other");
  const std::string err = ext.bind({"default", "p", "u1", "a"});
  EXPECT_NE(err.find("node lock contention"), std::string::npos) << err;
  EXPECT_EQ(backend.lock_holder("a"), "default/other");
}

// /bind placed any pending pod on any node for whoever reached the port
// (bypassing kube-scheduler's affinity and taints). Only a pending pod of
// our scheduler, on no node yet, is bound; the others keep nothing.
TEST_F(ExtenderTest, BindRefusesPodsThatAreNotOursOrNotPending) {
  struct Case {
    const char* name;
    std::function<void(json&)> change;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"volcano", [](json& p) { p["spec"]["schedulerName"] = "volcano"; },
       "pod default/volcano has schedulerName \"volcano\", not \"hami-scheduler\": this extender "
       "binds only the pods of its own scheduler"},
      {"default", [](json& p) { p["spec"]["schedulerName"] = "default-scheduler"; },
       "pod default/default has schedulerName \"default-scheduler\", not \"hami-scheduler\""},
      {"placed", [](json& p) { p["spec"]["nodeName"] = "b"; },
       "pod default/placed is already bound to node b"},
      {"running", [](json& p) { p["status"]["phase"] = "Running"; },
       "pod default/running is Running, not Pending: only a pending pod is bound"},
  };
  for (const Case& c : cases) {
    json p = test::bindable_pod(c.name, {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "16000"}},
                                std::string("u-") + c.name);
    c.change(p);
    backend.add_pod(p);
    // Filter saw it (so bind would reserve from filter's copy at once).
    ASSERT_EQ(ext.filter(pod_of(p), std::vector<std::string>{"a"}).nodes.size(), 1u);
    const std::string err = ext.bind({"default", c.name, std::string("u-") + c.name, "a"});
    EXPECT_EQ(err.substr(0, c.error.size()), c.error) << err;
    EXPECT_EQ(backend.lock_holder("a"), "") << c.name << ": the node lock was taken";
  }
  EXPECT_EQ(backend.binds(), 0);
  // Nothing was kept: a pod of ours takes both GPUs of a.
  add("ours", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "16000"}}, "u-ours");
  EXPECT_EQ(ext.bind({"default", "ours", "u-ours", "a"}), "");
}

// kube-scheduler binds asynchronously: q is filtered before p's bind has
// reserved, so both see room on a; p takes it, and q, instead of failing back
// into kube-scheduler's back-off, goes to b, which its filter also found.
TEST_F(ExtenderTest, BindThatLostTheRaceIsRedirectedToAnotherFittingNode) {
  json p = add("p", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "16000"}}, "u1");
  json q = add("q", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "16000"}}, "u2");
  ASSERT_EQ(ext.filter(pod_of(p), all).nodes, (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(ext.filter(pod_of(q), all).nodes, (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(ext.place({"default", "p", "u1", "a"}).node, "a");
  backend.release_all_locks();
  BindOutcome b = ext.place({"default", "q", "u2", "a"});
  EXPECT_EQ(b.error, "");
  EXPECT_EQ(b.node, "b");
  const json after = backend.pod("default", "q");
  EXPECT_EQ(after["spec"]["nodeName"], "b");
  EXPECT_EQ(after["metadata"]["annotations"]["hami.io/vgpu-node"], "b");
  EXPECT_EQ(after["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"],
            "GPU-b-0,NVIDIA,16000,0:GPU-b-1,NVIDIA,16000,0:;");
  EXPECT_EQ(backend.lock_holder("b"), "default/q");
  EXPECT_EQ(metrics.redirects("NoFit"), 1u);
  EXPECT_EQ(metrics.failures(Verb::kBind, "NoFit"), 0u);
}

// Binpack sends consecutive pods to the same node; while the device plugin
// has not yet released the previous pod's lock, the next goes to the best
// other node that fits (under binpack the busiest, under spread the idlest).
TEST_F(ExtenderTest, BindOnALockedNodeGoesToTheBestOtherNodeUnderThePolicy) {
  feed.node_changed(sched_node("c", 2, 16000));
  feed.pod_changed(test::placed_pod("busy", "ub", "c", "GPU-c-0,NVIDIA,8000,50:;"));
  const std::vector<std::string> nodes{"a", "b", "c"};
  for (const char* policy : {"binpack", "spread"}) {
    SCOPED_TRACE(policy);
    const std::string name = std::string("p-") + policy, uid = std::string("u-") + policy;
    json p = add(name, {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}}, uid,
                 {{"hami.io/node-scheduler-policy", policy}});
    backend.set_lock("a", "default/other");
    ASSERT_EQ(ext.filter(pod_of(p), nodes).nodes, nodes);
    BindOutcome b = ext.place({"default", name, uid, "a"});
    EXPECT_EQ(b.error, "");
    EXPECT_EQ(b.node, std::string(policy) == "binpack" ? "c" : "b");
    EXPECT_EQ(backend.lock_holder("a"), "default/other");
    EXPECT_EQ(backend.lock_holder(b.node), "default/" + name);
    backend.release_all_locks();
    feed.pod_changed(backend.pod("default", name));  // the watch brings it back
  }
  EXPECT_EQ(metrics.redirects("NodeLock"), 2u);
}

// The lock of kube-scheduler's choice is waited for (binpack sends a batch to
// one node), but by a few binds at most: each holds a request thread of the
// server, so the next goes to another node at once.
TEST_F(ExtenderTest, BeyondAFewWaitersABindGoesElsewhereAtOnce) {
  // "<prefix><i>" (GCC 12's -Wrestrict misreads operator+ on these).
  auto id = [](const char* prefix, int i) {
    std::string s(prefix);
    s.append(std::to_string(i));
    return s;
  };
  config.node_lock_wait = std::chrono::seconds(30);
  backend.set_lock("a", "default/other");
  backend.block_waits();
  for (int i = 0; i <= kMaxLockWaiters; ++i) {
    json p = add(id("w", i), {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}}, id("u", i));
    ASSERT_EQ(ext.filter(pod_of(p), std::vector<std::string>{"a", "b"}).nodes.size(), 2u);
  }
  std::vector<std::thread> waiters;
  for (int i = 0; i < kMaxLockWaiters; ++i)
    waiters.emplace_back([this, n = id("w", i), u = id("u", i)] {
      ext.place({"default", n, u, "a"});
    });
  for (int i = 0; i < 500 && backend.waiting() < kMaxLockWaiters; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(backend.waiting(), kMaxLockWaiters);
  auto done = std::async(std::launch::async, [&] {
    return ext.place({"default", id("w", kMaxLockWaiters), id("u", kMaxLockWaiters), "a"});
  });
  const bool at_once = done.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  backend.unblock_waits();
  for (auto& t : waiters)
    t.join();
  ASSERT_TRUE(at_once) << "the bind past the waiters waited too";
  BindOutcome b = done.get();
  EXPECT_EQ(b.error, "");
  EXPECT_EQ(b.node, "b");
}

// A bind whose deadline passed before it started (it waited that long for
// a worker) answers an error at once, takes no lock and leaves nothing
// reserved: kube-scheduler schedules the pod again instead of timing out
// while the bind goes on.
TEST_F(ExtenderTest, ABindPastItsDeadlineAnswersAtOnceAndTouchesNothing) {
  json p = add("p", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}}, "u1");
  ASSERT_FALSE(ext.filter(pod_of(p), all).nodes.empty());
  BindRequest r{.ns = "default", .name = "p", .uid = "u1", .node = "a"};
  r.deadline = std::chrono::steady_clock::now() - std::chrono::milliseconds(1);
  BindOutcome b = ext.place(r);
  EXPECT_NE(b.error.find("deadline"), std::string::npos) << b.error;
  EXPECT_NE(b.error.find("schedules the pod again"), std::string::npos) << b.error;
  EXPECT_EQ(backend.lock_calls(), 0);
  EXPECT_EQ(backend.binds(), 0);
  EXPECT_EQ(metrics.failures(Verb::kBind, "BindDeadline"), 1u);
  EXPECT_FALSE(cache.read([](const ClusterCache::View& v) { return v.pod("u1") != nullptr; }));
  // The same bind in time goes through.
  EXPECT_EQ(ext.place({.ns = "default", .name = "p", .uid = "u1", .node = "a"}).error, "");
}

// The wait for another pod's node lock never runs past the bind deadline,
// whatever --node-lock-wait says.
TEST_F(ExtenderTest, TheLockWaitNeverRunsPastTheBindDeadline) {
  config.node_lock_wait = std::chrono::seconds(30);
  backend.set_lock("a", "default/other");
  json p = add("p", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}}, "u1");
  ASSERT_EQ(ext.filter(pod_of(p), std::vector<std::string>{"a"}).nodes.size(), 1u);
  BindRequest r{.ns = "default", .name = "p", .uid = "u1", .node = "a"};
  r.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  BindOutcome b = ext.place(r);
  EXPECT_NE(b.error.find("node lock contention"), std::string::npos) << b.error;
  EXPECT_GT(backend.last_wait().count(), 0);
  EXPECT_LE(backend.last_wait(), std::chrono::seconds(2));
}

// On a node whose device plugin matches pods itself, bind takes no node lock
// (another pod's lock there stops nothing), so several pods of one node are
// in flight at once; the cache's reservations alone keep them apart. Other
// nodes keep upstream's lock exactly.
TEST_F(ExtenderTest, NodesWhosePluginMatchesPodsAreBoundWithoutTheLock) {
  ext.set_matches_pods([](const std::string& node) { return node == "a"; });
  backend.set_lock("a", "default/other");
  const std::map<std::string, std::string> limits{{"nvidia.com/gpu", "1"},
                                                  {"nvidia.com/gpumem", "8000"}};
  int second = 0;
  for (const char* name : {"p1", "p2", "p3", "p4"}) {
    // Created a second apart: the plugin and kubelet order them alike.
    json p = add_created(name, limits, "2026-11-28T08:00:0" + std::to_string(second++) + "Z");
    ASSERT_FALSE(ext.filter(pod_of(p), std::vector<std::string>{"a"}).nodes.empty()) << name;
    EXPECT_EQ(ext.bind({"default", name, std::string("u-") + name, "a"}), "") << name;
  }
  EXPECT_EQ(backend.lock_calls(), 0);
  EXPECT_EQ(backend.lock_holder("a"), "default/other");
  EXPECT_EQ(backend.binds(), 4);
  // Two GPUs of 16000 MiB hold four pods of 8000: the fifth does not fit.
  json p5 = add("p5", limits, "u-p5");
  ext.filter(pod_of(p5), std::vector<std::string>{"a"});
  EXPECT_NE(ext.bind({"default", "p5", "u-p5", "a"}), "");
  // Node b is not marked: the lock is taken as upstream does.
  json q = add("q", limits, "u-q");
  ASSERT_FALSE(ext.filter(pod_of(q), std::vector<std::string>{"b"}).nodes.empty());
  EXPECT_EQ(ext.bind({"default", "q", "u-q", "b"}), "");
  EXPECT_EQ(backend.lock_calls(), 1);
  EXPECT_EQ(backend.lock_holder("b"), "default/q");
}

// Pods the plugin could not tell apart (as many GPUs, created in the same
// second) are never in flight together on one node: the second waits until
// the watch shows the first allocated. A pod created a second later, or of
// another size, does not wait.
TEST_F(ExtenderTest, PodsThePluginCouldConfuseAreNeverInFlightTogether) {
  config.node_lock_wait = std::chrono::milliseconds(200);
  ext.set_matches_pods([](const std::string&) { return true; });
  const std::map<std::string, std::string> one{{"nvidia.com/gpu", "1"},
                                               {"nvidia.com/gpumem", "1000"}};
  const std::map<std::string, std::string> two{{"nvidia.com/gpu", "2"},
                                               {"nvidia.com/gpumem", "1000"}};
  const std::vector<std::string> only_a{"a"};
  std::vector<json> pods = {add_created("p1", one, "2026-11-28T08:00:00Z"),
                            add_created("p2", one, "2026-11-28T08:00:00Z"),
                            add_created("p3", one, "2026-11-28T08:00:01Z"),
                            add_created("q", two, "2026-11-28T08:00:00Z")};
  for (const json& p : pods)
    ASSERT_FALSE(ext.filter(pod_of(p), only_a).nodes.empty());
  EXPECT_EQ(ext.bind({"default", "p1", "u-p1", "a"}), "");
  const std::string e = ext.bind({"default", "p2", "u-p2", "a"});
  EXPECT_NE(e.find("could not tell the two apart"), std::string::npos) << e;
  EXPECT_EQ(ext.bind({"default", "p3", "u-p3", "a"}), "");
  EXPECT_EQ(ext.bind({"default", "q", "u-q", "a"}), "");
  EXPECT_EQ(backend.binds(), 3);
  allocated("p1");
  allocated("p3");
  json p2 = backend.pod("default", "p2");
  ASSERT_FALSE(ext.filter(pod_of(p2), only_a).nodes.empty());
  EXPECT_EQ(ext.bind({"default", "p2", "u-p2", "a"}), "");
  EXPECT_EQ(backend.lock_calls(), 0);
}

// When every node that fits is allocating a pod this one could be confused
// with, the answer says so (no lock is involved) and is counted apart from
// lock contention.
TEST_F(ExtenderTest, NodesAllAllocatingLookAlikePodsSayWhy) {
  config.node_lock_wait = std::chrono::milliseconds(0);
  ext.set_matches_pods([](const std::string&) { return true; });
  const std::map<std::string, std::string> one{{"nvidia.com/gpu", "1"},
                                               {"nvidia.com/gpumem", "1000"}};
  std::vector<json> pods = {add_created("p1", one, "2026-11-28T08:00:00Z"),
                            add_created("p2", one, "2026-11-28T08:00:00Z"),
                            add_created("p3", one, "2026-11-28T08:00:00Z")};
  const std::vector<std::string> ab{"a", "b"};
  for (const json& p : pods)
    ASSERT_EQ(ext.filter(pod_of(p), ab).nodes.size(), 2u);
  ASSERT_EQ(ext.place({"default", "p1", "u-p1", "a"}).node, "a");
  ASSERT_EQ(ext.place({"default", "p2", "u-p2", "a"}).node, "b");
  const std::string e = ext.bind({"default", "p3", "u-p3", "a"});
  EXPECT_NE(e.find("of the 1 other nodes it fitted in filter, 0 no longer fit, 0 are locked by "
                   "pods being allocated and 1 are allocating a pod their device plugin could "
                   "not tell from this one"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("kube-scheduler binds this one on its next try"), std::string::npos) << e;
  EXPECT_EQ(metrics.failures(Verb::kBind, "InFlight"), 1u);
  EXPECT_EQ(metrics.failures(Verb::kBind, "NodeLock"), 0u);
  EXPECT_EQ(backend.lock_calls(), 0);
}

// A burst created in one second may not join its own pods in flight on a
// node. Once as many binds wait for such nodes as may wait, prioritize
// scores them 0 so kube-scheduler chooses a free node; a pod they do not
// block is scored as before.
TEST_F(ExtenderTest, PrioritizeSteersABurstAwayFromNodesItMayNotJoin) {
  auto id = [](const char* prefix, int i) {
    std::string s(prefix);
    s.append(std::to_string(i));
    return s;
  };
  config.node_lock_wait = std::chrono::milliseconds(2000);
  ext.set_matches_pods([](const std::string&) { return true; });
  const std::map<std::string, std::string> one{{"nvidia.com/gpu", "1"},
                                               {"nvidia.com/gpumem", "1000"}};
  const std::vector<std::string> ab{"a", "b"};
  const std::map<std::string, std::string> binpack{{"hami.io/node-scheduler-policy", "binpack"}};
  for (int i = 0; i <= kMaxLockWaiters + 1; ++i) {
    json p = add_created(id("p", i), one, "2026-11-28T08:00:00Z");
    p["metadata"]["annotations"]["hami.io/node-scheduler-policy"] = "binpack";
    backend.add_pod(p);
    ASSERT_EQ(ext.filter(pod_of(p), ab).nodes.size(), 2u);
  }
  json later = add_created("later", one, "2026-11-28T08:00:05Z");
  ASSERT_EQ(ext.filter(pod_of(later), ab).nodes.size(), 2u);
  auto priorities = [&](const json& p) {
    auto r = ext.prioritize(pod_of(p), ab);
    EXPECT_TRUE(r);
    std::map<std::string, int> m;
    for (const HostPriority& h : *r)
      m[h.host] = h.score;
    return m;
  };
  ASSERT_EQ(ext.bind({"default", "p0", "u-p0", "a"}), "");
  // "a" now holds p0 and is binpack's choice; below the pressure it stays so.
  EXPECT_GT(priorities(backend.pod("default", "p5"))["a"],
            priorities(backend.pod("default", "p5"))["b"]);
  std::vector<std::thread> waiters;
  for (int i = 1; i <= kMaxLockWaiters; ++i)
    waiters.emplace_back([this, n = id("p", i), u = id("u-p", i)] {
      ext.place({"default", n, u, "a"});
    });
  std::map<std::string, int> burst;
  for (int i = 0; i < 150; ++i) {
    burst = priorities(backend.pod("default", "p5"));
    if (burst["a"] == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::map<std::string, int> other = priorities(backend.pod("default", "later"));
  for (auto& t : waiters)
    t.join();
  EXPECT_EQ(burst["a"], 0) << "a node the pod may not join was not demoted";
  EXPECT_GE(burst["b"], 1);
  EXPECT_GT(metrics.demoted(), 0u);
  EXPECT_GT(other["a"], other["b"]) << "a pod created later may join p0: binpack as before";
}

TEST(BindDeadline, IsAThirdOfTheExtenderTimeoutAtMostTenSeconds) {
  using std::chrono::milliseconds;
  EXPECT_EQ(bind_deadline_for(milliseconds(30000)), milliseconds(10000));
  EXPECT_EQ(bind_deadline_for(milliseconds(9000)), milliseconds(3000));
  EXPECT_EQ(bind_deadline_for(milliseconds(300000)), milliseconds(10000));
  EXPECT_EQ(bind_deadline_for(milliseconds(0)), milliseconds(1));
}

// filter keeps a pod's best fitting nodes for bind, not the first ones
// kube-scheduler listed: with 80 nodes, the busiest, listed last, is where a
// binpack pod goes when its node is locked.
TEST_F(ExtenderTest, RedirectChoosesAmongTheBestNodesNotTheFirstListed) {
  std::vector<std::string> nodes;
  for (int i = 0; i < 80; ++i) {
    std::string n("n");
    n.append(std::to_string(i));
    feed.node_changed(sched_node(n, 2, 16000));
    nodes.push_back(n);
  }
  feed.pod_changed(test::placed_pod("busy", "ub", "n79", "GPU-n79-0,NVIDIA,8000,50:;"));
  json p = add("p", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}}, "u1",
               {{"hami.io/node-scheduler-policy", "binpack"}});
  ASSERT_EQ(ext.filter(pod_of(p), nodes).nodes.size(), 80u);
  backend.set_lock("n0", "default/other");
  BindOutcome b = ext.place({"default", "p", "u1", "n0"});
  EXPECT_EQ(b.error, "");
  EXPECT_EQ(b.node, "n79");
}

// Under binpack the nodes filter liked best are the fullest, so by bind time
// other binds have often filled them: bind looks for room among all the
// nodes filter kept, not only the best 16 by score.
TEST_F(ExtenderTest, RedirectFindsRoomPastTheNodesFilledSinceFilter) {
  std::vector<std::string> nodes;
  for (int i = 0; i < 40; ++i) {
    std::string n("n");
    n.append(std::to_string(i));
    feed.node_changed(sched_node(n, 1, 16000));
    nodes.push_back(n);
  }
  // n0..n19 half used, n20..n39 idle: binpack ranks n0..n19 first.
  for (int i = 0; i < 20; ++i) {
    const std::string n = nodes[static_cast<size_t>(i)];
    feed.pod_changed(
        test::placed_pod("half-" + n, "uh-" + n, n, "GPU-" + n + "-0,NVIDIA,8000,50:;"));
  }
  json p = add("p", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "8000"}}, "u1",
               {{"hami.io/node-scheduler-policy", "binpack"}});
  ASSERT_EQ(ext.filter(pod_of(p), nodes).nodes.size(), 40u);
  // Other binds fill n0..n19 before this one arrives.
  for (int i = 0; i < 20; ++i) {
    const std::string n = nodes[static_cast<size_t>(i)];
    feed.pod_changed(
        test::placed_pod("rest-" + n, "ur-" + n, n, "GPU-" + n + "-0,NVIDIA,8000,50:;"));
  }
  BindOutcome b = ext.place({"default", "p", "u1", "n0"});
  EXPECT_EQ(b.error, "");
  EXPECT_GE(b.node.size(), 3u);
  EXPECT_GE(std::stoi(b.node.substr(1)), 20) << b.node << " was full";
  EXPECT_EQ(metrics.redirects("NoFit"), 1u);
}

// The node watch shows which nodes other pods hold locked: bind tries the
// others first instead of spending its attempts on locks.
TEST_F(ExtenderTest, RedirectTriesNodesTheWatchShowsUnlockedFirst) {
  feed.node_changed(sched_node("c", 2, 16000));
  feed.pod_changed(test::placed_pod("busy-b", "ubb", "b", "GPU-b-0,NVIDIA,8000,50:;"));
  feed.pod_changed(test::placed_pod("busy-c", "ubc", "c", "GPU-c-0,NVIDIA,4000,20:;"));
  ext.set_lock_holders([](const std::string& node) {
    return node == "a" || node == "b" ? std::string("default/other") : std::string();
  });
  backend.set_lock("a", "default/other");
  backend.set_lock("b", "default/other");
  std::vector<std::string> tried;
  backend.on_lock = [&](const std::string& node) { tried.push_back(node); };
  json p = add("p", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}}, "u1",
               {{"hami.io/node-scheduler-policy", "binpack"}});
  ASSERT_EQ(ext.filter(pod_of(p), std::vector<std::string>{"a", "b", "c"}).nodes.size(), 3u);
  BindOutcome b = ext.place({"default", "p", "u1", "a"});
  EXPECT_EQ(b.error, "");
  EXPECT_EQ(b.node, "c");
  // kube-scheduler's choice, then straight to c: b, busier but locked, is
  // not tried.
  EXPECT_EQ(tried, (std::vector<std::string>{"a", "c"}));
}

// The watch shows a lock some milliseconds after it is taken: a bind right
// after another does not pick the node that one has just locked.
TEST_F(ExtenderTest, RedirectSkipsANodeAnotherBindHasJustLocked) {
  feed.node_changed(sched_node("c", 2, 16000));
  feed.pod_changed(test::placed_pod("busy-c", "ubc", "c", "GPU-c-0,NVIDIA,4000,20:;"));
  ext.set_lock_holders([](const std::string&) { return std::string(); });  // the watch lags
  backend.set_lock("a", "default/other");
  std::vector<std::string> tried;
  backend.on_lock = [&](const std::string& node) { tried.push_back(node); };
  json p = add("p", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}}, "u1",
               {{"hami.io/node-scheduler-policy", "binpack"}});
  json q = add("q", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}}, "u2",
               {{"hami.io/node-scheduler-policy", "binpack"}});
  const std::vector<std::string> nodes{"a", "b", "c"};
  ASSERT_EQ(ext.filter(pod_of(p), nodes).nodes.size(), 3u);
  ASSERT_EQ(ext.filter(pod_of(q), nodes).nodes.size(), 3u);
  EXPECT_EQ(ext.place({"default", "p", "u1", "a"}).node, "c");
  tried.clear();
  EXPECT_EQ(ext.place({"default", "q", "u2", "a"}).node, "b");
  EXPECT_EQ(tried, (std::vector<std::string>{"a", "b"}));
}

// Anti-affinity, topology spread or a host port: whether another node is
// right depends on other pods, which only kube-scheduler weighs. Such a pod
// is not moved; it fails with the lock's holder, as without redirects.
TEST_F(ExtenderTest, PodWhosePlacementDependsOnOtherPodsIsNotRedirected) {
  json p = test::bindable_pod("p", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}}, "u1");
  p["spec"]["affinity"] = {{"podAntiAffinity",
                            {{"requiredDuringSchedulingIgnoredDuringExecution",
                              json::array({{{"labelSelector", {{"matchLabels", {{"app", "x"}}}}},
                                            {"topologyKey", "kubernetes.io/hostname"}}})}}}};
  backend.add_pod(p);
  ASSERT_TRUE(pod_of(p).placement_depends_on_other_pods);
  backend.set_lock("a", "default/other");
  ASSERT_EQ(ext.filter(pod_of(p), all).nodes, (std::vector<std::string>{"a", "b"}));
  BindOutcome b = ext.place({"default", "p", "u1", "a"});
  EXPECT_NE(b.error.find("node lock contention"), std::string::npos) << b.error;
  EXPECT_EQ(b.node, "");
  EXPECT_EQ(backend.lock_holder("b"), "");
  EXPECT_EQ(backend.binds(), 0);
}

TEST_F(ExtenderTest, RedirectsCanBeTurnedOff) {
  config.bind_redirect = false;
  json p = add("p", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}}, "u1");
  backend.set_lock("a", "default/other");
  ASSERT_EQ(ext.filter(pod_of(p), all).nodes, (std::vector<std::string>{"a", "b"}));
  EXPECT_NE(ext.bind({"default", "p", "u1", "a"}).find("node lock contention"), std::string::npos);
  EXPECT_EQ(backend.binds(), 0);
}

// When nothing is left, the reason says what happened on kube-scheduler's
// node, what happened elsewhere, and what the user can do.
TEST_F(ExtenderTest, NoRoomAnywhereGivesAReasonToActOn) {
  json p = add("p", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "16000"}}, "u1");
  json q = add("q", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "16000"}}, "u2");
  json r = add("r", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "16000"}}, "u3");
  for (const json* x : {&p, &q, &r})
    ASSERT_EQ(ext.filter(pod_of(*x), all).nodes.size(), 2u);
  ASSERT_EQ(ext.place({"default", "p", "u1", "a"}).node, "a");
  ASSERT_EQ(ext.place({"default", "q", "u2", "a"}).node, "b");
  const std::string err = ext.bind({"default", "r", "u3", "a"});
  EXPECT_EQ(err,
            "pod no longer fits node a: 2/2 CardInsufficientMemory; of the 1 other nodes "
            "it fitted in filter, 1 no longer fit and 0 are locked by pods being allocated; "
            "kube-scheduler tries again when GPUs are freed or nodes added");
  EXPECT_EQ(metrics.failures(Verb::kBind, "NoFit"), 1u);
  // And with the other node locked rather than full: check the device plugin.
  backend.release_all_locks();
  feed.node_changed(sched_node("c", 2, 16000));
  json s2 = add("s", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "16000"}}, "u4");
  ASSERT_EQ(ext.filter(pod_of(s2), std::vector<std::string>{"a", "c"}).nodes,
            (std::vector<std::string>{"c"}));
  config.node_lock_wait = std::chrono::milliseconds(0);
  backend.set_lock("c", "default/q");
  const std::string err2 = ext.bind({"default", "s", "u4", "a"});
  EXPECT_NE(err2.find("1 are locked by pods being allocated"), std::string::npos) << err2;
  EXPECT_NE(err2.find("check the device plugin on c"), std::string::npos) << err2;
}

// The extender killed mid-bind: the binding went through but kube-scheduler
// never heard, so it filters and binds the pod again. The pod's GPUs stay
// charged through that filter, and the bind neither binds again nor moves
// it.
TEST_F(ExtenderTest, PodBoundWhileItsAnswerWasLostKeepsItsGpus) {
  json p = test::placed_pod("p", "u1", "a", "GPU-a-0,NVIDIA,16000,0:GPU-a-1,NVIDIA,16000,0:;");
  p["spec"]["containers"][0]["resources"]["limits"] = {{"nvidia.com/gpu", "2"},
                                                       {"nvidia.com/gpumem", "16000"}};
  backend.add_pod(p);
  feed.pod_changed(p);
  auto used = [&] {
    return cache.read([](const ClusterCache::View& v) {
      int64_t mib = 0;
      for (const auto& d : v.node("a")->devices)
        mib += d.used_mem_mib;
      return mib;
    });
  };
  ASSERT_EQ(used(), 32000);
  json again = p;  // kube-scheduler's copy, from before the binding
  again["spec"].erase("nodeName");
  ext.filter(pod_of(again), all);
  EXPECT_EQ(used(), 32000) << "filter dropped a bound pod's allocation";
  BindOutcome same = ext.place({"default", "p", "u1", "a"});
  EXPECT_EQ(same.error, "");
  EXPECT_EQ(same.node, "a");
  EXPECT_EQ(backend.binds(), 0);
  ext.filter(pod_of(again), all);
  const std::string err = ext.bind({"default", "p", "u1", "b"});
  EXPECT_EQ(err, "pod default/p is already bound to node a");
  EXPECT_EQ(used(), 32000);
  EXPECT_EQ(backend.binds(), 0);
}

TEST_F(ExtenderTest, FollowerRefusesBind) {
  add("p", {{"nvidia.com/gpu", "1"}}, "u1");
  ext.set_leader_check([](std::chrono::milliseconds) { return false; });
  EXPECT_NE(ext.bind({"default", "p", "u1", "a"}).find("not the leader"), std::string::npos);
  EXPECT_EQ(backend.binds(), 0);
}

// "<prefix><i>" without operator+(const char*, string&&), which GCC 12's
// -Wrestrict misreads.
std::string numbered(const char* prefix, int i) {
  std::string s(prefix);
  s.append(std::to_string(i));
  return s;
}

TEST_F(ExtenderTest, ConcurrentBindsNeverOverbook) {
  // 16 pods of 4000 MiB onto node a (2 × 16000 MiB: room for 8), from 4
  // threads: exactly 8 succeed.
  for (int i = 0; i < 16; ++i) {
    add(numbered("p", i), {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "4000"}},
        numbered("u", i));
  }
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < 16; i += 4) {
        const std::string n = numbered("p", i);
        // Each bind takes the node lock; the device plugin would release it.
        for (;;) {
          std::string e = ext.bind({"default", n, numbered("u", i), "a"});
          if (e.find("contention") != std::string::npos) {
            std::this_thread::yield();
            continue;
          }
          if (e.empty()) {
            ++ok;
            backend.unlock_node("a", "default", n);
          }
          break;
        }
      }
    });
  }
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(ok.load(), 8);
  cache.read([](const ClusterCache::View& v) {
    for (const auto& d : v.node("a")->devices)
      EXPECT_EQ(d.used_mem_mib, 16000);
    return 0;
  });
}

}  // namespace
}  // namespace hami::scheduler

namespace hami::scheduler {
namespace {

// filter and prioritize split over a pool answer exactly as on one thread,
// also while other threads filter and events change the cache.
TEST(ParallelExtenderTest, PoolGivesTheSameAnswers) {
  ClusterCache cache;
  CacheFeed feed(cache);
  SchedulerConfig config;
  std::vector<std::string> names;
  for (int i = 0; i < 1200; ++i) {
    std::string n("n");
    n.append(std::to_string(i));
    feed.node_changed(test::sched_node(n, 2, 4000 + (i % 7) * 2000));
    names.push_back(n);
  }
  names.push_back("ghost");
  const k8s::Pod pod = *k8s::Pod::from_json(
      sched_pod("p", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "9000"}}, "u"));
  Extender serial(cache, config, nullptr, nullptr);
  ParallelFor pool(3);
  Metrics metrics;
  Extender parallel(cache, config, nullptr, &metrics);
  parallel.set_pool(&pool);
  const FilterResult want = serial.filter(pod, names);
  const auto want_prio = serial.prioritize(pod, names);
  ASSERT_FALSE(want.nodes.empty());
  ASSERT_FALSE(want.failed.empty());
  std::atomic<bool> stop{false};
  std::thread churn([&] {
    // Events on nodes outside the request keep the writer side busy.
    for (int i = 0; !stop; ++i)
      feed.node_changed(test::sched_node("other", 2, 1000 + i % 5));
  });
  std::vector<std::thread> readers;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        FilterResult got = parallel.filter(pod, names);
        auto prio = parallel.prioritize(pod, names);
        if (got.nodes != want.nodes || got.failed != want.failed) ++mismatches;
        if (!prio || prio->size() != want_prio->size()) ++mismatches;
        for (size_t k = 0; prio && k < prio->size(); ++k) {
          if ((*prio)[k].host != (*want_prio)[k].host || (*prio)[k].score != (*want_prio)[k].score)
            ++mismatches;
        }
      }
    });
  }
  for (auto& r : readers)
    r.join();
  stop = true;
  churn.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(ParallelForTest, EveryIndexOnceInContiguousShares) {
  ParallelFor pool(2);
  for (size_t n : {0u, 1u, 255u, 256u, 1000u, 10007u}) {
    std::vector<std::atomic<int>> seen(n);
    pool.run(
        n,
        [&](size_t b, size_t e, size_t) {
          for (size_t i = b; i < e; ++i)
            seen[i]++;
        },
        100);
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(seen[i].load(), 1) << n << " " << i;
  }
}

// A pool thread that is slow to run (descheduled on a busy node) must not hold
// the request up: the caller takes the chunks it has not started. Here the
// pool thread's first chunk waits until three quarters of the items are done,
// which with a fixed half per thread would never happen.
TEST(ParallelForTest, CallerTakesTheChunksOfASlowThread) {
  ParallelFor pool(1);
  const size_t n = 4096;
  std::mutex mu;
  std::condition_variable cv;
  size_t done = 0;
  bool gave_up = false;
  pool.run(
      n,
      [&](size_t b, size_t e, size_t share) {
        std::unique_lock l(mu);
        if (share != 0) {
          gave_up = !cv.wait_for(l, std::chrono::seconds(20), [&] { return done >= n * 3 / 4; });
        }
        done += e - b;
        cv.notify_all();
      },
      64);
  EXPECT_FALSE(gave_up);
  EXPECT_EQ(done, n);
}

}  // namespace
}  // namespace hami::scheduler
