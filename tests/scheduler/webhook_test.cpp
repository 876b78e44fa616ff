// The mutating webhook: AdmissionReview v1 and v1beta1 in and out, upstream's
// defaults, validation messages, and JSONPatch paths with JSON-Pointer escaping.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "k8s/base64.hpp"
#include "scheduler/helpers.hpp"
#include "scheduler/pod_request.hpp"
#include "scheduler/webhook.hpp"

namespace hami::scheduler {
namespace {

using nlohmann::json;

json review(const json& pod, const std::string& version = "admission.k8s.io/v1") {
  return {{"apiVersion", version},
          {"kind", "AdmissionReview"},
          {"request",
           {{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"},
            {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
            {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
            {"namespace", "default"},
            {"operation", "CREATE"},
            {"userInfo", {{"username", "admin"}}},
            {"object", pod},
            {"oldObject", nullptr},
            {"dryRun", false}}}};
}

struct Reply {
  json raw;
  bool allowed;
  std::string message;
  json patch;  // decoded
};

Reply call(const json& pod, const SchedulerConfig& cfg = {},
           const std::string& version = "admission.k8s.io/v1") {
  Reply r;
  r.raw = json::parse(admit(review(pod, version).dump(), cfg));
  const json& resp = r.raw["response"];
  r.allowed = resp["allowed"];
  if (resp.contains("status")) r.message = resp["status"].value("message", "");
  r.patch = json::array();
  if (resp.contains("patch")) {
    EXPECT_EQ(resp["patchType"], "JSONPatch");
    r.patch = json::parse(*k8s::base64_decode(resp["patch"].get<std::string>()));
  }
  return r;
}

// The patch applied to the pod, as the API server would.
json applied(const json& pod, const json& patch) {
  return pod.patch(patch);
}

TEST(WebhookTest, AnswersInTheRequestsVersionWithItsUid) {
  for (const char* v : {"admission.k8s.io/v1", "admission.k8s.io/v1beta1"}) {
    Reply r = call(test::sched_pod("p", {{"nvidia.com/gpu", "1"}}), {}, v);
    EXPECT_EQ(r.raw["apiVersion"], v);
    EXPECT_EQ(r.raw["kind"], "AdmissionReview");
    EXPECT_EQ(r.raw["response"]["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
    EXPECT_TRUE(r.allowed);
  }
}

TEST(WebhookTest, WholeGpuGetsExclusiveCoresAndOurScheduler) {
  json pod = test::sched_pod("p", {{"nvidia.com/gpu", "1"}});
  Reply r = call(pod);
  ASSERT_TRUE(r.allowed) << r.message;
  EXPECT_EQ(r.patch, json::parse(R"([
    {"op":"add","path":"/spec/containers/0/resources/limits/nvidia.com~1gpucores","value":"100"},
    {"op":"add","path":"/spec/schedulerName","value":"hami-scheduler"}])"));
  json after = applied(pod, r.patch);
  EXPECT_EQ(after["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpucores"], "100");
  EXPECT_EQ(after["spec"]["schedulerName"], "hami-scheduler");
}

TEST(WebhookTest, MemoryOnlyGetsTheCountButNotExclusive) {
  json pod = test::sched_pod("p", {{"nvidia.com/gpumem", "3000"}});
  Reply r = call(pod);
  ASSERT_TRUE(r.allowed);
  json after = applied(pod, r.patch);
  const json& lim = after["spec"]["containers"][0]["resources"]["limits"];
  EXPECT_EQ(lim["nvidia.com/gpu"], "1");
  EXPECT_FALSE(lim.contains("nvidia.com/gpucores"));
}

TEST(WebhookTest, HundredPercentMemoryIsExclusive) {
  json pod =
      test::sched_pod("p", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "100"}});
  json after = applied(pod, call(pod).patch);
  EXPECT_EQ(after["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpucores"], "100");
}

TEST(WebhookTest, CoresOnlyWithoutResourcesObjectCreatesLimits) {
  json pod = test::sched_pod("p", {});
  pod["spec"]["containers"][0]["resources"] = {{"requests", {{"nvidia.com/gpucores", "20"}}}};
  Reply r = call(pod);
  ASSERT_TRUE(r.allowed) << r.message;
  json after = applied(pod, r.patch);
  EXPECT_EQ(after["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"], "1");
}

TEST(WebhookTest, PriorityAndPolicyBecomeEnv) {
  SchedulerConfig cfg;
  cfg.gpu_core_policy = "force";
  json pod = test::sched_pod(
      "p", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}, {"nvidia.com/priority", "0"}});
  json after = applied(pod, call(pod, cfg).patch);
  EXPECT_EQ(after["spec"]["containers"][0]["env"],
            json::parse(R"([{"name":"CUDA_TASK_PRIORITY","value":"0"},
                            {"name":"GPU_CORE_UTILIZATION_POLICY","value":"force"}])"));
  // An existing env list is appended to, an existing variable replaced.
  pod["spec"]["containers"][0]["env"] = {{{"name", "A"}, {"value", "1"}},
                                         {{"name", "CUDA_TASK_PRIORITY"}, {"value", "9"}}};
  after = applied(pod, call(pod, cfg).patch);
  EXPECT_EQ(after["spec"]["containers"][0]["env"],
            json::parse(R"([{"name":"A","value":"1"},{"name":"CUDA_TASK_PRIORITY","value":"0"},
                            {"name":"GPU_CORE_UTILIZATION_POLICY","value":"force"}])"));
}

TEST(WebhookTest, InitContainersArePatchedByTheirOwnPath) {
  json pod = test::sched_pod("p", {});
  pod["spec"]["initContainers"] = {
      {{"name", "init"}, {"resources", {{"limits", {{"nvidia.com/gpumem", "500"}}}}}}};
  Reply r = call(pod);
  ASSERT_TRUE(r.allowed);
  EXPECT_EQ(r.patch[0]["path"], "/spec/initContainers/0/resources/limits/nvidia.com~1gpu");
}

struct DenyCase {
  const char* name;
  std::map<std::string, std::string> limits;
  const char* message;
};

class WebhookDenyTest : public ::testing::TestWithParam<DenyCase> {};

TEST_P(WebhookDenyTest, RefusedWithAClearMessage) {
  Reply r = call(test::sched_pod("p", GetParam().limits));
  EXPECT_FALSE(r.allowed);
  EXPECT_NE(r.message.find(GetParam().message), std::string::npos) << r.message;
  EXPECT_FALSE(r.raw["response"].contains("patch"));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, WebhookDenyTest,
    ::testing::Values(DenyCase{"percentage_150",
                               {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "150"}},
                               "nvidia.com/gpumem-percentage is 150, must be 0..100"},
                      DenyCase{"cores_200",
                               {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "200"}},
                               "nvidia.com/gpucores is 200, must be 0..100"},
                      DenyCase{"fraction",
                               {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1.5"}},
                               "container 'main': nvidia.com/gpumem='1.5'"},
                      DenyCase{"garbage",
                               {{"nvidia.com/gpu", "lots"}},
                               "container 'main': nvidia.com/gpu='lots'"},
                      DenyCase{"negative_without_count",
                               {{"nvidia.com/gpumem", "-5"}},
                               "container 'main': nvidia.com/gpumem='-5': must not be negative"}),
    [](const auto& pi) { return std::string(pi.param.name); });

// These were admitted, then refused by the filter or by Allocate: the pod
// stayed Pending with no reason. The webhook now refuses them with the very
// words the filter (pod_request) and Allocate (task_priority) use.
TEST(WebhookTest, RefusesWhatTheFilterOrAllocateWouldInTheirWords) {
  SchedulerConfig cfg;
  struct Case {
    std::map<std::string, std::string> limits;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "9223372036854775807"}},
       "container 'main': nvidia.com/gpumem='9223372036854775807': too large (at most "
       "2147483647)"},
      {{{"nvidia.com/gpu", "2147483648"}},
       "container 'main': nvidia.com/gpu='2147483648': too large (at most 2147483647)"},
      // Without a count the webhook adds one, and the filter then reads the memory.
      {{{"nvidia.com/gpumem", "9223372036854775807"}},
       "container 'main': nvidia.com/gpumem='9223372036854775807': too large (at most "
       "2147483647)"},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/priority", "7"}},
       "container main: nvidia.com/priority '7' is not 0 (high) or 1 (low)"},
  };
  for (const Case& c : cases) {
    const json pod = test::sched_pod("p", c.limits);
    Reply r = call(pod, cfg);
    EXPECT_FALSE(r.allowed) << c.message;
    EXPECT_EQ(r.message, c.message);
  }
  // The same text as the filter's own check, not a copy of it.
  json pod = test::sched_pod("p", {{"nvidia.com/gpu", "2147483648"}});
  auto typed = k8s::Pod::from_json(pod);
  ASSERT_TRUE(typed);
  auto filter = pod_request(*typed, cfg);
  ASSERT_FALSE(filter);
  EXPECT_EQ(call(pod, cfg).message, filter.error().message);
  // A bad scheduling annotation: the filter would refuse it too.
  json anno = test::sched_pod("p", {{"nvidia.com/gpu", "1"}});
  anno["metadata"]["annotations"] = {{"hami.io/node-scheduler-policy", "sideways"}};
  Reply a = call(anno, cfg);
  EXPECT_FALSE(a.allowed);
  EXPECT_NE(a.message.find("sideways"), std::string::npos) << a.message;
  // Priority 0 and 1 stay fine.
  EXPECT_TRUE(
      call(test::sched_pod("p", {{"nvidia.com/gpu", "1"}, {"nvidia.com/priority", "1"}})).allowed);
}

// A container on an MPS GPU reaches one GPU's MPS server: asking an MPS pod
// for two GPUs is refused at creation, not left Pending.
TEST(WebhookTest, MpsPodAskingForTwoGpusIsRefused) {
  json pod = test::sched_pod("p", {{"nvidia.com/gpu", "2"}}, "", {{"nvidia.com/vgpu-mode", "mps"}});
  Reply r = call(pod);
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.message,
            "container 0 asks for 2 GPUs with nvidia.com/vgpu-mode mps: a container on an MPS GPU "
            "takes exactly one GPU");
  EXPECT_TRUE(
      call(test::sched_pod("p", {{"nvidia.com/gpu", "1"}}, "", {{"nvidia.com/vgpu-mode", "mps"}}))
          .allowed);
}

TEST(WebhookTest, PrivilegedAndPreassignedPodsAreRefused) {
  json pod = test::sched_pod("p", {{"nvidia.com/gpu", "1"}});
  pod["spec"]["containers"][0]["securityContext"] = {{"privileged", true}};
  Reply r = call(pod);
  EXPECT_FALSE(r.allowed);
  EXPECT_NE(r.message.find("container main is privileged"), std::string::npos) << r.message;
  json pre = test::sched_pod("p", {{"nvidia.com/gpu", "1"}});
  pre["spec"]["nodeName"] = "n1";
  r = call(pre);
  EXPECT_FALSE(r.allowed);
  EXPECT_NE(r.message.find("pod has node n1 assigned"), std::string::npos) << r.message;
}

TEST(WebhookTest, OtherPodsAreLeftAlone) {
  Reply plain = call(test::sched_pod("p", {{"cpu", "1"}}));
  EXPECT_TRUE(plain.allowed);
  EXPECT_TRUE(plain.patch.empty());
  json volcano = test::sched_pod("p", {{"nvidia.com/gpu", "1"}});
  volcano["spec"]["schedulerName"] = "volcano";
  Reply v = call(volcano);
  EXPECT_TRUE(v.allowed);
  EXPECT_TRUE(v.patch.empty());
  json def = test::sched_pod("p", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "30"}});
  def["spec"]["schedulerName"] = "default-scheduler";
  Reply d = call(def);
  EXPECT_EQ(
      d.patch,
      json::parse(R"([{"op":"replace","path":"/spec/schedulerName","value":"hami-scheduler"}])"));
}

TEST(WebhookTest, BadBodiesGetAnAnswer) {
  SchedulerConfig cfg;
  for (const char* body : {"", "{", "[]", R"({"request":5})", R"({"request":{"uid":"x"}})",
                           R"({"request":{"uid":"x","object":"pod"}})"}) {
    json out = json::parse(admit(body, cfg));
    EXPECT_FALSE(out["response"]["allowed"]) << body;
    EXPECT_FALSE(out["response"]["status"]["message"].get<std::string>().empty()) << body;
  }
  json out = json::parse(admit(R"({"request":{"uid":"x","object":{"spec":{}}}})", cfg));
  EXPECT_EQ(out["response"]["uid"], "x");
  EXPECT_EQ(out["response"]["status"]["message"], "pod has no containers");
}

// 10 million nested objects cost ~1.6 GB in the DOM parse; the shape is now
// refused before any parse, with the reason.
TEST(WebhookTest, DeepOrHugeBodiesAreRefusedBeforeTheParse) {
  SchedulerConfig cfg;
  std::string deep = R"({"request":{"uid":"x","object":)";
  for (int i = 0; i < 100000; ++i)
    deep += "{\"a\":";
  json out = json::parse(admit(deep, cfg));
  EXPECT_FALSE(out["response"]["allowed"]);
  EXPECT_EQ(out["response"]["status"]["message"],
            "AdmissionReview: JSON nested deeper than 64 levels (at byte 341)");
  std::string wide = R"({"request":{"uid":"x","object":[)";
  for (int i = 0; i < 1200000; ++i)
    wide += "{},";
  wide += "{}]}}";
  out = json::parse(admit(wide, cfg));
  EXPECT_NE(out["response"]["status"]["message"].get<std::string>().find(
                "AdmissionReview: JSON has more than 1000000 values"),
            std::string::npos);
  out = json::parse(admit(std::string(kMaxAdmissionBody + 1, ' '), cfg));
  EXPECT_NE(out["response"]["status"]["message"].get<std::string>().find("over the limit"),
            std::string::npos);
}

TEST(WebhookTest, JsonPointerEscaping) {
  EXPECT_EQ(json_pointer_escape("nvidia.com/gpu"), "nvidia.com~1gpu");
  EXPECT_EQ(json_pointer_escape("a~b/c"), "a~0b~1c");
  EXPECT_EQ(json_pointer_escape("~1"), "~01");
}

}  // namespace
}  // namespace hami::scheduler
