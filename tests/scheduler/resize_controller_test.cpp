// The scheduler answering nvidia.com/vgpu-resize on a bound pod, through the
// real client against the test API server: an accepted resize rewrites the
// allocation, signs it again (the cache's and the device plugin's trust check
// accept the pod afterwards) and moves the cache's charges once; a refusal
// (no room, quota, forged decision, bad text) posts a ResizeRefused Event and
// changes nothing; an answered request is not redone; a failed patch leaves
// the cache as it was.
#include "scheduler/resize_controller.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>

#include "k8s/fixture.hpp"
#include "protocol/annotations.hpp"
#include "protocol/decision.hpp"
#include "scheduler/feed.hpp"
#include "scheduler/helpers.hpp"
#include "scheduler/resize.hpp"

namespace hami::scheduler {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using Kind = ResizeOutcome::Kind;

class ResizeControllerTest : public test::ApiFixture {
 protected:
  void SetUp() override {
    test::ApiFixture::SetUp();
    config.decisions.keys = keys;
    api().put("nodes", test::sched_node("a", 2, 16000));
    feed.emplace(cache, config.decisions);
    feed->node_changed(*api().get("nodes", "", "a"));
    events.emplace(&client(), EventOptions{.component = "hami-scheduler", .instance = "test-0"});
    controller.emplace(cache, config, client(), &*events, &quotas);
    // Another pod holds 8000 MiB and 40 % of GPU-a-0.
    place("other", "uid-other", "GPU-a-0,NVIDIA,8000,40:;");
    place("p", "uid-p", "GPU-a-0,NVIDIA,4000,30:;");
  }
  json place(const std::string& name, const std::string& uid, const std::string& allocated) {
    json p = api().put("pods", test::sign(test::placed_pod(name, uid, "a", allocated), keys));
    feed->pod_changed(p);
    return p;
  }
  json pod(const std::string& name = "p") { return *api().get("pods", "default", name); }
  std::string annotation(const json& p, const char* key) {
    return p["metadata"]["annotations"].value(key, "");
  }
  json ask(const std::string& request, const std::string& name = "p") {
    json p = pod(name);
    p["metadata"]["annotations"][kResizeAnnotation] = request;
    return api().put("pods", p);
  }
  const fit::GpuDevice& gpu0() {
    const fit::NodeDevices* n = cache.read([](const ClusterCache::View& v) { return v.node("a"); });
    return n->devices[0];
  }
  std::vector<json> events_with(const std::string& reason) {
    events->flush();
    std::vector<json> out;
    for (json& e : api().objects("events", "default")) {
      if (e.value("reason", "") == reason) out.push_back(std::move(e));
    }
    return out;
  }
  uint64_t pod_patches() { return api().requests("patch", "/api/v1/namespaces/default/pods"); }

  const protocol::DecisionKeys keys = test::test_keys();
  ClusterCache cache;
  std::optional<CacheFeed> feed;
  SchedulerConfig config;
  QuotaTracker quotas{config.resources};
  std::optional<EventRecorder> events;
  std::optional<ResizeController> controller;
};

TEST_F(ResizeControllerTest, AcceptedResizeRewritesResignsAndChargesOnce) {
  const std::string old_signature = annotation(pod(), protocol::kDecisionSignature);
  ResizeOutcome out = controller->handle(ask("gpumem=8000,gpucores=60"));
  ASSERT_EQ(out.kind, Kind::kApplied) << out.message;

  const json p = pod();
  EXPECT_EQ(annotation(p, protocol::kDevicesAllocated), "GPU-a-0,NVIDIA,8000,60:;");
  EXPECT_EQ(annotation(p, kResizeHandled), "gpumem=8000,gpucores=60");
  EXPECT_NE(annotation(p, protocol::kDecisionSignature), old_signature);
  // Trusted after the resize: the device plugin's check and the cache's.
  const k8s::Pod after = *k8s::Pod::from_json(p);
  EXPECT_EQ(protocol::decision_refusal(after, config.decisions), "");
  // The cache holds the new sizes, charged once, before and after the watch
  // brings the patched pod back.
  EXPECT_EQ(gpu0().used_mem_mib, 16000);
  EXPECT_EQ(gpu0().used_cores, 100);
  EXPECT_EQ(gpu0().used_tenants, 2);
  feed->pod_changed(p);
  EXPECT_EQ(feed->refused_decisions(), 0u);
  EXPECT_EQ(gpu0().used_mem_mib, 16000);
  EXPECT_EQ(gpu0().used_cores, 100);
  EXPECT_EQ(gpu0().used_tenants, 2);
  EXPECT_EQ(
      cache.read([](const ClusterCache::View& v) { return v.namespace_usage("default"); }).mem_mib,
      16000);

  auto resized = events_with(kReasonResized);
  ASSERT_EQ(resized.size(), 1u);
  EXPECT_THAT(resized[0].value("message", ""), HasSubstr("GPU-a-0 4000->8000 MiB, 30->60 %"));

  // Answered: the same request is not redone.
  const uint64_t patches = pod_patches();
  EXPECT_FALSE(ResizeController::wants(p));
  EXPECT_EQ(controller->handle(p).kind, Kind::kNone);
  EXPECT_EQ(pod_patches(), patches);
}

TEST_F(ResizeControllerTest, ResizeThatDoesNotFitIsRefusedWithAnEventAndChangesNothing) {
  const json before = pod();
  ResizeOutcome out = controller->handle(ask("gpumem=9000"));
  ASSERT_EQ(out.kind, Kind::kRefused);
  EXPECT_THAT(out.message, HasSubstr("ResizeRefused: does not fit GPU-a-0"));

  const json p = pod();
  EXPECT_EQ(annotation(p, protocol::kDevicesAllocated), "GPU-a-0,NVIDIA,4000,30:;");
  EXPECT_EQ(annotation(p, protocol::kDecisionSignature),
            annotation(before, protocol::kDecisionSignature));
  EXPECT_EQ(annotation(p, kResizeHandled), "gpumem=9000");
  EXPECT_EQ(gpu0().used_mem_mib, 12000);
  EXPECT_EQ(gpu0().used_cores, 70);
  auto refused = events_with(kReasonResize);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].value("type", ""), "Warning");
  EXPECT_THAT(refused[0].value("message", ""), HasSubstr("does not fit GPU-a-0"));
  EXPECT_EQ(refused[0]["involvedObject"].value("uid", ""), "uid-p");

  // Not redone, not posted twice.
  EXPECT_EQ(controller->handle(p).kind, Kind::kNone);
  EXPECT_EQ(events_with(kReasonResize).size(), 1u);
}

TEST_F(ResizeControllerTest, ShrinkAlwaysFitsAndFreesTheDifference) {
  ASSERT_EQ(controller->handle(ask("gpumem=1000,gpucores=10")).kind, Kind::kApplied);
  EXPECT_EQ(annotation(pod(), protocol::kDevicesAllocated), "GPU-a-0,NVIDIA,1000,10:;");
  EXPECT_EQ(gpu0().used_mem_mib, 9000);
  EXPECT_EQ(gpu0().used_cores, 50);
}

TEST_F(ResizeControllerTest, GrowthPastTheNamespaceQuotaIsRefused) {
  quotas.quota_changed({{"apiVersion", "v1"},
                        {"kind", "ResourceQuota"},
                        {"metadata", {{"name", "gpu"}, {"namespace", "default"}}},
                        {"spec", {{"hard", {{"limits.nvidia.com/gpumem", "14000"}}}}}});
  ResizeOutcome out = controller->handle(ask("gpumem=7000"));
  ASSERT_EQ(out.kind, Kind::kRefused);
  EXPECT_THAT(out.message, HasSubstr("ResourceQuotaNotFit"));
  EXPECT_EQ(annotation(pod(), protocol::kDevicesAllocated), "GPU-a-0,NVIDIA,4000,30:;");
  EXPECT_EQ(gpu0().used_mem_mib, 12000);
  // Within the quota it goes through.
  ASSERT_EQ(controller->handle(ask("gpumem=6000")).kind, Kind::kApplied);
  EXPECT_EQ(gpu0().used_mem_mib, 14000);
}

TEST_F(ResizeControllerTest, ForgedDecisionAndUnreadableRequestAreRefused) {
  // Allocation altered after signing: not the scheduler's decision.
  json forged = pod();
  forged["metadata"]["annotations"][protocol::kDevicesAllocated] = "GPU-a-0,NVIDIA,12000,30:;";
  api().put("pods", forged);
  ResizeOutcome out = controller->handle(ask("gpumem=5000"));
  ASSERT_EQ(out.kind, Kind::kRefused);
  EXPECT_THAT(out.message, HasSubstr("signature"));
  EXPECT_EQ(annotation(pod(), protocol::kDevicesAllocated), "GPU-a-0,NVIDIA,12000,30:;");
  EXPECT_EQ(gpu0().used_mem_mib, 12000);

  out = controller->handle(ask("gpumem=8g", "other"));
  ASSERT_EQ(out.kind, Kind::kRefused);
  EXPECT_THAT(out.message, HasSubstr("gpumem=8g is not a number"));
  EXPECT_EQ(events_with(kReasonResize).size(), 2u);
}

TEST_F(ResizeControllerTest, FailedPatchLeavesTheCacheAsItWas) {
  const json asked = ask("gpumem=8000");
  api().inject(
      {.verb = "patch", .path_prefix = "/api/v1/namespaces/default/pods/p", .status = 409});
  ResizeOutcome out = controller->handle(asked);
  ASSERT_EQ(out.kind, Kind::kRetry);
  EXPECT_EQ(gpu0().used_mem_mib, 12000);
  EXPECT_EQ(annotation(pod(), protocol::kDevicesAllocated), "GPU-a-0,NVIDIA,4000,30:;");
  // The next try goes through.
  ASSERT_EQ(controller->handle(pod()).kind, Kind::kApplied);
  EXPECT_EQ(gpu0().used_mem_mib, 16000);
}

TEST_F(ResizeControllerTest, UnallocatedPodWaitsAndARemovedRequestTakesItsMark) {
  json pending = test::bindable_pod("q", {{"nvidia.com/gpu", "1"}}, "uid-q",
                                    {{kResizeAnnotation, "gpumem=1000"}});
  pending = api().put("pods", pending);
  EXPECT_TRUE(ResizeController::wants(pending));
  EXPECT_EQ(controller->handle(pending).kind, Kind::kNone);
  EXPECT_EQ(annotation(pod("q"), kResizeHandled), "");
  // Bound, its node still allocating: answered once that is done.
  json allocating = pod();
  allocating["metadata"]["annotations"][protocol::kBindPhase] = protocol::kPhaseAllocating;
  allocating["metadata"]["annotations"][kResizeAnnotation] = "gpumem=5000";
  allocating = api().put("pods", allocating);
  EXPECT_EQ(controller->handle(allocating).kind, Kind::kNone);
  EXPECT_EQ(annotation(pod(), protocol::kDevicesAllocated), "GPU-a-0,NVIDIA,4000,30:;");
  allocating["metadata"]["annotations"][protocol::kBindPhase] = protocol::kPhaseSuccess;
  api().put("pods", allocating);

  ASSERT_EQ(controller->handle(ask("gpumem=5000")).kind, Kind::kApplied);
  json p = pod();
  p["metadata"]["annotations"].erase(kResizeAnnotation);
  p = api().put("pods", p);
  EXPECT_TRUE(ResizeController::wants(p));
  EXPECT_EQ(controller->handle(p).kind, Kind::kNone);
  EXPECT_EQ(annotation(pod(), kResizeHandled), "");
  EXPECT_EQ(annotation(pod(), protocol::kDevicesAllocated), "GPU-a-0,NVIDIA,5000,30:;");
}

TEST_F(ResizeControllerTest, WorkerAnswersQueuedPodsOnlyWhileLeading) {
  std::atomic<bool> leading{false};
  ResizeWorker worker(
      *controller,
      [&](const std::string& ns, const std::string& name) { return api().get("pods", ns, name); },
      [&] { return leading.load(); });
  worker.start();
  worker.notify(ask("gpumem=6000"));
  worker.notify(pod("other"));  // nothing asked: not queued
  // A follower answers nothing; the resync on leading queues it again.
  leading = true;
  worker.resync(api().objects("pods", "default"));
  ASSERT_TRUE(test::wait_until([&] { return annotation(pod(), kResizeHandled) == "gpumem=6000"; }));
  worker.stop();
  EXPECT_EQ(annotation(pod(), protocol::kDevicesAllocated), "GPU-a-0,NVIDIA,6000,30:;");
}

}  // namespace
}  // namespace hami::scheduler
