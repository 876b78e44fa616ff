// The mutating webhook: AdmissionReview v1 and v1beta1 in and out, upstream's
// defaults, validation messages, and JSONPatch paths with JSON-Pointer escaping.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "k8s/base64.hpp"
#include "protocol/decision.hpp"
#include "scheduler/helpers.hpp"
#include "scheduler/pod_request.hpp"
#include "scheduler/webhook.hpp"

namespace hami::scheduler {
namespace {

using nlohmann::json;

json review(const json& pod, const std::string& version = "admission.k8s.io/v1",
            const json& old_pod = nullptr, const std::string& user = "admin") {
  return {{"apiVersion", version},
          {"kind", "AdmissionReview"},
          {"request",
           {{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"},
            {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
            {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
            {"namespace", "default"},
            {"operation", old_pod.is_null() ? "CREATE" : "UPDATE"},
            {"userInfo", {{"username", user}}},
            {"object", pod},
            {"oldObject", old_pod},
            {"dryRun", false}}}};
}

struct Reply {
  json raw;
  bool allowed;
  std::string message;
  json patch;  // decoded
};

Reply call(const json& pod, const SchedulerConfig& cfg = {},
           const std::string& version = "admission.k8s.io/v1", const json& old_pod = nullptr,
           const std::string& user = "admin") {
  Reply r;
  r.raw = json::parse(admit(review(pod, version, old_pod, user).dump(), cfg));
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
    {"op":"add","path":"/spec/securityContext","value":{"seccompProfile":{"type":"RuntimeDefault"}}},
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
  EXPECT_NE(r.message.find("pod has node n1 assigned: a GPU pod must be placed by hami-scheduler"),
            std::string::npos)
      << r.message;
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
  EXPECT_EQ(d.patch, json::parse(R"([
    {"op":"add","path":"/spec/securityContext","value":{"seccompProfile":{"type":"RuntimeDefault"}}},
    {"op":"replace","path":"/spec/schedulerName","value":"hami-scheduler"}])"));
}

TEST(WebhookTest, RuntimeClassGoesOnGpuPodsThatNameNone) {
  SchedulerConfig cfg;
  cfg.runtime_class_name = "nvidia";
  json pod = test::sched_pod("p", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}});
  Reply r = call(pod, cfg);
  ASSERT_TRUE(r.allowed) << r.message;
  EXPECT_EQ(applied(pod, r.patch)["spec"]["runtimeClassName"], "nvidia");
  // Memory alone: the count is injected, so it is a GPU pod too.
  json mem_only = test::sched_pod("p", {{"nvidia.com/gpumem", "1000"}});
  EXPECT_EQ(applied(mem_only, call(mem_only, cfg).patch)["spec"]["runtimeClassName"], "nvidia");
  // The pod's own class stays.
  pod["spec"]["runtimeClassName"] = "kata-nvidia";
  EXPECT_EQ(applied(pod, call(pod, cfg).patch)["spec"]["runtimeClassName"], "kata-nvidia");
  // A pod without GPUs, or the default config (""), gets none.
  json plain = test::sched_pod("p", {{"cpu", "1"}});
  EXPECT_TRUE(call(plain, cfg).patch.empty());
  json gpu = test::sched_pod("p", {{"nvidia.com/gpu", "1"}});
  EXPECT_FALSE(applied(gpu, call(gpu).patch)["spec"].contains("runtimeClassName"));
}

TEST(WebhookTest, OverwriteEnvHidesGpusFromContainersThatAskForNone) {
  SchedulerConfig cfg;
  cfg.overwrite_env = true;
  const json none = json::parse(R"([{"name":"NVIDIA_VISIBLE_DEVICES","value":"none"}])");
  // A GPU pod: its sidecar and init container get none, the GPU container keeps its GPUs.
  json pod = test::sched_pod("p", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}});
  pod["spec"]["containers"].push_back({{"name", "sidecar"}, {"image", "cuda"}});
  pod["spec"]["initContainers"] = {
      {{"name", "init"},
       {"image", "cuda"},
       {"env", {{{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", "all"}}}}}};
  Reply r = call(pod, cfg);
  ASSERT_TRUE(r.allowed) << r.message;
  json after = applied(pod, r.patch);
  EXPECT_FALSE(after["spec"]["containers"][0].contains("env")) << after.dump();
  EXPECT_EQ(after["spec"]["containers"][1]["env"], none);
  EXPECT_EQ(after["spec"]["initContainers"][0]["env"], none);  // "all" replaced
  // A pod without GPUs (upstream changes every pod its webhook sees): each container.
  json plain = test::sched_pod("p", {{"cpu", "1"}});
  plain["spec"]["containers"].push_back(
      {{"name", "b"}, {"env", {{{"name", "A"}, {"value", "1"}}}}});
  after = applied(plain, call(plain, cfg).patch);
  EXPECT_EQ(after["spec"]["containers"][0]["env"], none);
  EXPECT_EQ(after["spec"]["containers"][1]["env"],
            json::parse(
                R"([{"name":"A","value":"1"},{"name":"NVIDIA_VISIBLE_DEVICES","value":"none"}])"));
  EXPECT_FALSE(after["spec"].contains("schedulerName"));  // still not ours to schedule
  // Another scheduler's pod is not changed; off (the default) changes nothing.
  plain["spec"]["schedulerName"] = "volcano";
  EXPECT_TRUE(call(plain, cfg).patch.empty());
  EXPECT_TRUE(call(test::sched_pod("p", {{"cpu", "1"}})).patch.empty());
}

TEST(WebhookTest, DeviceConfigSetsRuntimeClassAndOverwriteEnv) {
  SchedulerConfig cfg;
  // What upstream's chart renders by default.
  ASSERT_TRUE(apply_device_config_text(
      cfg, "nvidia:\n  overwriteEnv: false\n  runtimeClassName: \"\"\n", "t"));
  EXPECT_FALSE(cfg.overwrite_env);
  EXPECT_EQ(cfg.runtime_class_name, "");
  ASSERT_TRUE(apply_device_config_text(
      cfg, "nvidia:\n  overwriteEnv: true\n  runtimeClassName: nvidia\n", "t"));
  EXPECT_TRUE(cfg.overwrite_env);
  EXPECT_EQ(cfg.runtime_class_name, "nvidia");
  auto bad = apply_device_config_text(cfg, "nvidia:\n  overwriteEnv: maybe\n", "t");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, "t: nvidia.overwriteEnv: expected true or false");
  bad = apply_device_config_text(cfg, "nvidia:\n  runtimeClassName: Nvidia_GPU\n", "t");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("not a RuntimeClass name"), std::string::npos)
      << bad.error().message;
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

// Issue 36: a pod of any scheduler, asking for GPUs or not, created with the
// scheduler's decision annotations was admitted unchanged; the scheduler
// counted it and the device plugin served it.
TEST(WebhookTest, DecisionAnnotationsAreRefusedOnCreate) {
  json gpu = test::sched_pod("p", {{"nvidia.com/gpu", "1"}});
  json plain = test::sched_pod("p", {{"cpu", "1"}});
  json nobody = test::sched_pod("p", {{"nvidia.com/gpu", "1"}});
  nobody["spec"]["schedulerName"] = "nobody";
  nobody["spec"]["nodeName"] = "n1";
  for (const char* key : protocol::kDecisionAnnotations) {
    for (json pod : {gpu, plain, nobody}) {
      pod["metadata"]["annotations"][key] = "GPU-x,NVIDIA,16000,100:;";
      Reply r = call(pod);
      EXPECT_FALSE(r.allowed) << key << " on " << pod.dump();
      EXPECT_NE(r.message.find(std::string("pod carries ") + key), std::string::npos) << r.message;
      EXPECT_NE(r.message.find("only the scheduler and the device plugin may write them"),
                std::string::npos)
          << r.message;
    }
  }
  // Every forged annotation is named at once.
  json all = plain;
  all["metadata"]["annotations"] = {{"hami.io/vgpu-node", "n1"},
                                    {"hami.io/bind-phase", "allocating"},
                                    {"hami.io/node-scheduler-policy", "spread"}};
  Reply r = call(all);
  EXPECT_NE(r.message.find("pod carries hami.io/vgpu-node, hami.io/bind-phase:"), std::string::npos)
      << r.message;
  // The user's own hami.io annotations are theirs.
  json ok = gpu;
  ok["metadata"]["annotations"] = {{"hami.io/node-scheduler-policy", "spread"},
                                   {"nvidia.com/use-gputype", "A100"}};
  EXPECT_TRUE(call(ok).allowed);
}

TEST(WebhookTest, OnlyDecisionWritersChangeDecisionsOnUpdate) {
  SchedulerConfig cfg;
  cfg.decision_writers = {"system:serviceaccount:hami:hami-device-plugin"};
  json placed = test::placed_pod("p", "u1", "n1", "GPU-a,NVIDIA,1000,10:;");
  placed["metadata"]["annotations"]["hami.io/bind-phase"] = "allocating";
  // Set, changed, removed: each refused to the pod's owner.
  json raised = placed;
  raised["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"] = "GPU-a,NVIDIA,80000,100:;";
  json removed = placed;
  removed["metadata"]["annotations"].erase("hami.io/vgpu-devices-allocated");
  json added = placed;
  added["metadata"]["annotations"]["hami.io/vgpu-devices-to-allocate"] = "GPU-a,NVIDIA,80000,100:;";
  for (const json& after : {raised, removed, added}) {
    Reply r = call(after, cfg, "admission.k8s.io/v1", placed, "alice");
    EXPECT_FALSE(r.allowed) << after.dump();
    EXPECT_NE(r.message.find("user alice may not set, change or remove hami.io/vgpu-devices"),
              std::string::npos)
        << r.message;
    EXPECT_TRUE(r.patch.empty());
  }
  // The device plugin records what it served.
  json served = placed;
  served["metadata"]["annotations"]["hami.io/bind-phase"] = "success";
  served["metadata"]["annotations"]["hami.io/vgpu-devices-to-allocate"] = ";";
  EXPECT_TRUE(call(served, cfg, "admission.k8s.io/v1", placed,
                   "system:serviceaccount:hami:hami-device-plugin")
                  .allowed);
  // Other changes by anyone pass, and an update is never mutated.
  json labelled = placed;
  labelled["metadata"]["labels"] = {{"team", "a"}};
  labelled["metadata"]["annotations"]["note"] = "x";
  Reply r = call(labelled, cfg, "admission.k8s.io/v1", placed, "alice");
  EXPECT_TRUE(r.allowed) << r.message;
  EXPECT_TRUE(r.patch.empty());
  // An UPDATE without the old object cannot be judged.
  json bad = review(labelled, "admission.k8s.io/v1", placed, "alice");
  bad["request"].erase("oldObject");
  EXPECT_FALSE(json::parse(admit(bad.dump(), cfg))["response"]["allowed"]);
}

json seccomp_patch() {
  return {{"op", "add"},
          {"path", "/spec/securityContext"},
          {"value", {{"seccompProfile", {{"type", "RuntimeDefault"}}}}}};
}

bool has_op(const json& patch, const json& op) {
  return std::find(patch.begin(), patch.end(), op) != patch.end();
}

// Issue 36: under the default Unconfined profile a GPU pod's process could
// `unshare -Urm` and mount over /etc/ld.so.preload or the limits file.
TEST(WebhookTest, GpuPodsGetRuntimeDefaultSeccomp) {
  Reply r = call(test::sched_pod("p", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}}));
  ASSERT_TRUE(r.allowed) << r.message;
  EXPECT_TRUE(has_op(r.patch, seccomp_patch())) << r.patch.dump();
  // A pod security context without a profile gets one added inside it.
  json with_sc = test::sched_pod("p", {{"nvidia.com/gpu", "1"}});
  with_sc["spec"]["securityContext"] = {{"runAsUser", 1000}};
  r = call(with_sc);
  const json inside = {{"op", "add"},
                       {"path", "/spec/securityContext/seccompProfile"},
                       {"value", {{"type", "RuntimeDefault"}}}};
  EXPECT_TRUE(has_op(r.patch, inside)) << r.patch.dump();
  EXPECT_EQ(applied(with_sc, r.patch)["spec"]["securityContext"],
            json::parse(R"({"runAsUser":1000,"seccompProfile":{"type":"RuntimeDefault"}})"));
  // A profile of the pod's own (field or legacy annotation) is kept.
  json localhost = test::sched_pod("p", {{"nvidia.com/gpu", "1"}});
  localhost["spec"]["securityContext"] = {
      {"seccompProfile", {{"type", "Localhost"}, {"localhostProfile", "gpu.json"}}}};
  r = call(localhost);
  ASSERT_TRUE(r.allowed) << r.message;
  for (const json& op : r.patch)
    EXPECT_EQ(op["path"].get<std::string>().find("/spec/securityContext"), std::string::npos);
  json legacy = test::sched_pod("p", {{"nvidia.com/gpu", "1"}}, "",
                                {{"seccomp.security.alpha.kubernetes.io/pod", "runtime/default"}});
  EXPECT_FALSE(has_op(call(legacy).patch, seccomp_patch()));
  // Pods without GPUs are not ours to change.
  EXPECT_TRUE(call(test::sched_pod("p", {{"cpu", "1"}})).patch.empty());
}

TEST(WebhookTest, UnconfinedAndSysAdminGpuPodsAreRefused) {
  auto gpu = [] { return test::sched_pod("p", {{"nvidia.com/gpu", "1"}}); };
  json pod_level = gpu();
  pod_level["spec"]["securityContext"] = {{"seccompProfile", {{"type", "Unconfined"}}}};
  json container_level = gpu();
  container_level["spec"]["containers"][0]["securityContext"] = {
      {"seccompProfile", {{"type", "Unconfined"}}}};
  json sidecar = gpu();
  sidecar["spec"]["containers"].push_back(
      {{"name", "side"},
       {"image", "x"},
       {"securityContext", {{"seccompProfile", {{"type", "Unconfined"}}}}}});
  json legacy_pod = test::sched_pod("p", {{"nvidia.com/gpu", "1"}}, "",
                                    {{"seccomp.security.alpha.kubernetes.io/pod", "unconfined"}});
  json legacy_container =
      test::sched_pod("p", {{"nvidia.com/gpu", "1"}}, "",
                      {{"container.seccomp.security.alpha.kubernetes.io/main", "unconfined"}});
  for (const json& pod : {pod_level, container_level, sidecar, legacy_pod, legacy_container}) {
    Reply r = call(pod);
    EXPECT_FALSE(r.allowed) << pod.dump();
    EXPECT_NE(r.message.find("seccomp profile Unconfined"), std::string::npos) << r.message;
  }
  for (const char* cap : {"SYS_ADMIN", "CAP_SYS_ADMIN", "all"}) {
    json pod = gpu();
    pod["spec"]["containers"][0]["securityContext"] = {
        {"capabilities", {{"add", json::array({"NET_ADMIN", cap})}}}};
    Reply r = call(pod);
    EXPECT_FALSE(r.allowed) << cap;
    EXPECT_NE(r.message.find(std::string("container main adds capability ") + cap),
              std::string::npos)
        << r.message;
  }
  // "default": the profile is a default the pod may turn off; "off": untouched.
  SchedulerConfig dflt;
  dflt.gpu_pod_seccomp = "default";
  Reply d = call(pod_level, dflt);
  EXPECT_TRUE(d.allowed) << d.message;
  EXPECT_FALSE(has_op(d.patch, seccomp_patch()));
  EXPECT_TRUE(has_op(call(gpu(), dflt).patch, seccomp_patch()));
  SchedulerConfig off;
  off.gpu_pod_seccomp = "off";
  EXPECT_TRUE(call(pod_level, off).allowed);
  EXPECT_FALSE(has_op(call(gpu(), off).patch, seccomp_patch()));
}

TEST(WebhookTest, JsonPointerEscaping) {
  EXPECT_EQ(json_pointer_escape("nvidia.com/gpu"), "nvidia.com~1gpu");
  EXPECT_EQ(json_pointer_escape("a~b/c"), "a~0b~1c");
  EXPECT_EQ(json_pointer_escape("~1"), "~01");
}

}  // namespace
}  // namespace hami::scheduler
