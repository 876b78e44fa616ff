// The attacker harness for hostile pod creators (issue 36, "only the
// scheduler decides"; docs/security-scheduling.md): anyone who may create or
// edit pods forging the scheduler's decision annotations. The real
// hami-scheduler (HTTPS) and hami-device-plugin (simulated NVML, kubelet
// harness) against the test API server, sharing a decision key as the chart
// sets them up; kube-scheduler's and kubelet's calls are made by the test.
//
// The attacks, as the probe at 8ad053b ran them: phantom pods that no
// scheduler placed taking every GPU from the scheduler's view; a forged
// pending pod served by Allocate with 80 GiB and 100 % SM; an honest pod
// handed the forger's slice; the webhook admitting all of it; a placed pod's
// decision raised before kubelet admits it.
//
// To replay them against older binaries (to see them succeed), set
// HAMI_HARNESS_BASELINE_BIN to a directory holding hami-scheduler and
// hami-device-plugin: the flags they may not know (--decision-key-file,
// --decision-writers) are left out.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "k8s/base64.hpp"
#include "k8s/objects.hpp"
#include "protocol/decision.hpp"
#include "support/apiserver/api_server.hpp"
#include "support/forged_pod.hpp"
#include "support/free_port.hpp"
#include "support/kubelet/fake_kubelet.hpp"
#include "support/object_text.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"
#include "support/wait.hpp"

namespace hami::security {
namespace {

using test::annotation;

using json = nlohmann::json;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

constexpr const char* kA = "GPU-5a3e0000-0000-4000-8000-0000000000a1";  // 80 GiB
constexpr const char* kB = "GPU-5a3e0000-0000-4000-8000-0000000000b2";  // 40 GiB
constexpr const char* kNode = "node-1";
constexpr const char* kRes = "nvidia.com/gpu";
constexpr const char* kKey = "harness-decision-key-0123456789abcdef";
constexpr const char* kPluginUser = "system:serviceaccount:hami:hami-device-plugin";

const char* baseline_bin() {
  const char* d = std::getenv("HAMI_HARNESS_BASELINE_BIN");
  return d && *d ? d : nullptr;
}

json gpu_container(const json& limits) {
  return {{"name", "main"}, {"image", "cuda"}, {"resources", {{"limits", limits}}}};
}

// A pod no scheduler placed, carrying the decision annotations the probe
// wrote (tests/support/forged_pod.hpp).
json forged_pod(const std::string& name, const std::string& devices, const json& limits,
                const std::string& scheduler, bool preset_node) {
  return test::forged_pod(name, kNode, devices, limits, scheduler, preset_node);
}

json honest_pod(const std::string& name, const std::string& mem) {
  return {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", name}, {"namespace", "default"}}},
      {"spec",
       {{"schedulerName", "hami-scheduler"},
        {"containers", {gpu_container({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", mem}})}}}},
      {"status", {{"phase", "Pending"}}}};
}

class HostileTenants : public ::testing::Test {
 protected:
  void SetUp() override {
    plugins_ = root_.file("plugins");
    hook_ = root_.file("hook");
    std::filesystem::create_directories(plugins_);
    std::filesystem::create_directories(hook_ + "/vgpu");
    std::ofstream(hook_ + "/vgpu/libvgpu.so") << "not really a library";
    std::ofstream(root_.file("nvml.script")) << "";
    std::ofstream(root_.file("decision.key")) << kKey << "\n";
    api_.put("nodes", {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", kNode}}}});
    kubeconfig_ = api_.write_kubeconfig(root_.file("kubeconfig"));
    kubelet_ = std::make_unique<test::FakeKubelet>(plugins_);
    const test::CertAndKey ck = api_.ca().issue_server({"localhost"}, {"127.0.0.1"});
    std::ofstream(root_.file("tls.crt")) << ck.cert_pem;
    std::ofstream(root_.file("tls.key")) << ck.key_pem;
    std::ofstream(root_.file("ca.crt")) << api_.ca_pem();
  }

  void TearDown() override {
    for (auto* c : {&plugin_, &scheduler_}) {
      if (!*c) continue;
      (*c)->kill(SIGTERM);
      const test::ProcessResult r = (*c)->finish();
      EXPECT_EQ(r.exit_code, 0) << "a daemon did not stop cleanly on SIGTERM";
      if (HasFailure()) std::fprintf(stderr, "--- daemon log ---\n%s", r.err.c_str());
    }
  }

  static std::string binary(const char* built, const char* name) {
    return baseline_bin() ? std::string(baseline_bin()) + "/" + name : std::string(built);
  }

  void start() {
    std::vector<std::string> dp = {binary(DEVICE_PLUGIN_BINARY, "hami-device-plugin"),
                                   "--node-name=" + std::string(kNode),
                                   "--kubeconfig=" + kubeconfig_,
                                   "--device-plugin-path=" + plugins_,
                                   "--hook-path=" + hook_,
                                   "--lock-dir=" + root_.file("vgpulock"),
                                   "--nvml-library=" + std::string(SIMNVML),
                                   "--health-interval=50ms",
                                   "--register-interval=200ms"};
    port_ = test::free_port();
    metrics_port_ = test::free_port();
    std::vector<std::string> sched = {
        binary(SCHEDULER_BINARY, "hami-scheduler"),
        "--kubeconfig=" + kubeconfig_,
        "--http_bind=127.0.0.1:" + std::to_string(port_),
        "--cert_file=" + root_.file("tls.crt"),
        "--key_file=" + root_.file("tls.key"),
        "--metrics-bind-address=127.0.0.1:" + std::to_string(metrics_port_)};
    if (!baseline_bin()) {
      dp.push_back("--decision-key-file=" + root_.file("decision.key"));
      sched.push_back("--decision-key-file=" + root_.file("decision.key"));
      sched.push_back(std::string("--decision-writers=") + kPluginUser);
    }
    plugin_.emplace(
        test::Child::spawn(dp, {{"SIMGPU_STATE", root_.file("gpu.state")},
                                {"SIMGPU_DEVICES", std::string(kA) + ":80g," + kB + ":40g"},
                                {"SIMGPU_NVML_SCRIPT", root_.file("nvml.script")},
                                {"SIMGPU_FAIL", test::kUnset},
                                {"KUBECONFIG", test::kUnset}}));
    ASSERT_TRUE(kubelet_->wait_for_registrations(1)) << "the device plugin never registered";
    ASSERT_TRUE(
        kubelet_->wait_for_devices(kRes, [](const auto& l) { return l.devices_size() == 20; }));
    scheduler_.emplace(test::Child::spawn(sched, {{"KUBECONFIG", test::kUnset}}));
    ASSERT_TRUE(test::wait_until(
        [&] {
          auto r = client().Get("/readyz");
          return r && r->status == 200;
        },
        15s, 20ms))
        << "the scheduler never became ready";
  }

  httplib::SSLClient& client() {
    if (!client_) {
      client_ = std::make_unique<httplib::SSLClient>("127.0.0.1", port_);
      client_->set_ca_cert_path(root_.file("ca.crt").c_str());
      client_->enable_server_certificate_verification(true);
    }
    return *client_;
  }
  json post(const std::string& path, const json& body) {
    auto r = client().Post(path.c_str(), body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 200) << path;
    if (!r) return json();
    return json::parse(r->body, nullptr, false);
  }
  std::string metrics() {
    httplib::Client m("127.0.0.1", metrics_port_);
    auto r = m.Get("/metrics");
    return r ? r->body : "";
  }

  // What kube-scheduler does: filter (once the scheduler knows node-1), then
  // bind. "" or the error.
  std::string schedule(const json& pod) {
    json f;
    const bool fits = test::wait_until(
        [&] {
          f = post("/filter", {{"Pod", pod}, {"NodeNames", {kNode}}});
          return f["NodeNames"] == json::array({kNode});
        },
        10s, 50ms);
    if (!fits) return "filter: " + f.dump();
    const json b = post("/bind", {{"PodName", pod["metadata"]["name"]},
                                  {"PodNamespace", "default"},
                                  {"PodUID", pod["metadata"]["uid"]},
                                  {"Node", kNode}});
    return b.value("Error", "no answer");
  }

  // The pod signed as the scheduler signs its binding.
  static json signed_by_scheduler(json pod) {
    auto typed = k8s::Pod::from_json(pod);
    pod["metadata"]["annotations"]["hami.io/decision-signature"] =
        protocol::DecisionKeys::parse(kKey, "test")->sign(protocol::decision_of(*typed));
    return pod;
  }

  // Waits until the scheduler's cache holds `pod` (its watch delivers in
  // order, so everything created before it has been seen too).
  bool counted(const std::string& pod) {
    return test::wait_until(
        [&] { return metrics().find("pod=\"" + pod + "\"") != std::string::npos; }, 10s, 50ms);
  }

  // What kubelet does when Allocate fails: the pod fails admission.
  void kubelet_refused(const std::string& name) {
    json p = *api_.get("pods", "default", name);
    p["status"]["phase"] = "Failed";
    api_.put("pods", p);
  }

  test::TempDir root_;
  std::string plugins_, hook_, kubeconfig_;
  test::ApiServer api_;
  std::unique_ptr<test::FakeKubelet> kubelet_;
  std::optional<test::Child> plugin_, scheduler_;
  std::unique_ptr<httplib::SSLClient> client_;
  int port_ = 0, metrics_port_ = 0;
};

// 4 phantom pods, never run, took an honest 1-GPU pod from every fitting
// node to none (CardInsufficientMemory).
TEST_F(HostileTenants, ForgedPodsTakeNoGpu) {
  start();
  if (HasFatalFailure()) return;
  const std::string both = std::string(kA) + ",NVIDIA,81920,100:" + kB + ",NVIDIA,40960,100:;";
  // schedulerName nobody, never bound; and spec.nodeName preset with our
  // scheduler's name, asking for no GPU so kubelet runs them unallocated.
  api_.put("pods", forged_pod("phantom-1", both, {{"cpu", "1"}}, "nobody", false));
  api_.put("pods", forged_pod("phantom-2", both, {{"cpu", "1"}}, "nobody", false));
  api_.put("pods", forged_pod("phantom-3", both, {{"cpu", "1"}}, "hami-scheduler", true));
  api_.put("pods", forged_pod("phantom-4", both, {{"cpu", "1"}}, "hami-scheduler", true));
  // A pod the scheduler did place, created after them.
  json marker = forged_pod("marker", std::string(kA) + ",NVIDIA,1000,10:;",
                           {{"nvidia.com/gpu", "1"}}, "hami-scheduler", true);
  marker["metadata"]["annotations"]["hami.io/bind-phase"] = "success";
  marker = api_.put("pods", marker);
  api_.put("pods", signed_by_scheduler(marker));
  ASSERT_TRUE(counted("marker")) << metrics();
  EXPECT_EQ(metrics().find("pod=\"phantom-"), std::string::npos) << "a phantom pod is counted";

  json honest = api_.put("pods", honest_pod("honest", "30000"));
  json f;
  ASSERT_TRUE(test::wait_until(
      [&] {
        f = post("/filter", {{"Pod", honest}, {"NodeNames", {kNode}}});
        return f["FailedNodes"].value(kNode, "") != "node unregistered";
      },
      10s, 50ms));
  ASSERT_EQ(f["NodeNames"], json::array({kNode})) << f.dump();
  ASSERT_EQ(schedule(honest), "");
  v1beta1::AllocateResponse resp;
  const std::string alloc =
      annotation(api_.get("pods", "default", "honest"), "hami.io/vgpu-devices-allocated");
  const grpc::Status st =
      kubelet_->allocate(kRes, {{alloc.substr(0, alloc.find(',')) + "-0"}}, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.container_responses(0).envs().at("CUDA_DEVICE_MEMORY_LIMIT_0"), "30000m");
}

// Allocate answered CUDA_DEVICE_MEMORY_LIMIT_0=81920m, SM 100, for a pod no
// scheduler placed; and an honest pod admitted while it was pending got the
// forger's GPU with 1 MiB and 1 % SM, the forger marked success.
TEST_F(HostileTenants, ForgedPendingPodGetsNoGpuAndNoHonestPodsSlice) {
  start();
  if (HasFatalFailure()) return;
  api_.put("pods", forged_pod("whole", std::string(kA) + ",NVIDIA,81920,100:;",
                              {{"nvidia.com/gpu", "1"}}, "nobody", true));
  v1beta1::AllocateResponse resp;
  grpc::Status st = kubelet_->allocate(kRes, {{std::string(kA) + "-0"}}, &resp);
  ASSERT_FALSE(st.ok()) << "the forged pod was served: " << resp.DebugString();
  EXPECT_NE(annotation(api_.get("pods", "default", "whole"), "hami.io/bind-phase"), "success");
  kubelet_refused("whole");

  // A forged slice waits on the node (bind-time 0), and an honest pod is
  // placed by the scheduler.
  api_.put("pods", forged_pod("slice", std::string(kB) + ",NVIDIA,1,1:;", {{"nvidia.com/gpu", "1"}},
                              "nobody", true));
  json honest = api_.put("pods", honest_pod("honest", "4000"));
  ASSERT_EQ(schedule(honest), "");
  const std::string alloc =
      annotation(api_.get("pods", "default", "honest"), "hami.io/vgpu-devices-allocated");
  const std::string gpu = alloc.substr(0, alloc.find(','));
  // kubelet may be admitting either: neither is served.
  st = kubelet_->allocate(kRes, {{gpu + "-0"}}, &resp);
  if (st.ok()) {
    EXPECT_NE(resp.container_responses(0).envs().at("CUDA_DEVICE_MEMORY_LIMIT_0"), "1m")
        << "the honest pod got the forger's slice";
  }
  ASSERT_FALSE(st.ok()) << "served while an unplaced GPU pod waits on the node";
  // Said as the node's protocol says it (match-pods, our plugin's default:
  // "no pod gets a GPU until default/slice is gone"; the lock: "but pod
  // default/slice also waits there").
  EXPECT_THAT(st.error_message(), HasSubstr("default/slice"));
  EXPECT_THAT(st.error_message(), HasSubstr("is not trusted to decide unsigned"));
  EXPECT_NE(annotation(api_.get("pods", "default", "slice"), "hami.io/bind-phase"), "success");
  // kubelet refuses the forged pod; the honest one gets its own decision.
  kubelet_refused("slice");
  st = kubelet_->allocate(kRes, {{gpu + "-0"}}, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.container_responses(0).envs().at("CUDA_DEVICE_MEMORY_LIMIT_0"), "4000m");
  EXPECT_EQ(annotation(api_.get("pods", "default", "honest"), "hami.io/bind-phase"), "success");
}

// Past the webhook (pods labelled hami.io/webhook=ignore skip it), the
// owner of a placed pod raised its decision before kubelet admitted it, then
// removed it to free the GPU in the scheduler's count.
TEST_F(HostileTenants, PlacedPodsDecisionCannotBeRaisedOrDropped) {
  start();
  if (HasFatalFailure()) return;
  json victim = api_.put("pods", honest_pod("mine", "4000"));
  ASSERT_EQ(schedule(victim), "");
  json raised = *api_.get("pods", "default", "mine");
  const std::string alloc = annotation(raised, "hami.io/vgpu-devices-allocated");
  const std::string gpu = alloc.substr(0, alloc.find(','));
  for (const char* key : {"hami.io/vgpu-devices-to-allocate", "hami.io/vgpu-devices-allocated"})
    raised["metadata"]["annotations"][key] = gpu + ",NVIDIA,81920,100:;";
  api_.put("pods", raised);
  v1beta1::AllocateResponse resp;
  const grpc::Status st = kubelet_->allocate(kRes, {{gpu + "-0"}}, &resp);
  if (st.ok()) {
    ADD_FAILURE() << "served the raised decision: CUDA_DEVICE_MEMORY_LIMIT_0="
                  << resp.container_responses(0).envs().at("CUDA_DEVICE_MEMORY_LIMIT_0");
  }
  EXPECT_THAT(st.error_message(), HasSubstr("does not match the pod's UID, node and devices"));
  // The scheduler still counts the 4000 MiB it gave, not 80 GiB, and not
  // nothing once the annotations are gone.
  json dropped = *api_.get("pods", "default", "mine");
  dropped["metadata"]["annotations"] = json::object();
  api_.put("pods", dropped);
  // A pod placed after those changes: once it is counted, they were seen.
  json marker = forged_pod("marker", std::string(kB) + ",NVIDIA,1000,10:;",
                           {{"nvidia.com/gpu", "1"}}, "hami-scheduler", true);
  marker["metadata"]["annotations"]["hami.io/bind-phase"] = "success";
  api_.put("pods", signed_by_scheduler(api_.put("pods", marker)));
  ASSERT_TRUE(counted("marker")) << metrics();
  const std::string m = metrics();
  const size_t at = m.find(
      "hami_vgpu_memory_allocated_bytes{namespace=\"default\",node=\"node-1\","
      "pod=\"mine\"");
  ASSERT_NE(at, std::string::npos) << "the placed pod is no longer counted:\n" << m;
  const std::string line = m.substr(at, m.find('\n', at) - at);
  EXPECT_THAT(line, ::testing::EndsWith(" " + std::to_string(4000LL << 20))) << line;
}

// The webhook admitted the forged pods unchanged, on create and on update.
TEST_F(HostileTenants, WebhookRefusesForgedDecisions) {
  start();
  if (HasFatalFailure()) return;
  auto review = [](const json& pod, const json& old_pod, const std::string& user) {
    return json{{"apiVersion", "admission.k8s.io/v1"},
                {"kind", "AdmissionReview"},
                {"request",
                 {{"uid", "r1"},
                  {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                  {"operation", old_pod.is_null() ? "CREATE" : "UPDATE"},
                  {"namespace", "default"},
                  {"userInfo", {{"username", user}}},
                  {"object", pod},
                  {"oldObject", old_pod}}}};
  };
  const json forged =
      forged_pod("f", std::string(kA) + ",NVIDIA,81920,100:;", {{"cpu", "1"}}, "nobody", false);
  json r = post("/webhook", review(forged, nullptr, "alice"))["response"];
  EXPECT_FALSE(r["allowed"]) << r.dump();
  EXPECT_THAT(r["status"].value("message", ""), HasSubstr("pod carries hami.io/vgpu-node"));
  json before = honest_pod("p", "1000");
  before["metadata"]["annotations"] = {
      {"hami.io/vgpu-devices-allocated", "GPU-a,NVIDIA,1000,10:;"}};
  json after = before;
  after["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"] = "GPU-a,NVIDIA,81920,100:;";
  r = post("/webhook", review(after, before, "alice"))["response"];
  EXPECT_FALSE(r["allowed"]) << r.dump();
  r = post("/webhook", review(after, before, kPluginUser))["response"];
  EXPECT_TRUE(r["allowed"]) << r.dump();
  // And a GPU pod gets the runtime's default seccomp profile.
  json created = honest_pod("q", "1000");
  created["spec"].erase("schedulerName");
  r = post("/webhook", review(created, nullptr, "alice"))["response"];
  ASSERT_TRUE(r["allowed"]) << r.dump();
  const json patched =
      created.patch(json::parse(*k8s::base64_decode(r["patch"].get<std::string>())));
  EXPECT_EQ(patched["spec"]["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
}

}  // namespace
}  // namespace hami::security
