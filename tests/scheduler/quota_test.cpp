// Namespace quotas on gpumem/gpucores as upstream reads them from
// ResourceQuotas: the pod's count (per-GPU value x GPUs, init containers
// collapsed), the namespace's usage from the cache (placed and reserved
// pods; deleted pods free it), quotas added, changed and removed, and the
// refusals: filter (every node, naming the quota, used and limit), bind's
// reservation, the webhook (a pod alone over the quota), and the metrics.
#include "scheduler/quota.hpp"

#include <gtest/gtest.h>

#include "k8s/base64.hpp"
#include "scheduler/extender.hpp"
#include "scheduler/feed.hpp"
#include "scheduler/helpers.hpp"
#include "scheduler/memory_backend.hpp"
#include "scheduler/webhook.hpp"

namespace hami::scheduler {
namespace {

using nlohmann::json;

json resource_quota(const std::string& ns, const std::string& name,
                    std::map<std::string, std::string> hard) {
  return {{"apiVersion", "v1"},
          {"kind", "ResourceQuota"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec", {{"hard", hard}}}};
}

k8s::Pod pod_of(const json& j) {
  auto p = k8s::Pod::from_json(j);
  EXPECT_TRUE(p) << p.error().message;
  return *p;
}

json pod_in(const std::string& ns, const std::string& name, const std::string& uid,
            std::map<std::string, std::string> limits) {
  json p = test::sched_pod(name, limits, uid, {}, ns);
  p["spec"]["schedulerName"] = "hami-scheduler";
  p["status"] = {{"phase", "Pending"}};
  return p;
}

json placed_in(const std::string& ns, const std::string& name, const std::string& uid,
               const std::string& allocated) {
  json p = test::placed_pod(name, uid, "a", allocated);
  p["metadata"]["namespace"] = ns;
  return p;
}

TEST(QuotaRequest, PerGpuValueTimesGpusInitContainersCollapsed) {
  fit::PodRequest r;
  r.containers.push_back(
      {.nums = 1, .mem_mib = 4000, .cores = 10, .kind = fit::ContainerKind::kInit});
  r.containers.push_back({.nums = 2, .mem_mib = 1000, .cores = 30});
  r.containers.push_back({.nums = 1, .mem_mib = 500});
  QuotaRequest q = quota_request(r);
  EXPECT_EQ(q.mem_mib, 4000);  // max(init 4000, apps 2*1000 + 500)
  EXPECT_EQ(q.cores, 60);      // max(init 10, apps 2*30)
  EXPECT_FALSE(q.mem_percent);
  r.containers.push_back({.nums = 1, .mem_percent = 50});
  EXPECT_TRUE(quota_request(r).mem_percent);
}

TEST(QuotaTracker, ReadsLimitsOfOursOnlyAndTheSmallestHolds) {
  fit::ResourceConfig rc;
  QuotaTracker q(rc);
  EXPECT_FALSE(q.any());
  q.quota_changed(resource_quota("team", "gpu",
                                 {{"limits.nvidia.com/gpumem", "8000"},
                                  {"requests.nvidia.com/gpumem", "10"},
                                  {"limits.cpu", "4"},
                                  {"limits.nvidia.com/gpucores", "100"}}));
  q.quota_changed(resource_quota("team", "tight", {{"limits.nvidia.com/gpumem", "6000"}}));
  q.quota_changed(resource_quota("other", "cpu-only", {{"limits.cpu", "4"}}));
  EXPECT_TRUE(q.any());
  auto l = q.limits();
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0].resource, "nvidia.com/gpucores");
  EXPECT_EQ(l[0].limit, 100);
  EXPECT_EQ(l[1].resource, "nvidia.com/gpumem");
  EXPECT_EQ(l[1].limit, 6000);
  EXPECT_EQ(l[1].quota, "tight");
  EXPECT_EQ(q.check("team", {5000, 0}, {1000, 0, false}), "");
  EXPECT_EQ(q.check("team", {5000, 0}, {1001, 0, false}),
            "ResourceQuotaNotFit: namespace team ResourceQuota tight limits nvidia.com/gpumem to "
            "6000; 5000 used + 1001 requested");
  EXPECT_NE(q.check("team", {0, 90}, {0, 20, false}).find("gpucores to 100; 90 used + 20"),
            std::string::npos);
  EXPECT_EQ(q.check("other", {100000, 1000}, {100000, 1000, false}), "");
  // Changed: the new limit holds; removed: nothing holds.
  q.quota_changed(resource_quota("team", "tight", {{"limits.nvidia.com/gpumem", "7000"}}));
  EXPECT_EQ(q.check("team", {5000, 0}, {2000, 0, false}), "");
  q.quota_deleted(resource_quota("team", "tight", {}));
  q.quota_changed(resource_quota("team", "gpu", {{"limits.cpu", "4"}}));
  EXPECT_FALSE(q.any());
  EXPECT_EQ(q.check("team", {5000, 0}, {1000000, 1000, false}), "");
}

TEST(QuotaTracker, MemoryLimitScalesWithMemoryFactorAndBadValuesAreIgnored) {
  fit::ResourceConfig rc;
  rc.memory_factor = 10;
  QuotaTracker q(rc);
  q.quota_changed(resource_quota(
      "team", "gpu", {{"limits.nvidia.com/gpumem", "100"}, {"limits.nvidia.com/gpucores", "1.5"}}));
  auto l = q.limits();
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].limit, 1000);
  // Not a ResourceQuota's shape (found by fuzz_resource_quota): ignored.
  json odd = resource_quota("team", "odd", {{"limits.nvidia.com/gpumem", "1"}});
  odd["metadata"]["namespace"] = json{{"name", "x"}};
  q.quota_changed(odd);
  q.quota_changed(json::array({1, 2}));
  q.quota_deleted("text");
  EXPECT_EQ(q.limits().size(), 1u);
}

class QuotaExtenderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    feed.node_changed(test::sched_node("a", 2, 16000));
    feed.node_changed(test::sched_node("b", 2, 16000));
    ext.set_quotas(&quotas);
    metrics.set_quotas(&quotas);
    quotas.quota_changed(resource_quota(
        "team", "gpu",
        {{"limits.nvidia.com/gpumem", "8000"}, {"limits.nvidia.com/gpucores", "100"}}));
  }
  json add(const json& p) {
    backend.add_pod(p);
    return p;
  }
  ClusterCache cache;
  CacheFeed feed{cache};
  SchedulerConfig config;
  Metrics metrics;
  QuotaTracker quotas{config.resources};
  test::MemoryBackend backend;
  Extender ext{cache, config, &backend, &metrics};
  std::vector<std::string> nodes{"a", "b"};
};

TEST_F(QuotaExtenderTest, FilterRefusesWhatWouldPassTheQuotaAndCountsPodsComingAndGoing) {
  json want = pod_in("team", "w", "uw", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "3000"}});
  EXPECT_EQ(ext.filter(pod_of(want), nodes).nodes.size(), 2u);  // 6000 of 8000
  // Another pod of the namespace holds 3000: 3000 + 6000 > 8000.
  feed.pod_changed(placed_in("team", "held", "uh", "GPU-a-0,NVIDIA,3000,10:;"));
  FilterResult f = ext.filter(pod_of(want), nodes);
  EXPECT_TRUE(f.nodes.empty());
  ASSERT_EQ(f.failed.size(), 2u);
  EXPECT_EQ(f.failed["a"],
            "ResourceQuotaNotFit: namespace team ResourceQuota gpu limits nvidia.com/gpumem to "
            "8000; 3000 used + 6000 requested");
  EXPECT_EQ(f.failed["b"], f.failed["a"]);
  // Another namespace's pods do not count.
  feed.pod_changed(placed_in("elsewhere", "x", "ux", "GPU-b-0,NVIDIA,15000,90:;"));
  // The holder gone: room again.
  feed.pod_deleted(placed_in("team", "held", "uh", "GPU-a-0,NVIDIA,3000,10:;"));
  EXPECT_EQ(ext.filter(pod_of(want), nodes).nodes.size(), 2u);
  // A finished pod frees its share too.
  json done = placed_in("team", "done", "ud", "GPU-a-0,NVIDIA,5000,10:;");
  feed.pod_changed(done);
  EXPECT_TRUE(ext.filter(pod_of(want), nodes).nodes.empty());
  done["status"]["phase"] = "Succeeded";
  feed.pod_changed(done);
  EXPECT_EQ(ext.filter(pod_of(want), nodes).nodes.size(), 2u);
  // Quota lowered, then removed.
  quotas.quota_changed(resource_quota("team", "gpu", {{"limits.nvidia.com/gpumem", "5000"}}));
  EXPECT_TRUE(ext.filter(pod_of(want), nodes).nodes.empty());
  quotas.quota_deleted(resource_quota("team", "gpu", {}));
  EXPECT_EQ(ext.filter(pod_of(want), nodes).nodes.size(), 2u);
}

TEST_F(QuotaExtenderTest, CoresAndPercentageCountWhatTheGpusGive) {
  json cores = pod_in("team", "c", "uc", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpucores", "60"}});
  FilterResult f = ext.filter(pod_of(cores), nodes);
  EXPECT_TRUE(f.nodes.empty());
  EXPECT_NE(f.failed["a"].find("nvidia.com/gpucores to 100; 0 used + 120 requested"),
            std::string::npos)
      << f.failed["a"];
  // 60 % of a 16000 MiB GPU is 9600 MiB > 8000: judged once the GPU is known.
  json pct = pod_in("team", "p", "up",
                    {{"nvidia.com/gpu", "1"},
                     {"nvidia.com/gpumem-percentage", "60"},
                     {"nvidia.com/gpucores", "10"}});
  f = ext.filter(pod_of(pct), nodes);
  EXPECT_TRUE(f.nodes.empty());
  EXPECT_NE(f.failed["a"].find("gpumem to 8000; 0 used + 9600 requested"), std::string::npos)
      << f.failed["a"];
  json small = pod_in("team", "s", "us",
                      {{"nvidia.com/gpu", "1"},
                       {"nvidia.com/gpumem-percentage", "40"},
                       {"nvidia.com/gpucores", "10"}});
  EXPECT_EQ(ext.filter(pod_of(small), nodes).nodes.size(), 2u);
}

TEST_F(QuotaExtenderTest, BindRefusesTheReservationThatWouldPassTheQuota) {
  json p1 =
      add(pod_in("team", "p1", "u1", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "5000"}}));
  json p2 =
      add(pod_in("team", "p2", "u2", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "5000"}}));
  // Both pass filter before either binds (kube-scheduler's pipeline).
  EXPECT_EQ(ext.filter(pod_of(p1), nodes).nodes.size(), 2u);
  EXPECT_EQ(ext.filter(pod_of(p2), nodes).nodes.size(), 2u);
  EXPECT_EQ(ext.bind({"team", "p1", "u1", "a"}), "");
  const std::string err = ext.bind({"team", "p2", "u2", "a"});
  EXPECT_NE(err.find("ResourceQuotaNotFit"), std::string::npos) << err;
  EXPECT_NE(err.find("5000 used + 5000 requested"), std::string::npos) << err;
  // The reservation counts in the metrics too.
  const std::string body = metrics.render(cache);
  EXPECT_NE(body.find("hami_resource_quota_used{namespace=\"team\",quota_name=\"nvidia.com/"
                      "gpumem\",limit=\"8000\",zone=\"vGPU\"} 5000\n"),
            std::string::npos)
      << body;
  EXPECT_NE(body.find("hami_resource_quota_limit{namespace=\"team\",quota_name=\"nvidia.com/"
                      "gpucores\",zone=\"vGPU\"} 100\n"),
            std::string::npos);
  EXPECT_EQ(body.find("QuotaUsed{"), std::string::npos);
  metrics.set_legacy(true);
  EXPECT_NE(metrics.render(cache).find("QuotaUsed{quotanamespace=\"team\",quotaName=\"nvidia.com/"
                                       "gpumem\",limit=\"8000\",zone=\"vGPU\"} 5000\n"),
            std::string::npos);
}

TEST_F(QuotaExtenderTest, MetricsShowUsageWithoutAQuota) {
  feed.pod_changed(placed_in("free", "x", "ux", "GPU-b-0,NVIDIA,1500,20:;"));
  const std::string body = metrics.render(cache);
  EXPECT_NE(body.find("hami_resource_quota_used{namespace=\"free\",quota_name=\"nvidia.com/"
                      "gpumem\",limit=\"0\",zone=\"vGPU\"} 1500\n"),
            std::string::npos)
      << body;
  EXPECT_EQ(body.find("hami_resource_quota_limit{namespace=\"free\""), std::string::npos);
}

json review(const json& pod) {
  return {
      {"apiVersion", "admission.k8s.io/v1"},
      {"kind", "AdmissionReview"},
      {"request", {{"uid", "u"}, {"namespace", "team"}, {"operation", "CREATE"}, {"object", pod}}}};
}

TEST(QuotaWebhook, RefusesAPodThatAloneExceedsTheQuota) {
  SchedulerConfig cfg;
  QuotaTracker quotas(cfg.resources);
  quotas.quota_changed(resource_quota("team", "gpu", {{"limits.nvidia.com/gpumem", "8000"}}));
  json big = test::sched_pod("big", {{"nvidia.com/gpu", "3"}, {"nvidia.com/gpumem", "3000"}});
  big["metadata"].erase("namespace");  // CREATE from a manifest: the request names it
  json r = json::parse(admit(review(big).dump(), cfg, &quotas));
  EXPECT_FALSE(r["response"]["allowed"]);
  EXPECT_EQ(r["response"]["status"]["message"],
            "exceeding resource quota: ResourceQuotaNotFit: namespace team ResourceQuota gpu "
            "limits nvidia.com/gpumem to 8000; 0 used + 9000 requested");
  // The count the webhook injects counts: gpumem alone means one GPU.
  json one = test::sched_pod("one", {{"nvidia.com/gpumem", "7000"}}, "", {}, "team");
  r = json::parse(admit(review(one).dump(), cfg, &quotas));
  EXPECT_TRUE(r["response"]["allowed"]) << r.dump();
  // Without the tracker (or another namespace) nothing is judged.
  r = json::parse(admit(review(big).dump(), cfg));
  EXPECT_TRUE(r["response"]["allowed"]);
}

}  // namespace
}  // namespace hami::scheduler
