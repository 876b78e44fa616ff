// End to end, every part a real process or a real protocol: the test API
// server (HTTPS), hami-device-plugin (simulated NVML, kubelet harness over
// gRPC) registering node-1's GPUs, and hami-scheduler over HTTPS. A pod goes
// through the webhook (as the API server would call it), is created, then
// filter → prioritize → bind (as kube-scheduler would call them), and the
// device plugin's Allocate returns the limits the scheduler chose.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "k8s/base64.hpp"
#include "support/apiserver/api_server.hpp"
#include "support/free_port.hpp"
#include "support/kubelet/fake_kubelet.hpp"
#include "support/object_text.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"
#include "support/wait.hpp"

namespace hami::scheduler {
namespace {

using test::annotation;

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kA = "GPU-5a3e0000-0000-4000-8000-0000000000a1";
constexpr const char* kB = "GPU-5a3e0000-0000-4000-8000-0000000000b2";
constexpr const char* kNode = "node-1";
constexpr const char* kRes = "nvidia.com/gpu";

bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout = 15s) {
  return test::wait_until(pred, timeout, 10ms);
}

using test::free_port;
class EndToEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    plugins_ = root_.file("plugins");
    hook_ = root_.file("hook");
    std::filesystem::create_directories(plugins_);
    std::filesystem::create_directories(hook_ + "/vgpu");
    std::ofstream(hook_ + "/vgpu/libvgpu.so") << "not really a library";
    std::ofstream(root_.file("nvml.script")) << "";
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

  // The simulated GPUs, as SIMGPU_DEVICES and SIMGPU_NUMA spell them.
  void start(const std::string& devices = std::string(kA) + ":80g," + kB + ":40g",
             const std::string& numa = "0,1") {
    plugin_.emplace(test::Child::spawn(
        {DEVICE_PLUGIN_BINARY, "--node-name=" + std::string(kNode), "--kubeconfig=" + kubeconfig_,
         "--device-plugin-path=" + plugins_, "--hook-path=" + hook_,
         "--lock-dir=" + root_.file("vgpulock"), "--nvml-library=" + std::string(SIMNVML),
         "--health-interval=50ms", "--register-interval=200ms", "--allocate-protocol=match-pods"},
        {{"SIMGPU_STATE", root_.file("gpu.state")},
         {"SIMGPU_DEVICES", devices},
         {"SIMGPU_NUMA", numa},
         {"SIMGPU_NVML_SCRIPT", root_.file("nvml.script")},
         {"SIMGPU_FAIL", test::kUnset},
         {"KUBECONFIG", test::kUnset}}));
    ASSERT_TRUE(kubelet_->wait_for_registrations(1)) << "the device plugin never registered";
    port_ = free_port();
    scheduler_.emplace(test::Child::spawn(
        {SCHEDULER_BINARY, "--kubeconfig=" + kubeconfig_,
         "--http_bind=127.0.0.1:" + std::to_string(port_), "--cert_file=" + root_.file("tls.crt"),
         "--key_file=" + root_.file("tls.key"), "--metrics-bind-address=127.0.0.1:0", "-v4"},
        {{"KUBECONFIG", test::kUnset},
         {"POD_NAME", "hami-scheduler-0"},
         {"POD_NAMESPACE", "kube-system"}}));
    ASSERT_TRUE(wait_until([&] {
      auto r = client().Get("/readyz");
      return r && r->status == 200;
    })) << "the scheduler never became ready";
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
    EXPECT_TRUE(r) << path << ": " << httplib::to_string(r.error());
    if (!r) return json();
    EXPECT_EQ(r->status, 200) << path << ": " << r->body;
    return json::parse(r->body, nullptr, false);
  }

  test::TempDir root_;
  std::string plugins_, hook_, kubeconfig_;
  test::ApiServer api_;
  std::unique_ptr<test::FakeKubelet> kubelet_;
  std::optional<test::Child> plugin_, scheduler_;
  std::unique_ptr<httplib::SSLClient> client_;
  int port_ = 0;
};

TEST_F(EndToEndTest, PodFromWebhookToAllocate) {
  start();
  if (HasFatalFailure()) return;
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", "train"}, {"namespace", "default"}}},
              {"spec",
               {{"containers",
                 {{{"name", "main"},
                   {"image", "cuda"},
                   {"resources",
                    {{"limits",
                      {{"nvidia.com/gpumem", "3000"},
                       {"nvidia.com/gpucores", "30"},
                       {"nvidia.com/priority", "0"}}}}}}}}}}};

  // 1. The API server calls the webhook (v1) on CREATE and applies its patch.
  const json review = {{"apiVersion", "admission.k8s.io/v1"},
                       {"kind", "AdmissionReview"},
                       {"request",
                        {{"uid", "req-1"},
                         {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                         {"operation", "CREATE"},
                         {"namespace", "default"},
                         {"object", pod}}}};
  const json admitted = post("/webhook", review);
  ASSERT_TRUE(admitted["response"]["allowed"]) << admitted.dump();
  EXPECT_EQ(admitted["response"]["uid"], "req-1");
  const json patch =
      json::parse(*k8s::base64_decode(admitted["response"]["patch"].get<std::string>()));
  pod = pod.patch(patch);
  EXPECT_EQ(pod["spec"]["schedulerName"], "hami-scheduler");
  EXPECT_EQ(pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"], "1");
  pod = api_.put("pods", pod);

  // 2. kube-scheduler: filter (until the scheduler's watch has seen node-1's
  //    registration), prioritize, bind.
  const json args = {{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", {kNode, "node-2"}}};
  json filtered;
  ASSERT_TRUE(wait_until([&] {
    filtered = post("/filter", args);
    return filtered["NodeNames"] == json::array({kNode});
  })) << filtered.dump();
  EXPECT_EQ(filtered["FailedNodes"]["node-2"], "node unregistered");
  const json prio = post("/prioritize", args);
  ASSERT_EQ(prio.size(), 2u) << prio.dump();
  EXPECT_EQ(prio[0]["Host"], kNode);
  const json bound = post("/bind", {{"PodName", "train"},
                                    {"PodNamespace", "default"},
                                    {"PodUID", pod["metadata"]["uid"]},
                                    {"Node", kNode}});
  ASSERT_EQ(bound["Error"], "") << bound.dump();

  auto after = api_.get("pods", "default", "train");
  EXPECT_EQ((*after)["spec"]["nodeName"], kNode);
  const std::string alloc = annotation(after, "hami.io/vgpu-devices-allocated");
  // Spread, both GPUs idle: upstream's order tries the higher NUMA node first.
  ASSERT_THAT(alloc, ::testing::MatchesRegex("GPU-5a3e[-0-9a-f]+,NVIDIA,3000,30:;")) << alloc;
  const std::string gpu = alloc.substr(0, alloc.find(','));
  EXPECT_EQ(annotation(after, "hami.io/bind-phase"), "allocating");
  // Our plugin matches pods itself (hami.io/node-allocate-protocol): no lock.
  EXPECT_EQ(annotation(api_.get("nodes", "", kNode), "hami.io/node-allocate-protocol"),
            "match-pods/v1");
  EXPECT_EQ(annotation(api_.get("nodes", "", kNode), "hami.io/mutex.lock"), "<absent>");

  // 3. kubelet asks the device plugin for a device on that GPU and allocates.
  ASSERT_TRUE(
      kubelet_->wait_for_devices(kRes, [](const auto& l) { return l.devices_size() == 20; }));
  v1beta1::AllocateResponse resp;
  const grpc::Status st = kubelet_->allocate(kRes, {{gpu + "-0"}}, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(resp.container_responses_size(), 1);
  const auto& envs = resp.container_responses(0).envs();
  EXPECT_EQ(envs.at("NVIDIA_VISIBLE_DEVICES"), gpu);
  EXPECT_EQ(envs.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "3000m");
  EXPECT_EQ(envs.at("CUDA_DEVICE_SM_LIMIT"), "30");
  EXPECT_EQ(envs.at("CUDA_TASK_PRIORITY"), "0");

  // 4. The protocol's end: bind-phase success and upstream's pod label in the
  //    plugin's one patch, still no lock.
  after = api_.get("pods", "default", "train");
  EXPECT_EQ(annotation(after, "hami.io/bind-phase"), "success");
  EXPECT_EQ((*after)["metadata"]["labels"].value("hami.io/vgpu-node", ""), kNode);
  EXPECT_EQ(annotation(api_.get("nodes", "", kNode), "hami.io/mutex.lock"), "<absent>");

  // 5. The scheduler counts the pod: a second pod asking for both GPUs whole
  //    (no memory given = 100 % of each) no longer fits the one now shared.
  json second = pod;
  second["metadata"] = {{"name", "second"}, {"namespace", "default"}};
  second["spec"]["containers"][0]["resources"]["limits"] = {{"nvidia.com/gpu", "2"},
                                                            {"nvidia.com/gpucores", "100"}};
  second = api_.put("pods", second);
  const json f2 = post("/filter", {{"Pod", second}, {"NodeNames", {kNode}}});
  EXPECT_EQ(f2["NodeNames"], json::array()) << f2.dump();
  EXPECT_THAT(
      f2["FailedNodes"][kNode].get<std::string>(),
      ::testing::StrEq("1/2 CardInsufficientMemory, 1/2 AllocatedCardsInsufficientRequest"));
}

// Topology-aware placement from NVML to Allocate: the device plugin reads a
// scripted topology of four GPUs from the simulated NVML and registers its
// pair scores; the scheduler gives a topology-aware pod of two GPUs the
// NVLinked pair, which spread's order alone would not pick.
TEST_F(EndToEndTest, TopologyAwarePodGetsTheNvlinkedPair) {
  const std::string u[] = {kA, kB, "GPU-5a3e0000-0000-4000-8000-0000000000c3",
                           "GPU-5a3e0000-0000-4000-8000-0000000000d4"};
  // All on NUMA 0 (NODE, 20) but 1-2 on one PCIe switch (50) and 0-3 NVLinked.
  std::ofstream(root_.file("nvml.script")) << "nvlink 0 3 4\ntopology 1 2 single\n";
  start(u[0] + ":80g," + u[1] + ":80g," + u[2] + ":80g," + u[3] + ":80g", "0,0,0,0");
  if (HasFatalFailure()) return;
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata",
               {{"name", "tp2"},
                {"namespace", "default"},
                {"annotations", {{"hami.io/gpu-scheduler-policy", "topology-aware"}}}}},
              {"spec",
               {{"schedulerName", "hami-scheduler"},
                {"containers",
                 {{{"name", "main"},
                   {"image", "cuda"},
                   {"resources",
                    {{"limits", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "1000"}}}}}}}}}}};
  pod = api_.put("pods", pod);
  const json args = {{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", {kNode}}};
  json filtered;
  ASSERT_TRUE(wait_until([&] {
    filtered = post("/filter", args);
    return filtered["NodeNames"] == json::array({kNode});
  })) << filtered.dump();
  // Registered with the device list, in the same patch.
  const std::string score = annotation(api_.get("nodes", "", kNode), "hami.io/node-nvidia-score");
  EXPECT_NE(score.find("\"" + u[3] + "\":420"), std::string::npos) << score;

  const json bound = post("/bind", {{"PodName", "tp2"},
                                    {"PodNamespace", "default"},
                                    {"PodUID", pod["metadata"]["uid"]},
                                    {"Node", kNode}});
  ASSERT_EQ(bound["Error"], "") << bound.dump();
  const std::string alloc =
      annotation(api_.get("pods", "default", "tp2"), "hami.io/vgpu-devices-allocated");
  EXPECT_EQ(alloc, u[0] + ",NVIDIA,1000,0:" + u[3] + ",NVIDIA,1000,0:;");

  ASSERT_TRUE(
      kubelet_->wait_for_devices(kRes, [](const auto& l) { return l.devices_size() == 40; }));
  v1beta1::AllocateResponse resp;
  const grpc::Status st = kubelet_->allocate(kRes, {{u[0] + "-0", u[3] + "-0"}}, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(resp.container_responses_size(), 1);
  EXPECT_EQ(resp.container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES"), u[0] + "," + u[3]);
}

// The daemon's wiring of point 3 and 4 of issue 24: ResourceQuotas watched,
// the webhook and filter refusing with the quota named, Events on the pod
// through the API, the pod label (the plugin's, at Allocate) and the
// leader's role label.
TEST_F(EndToEndTest, QuotasEventsAndLabelsThroughTheDaemon) {
  api_.put("pods", {{"apiVersion", "v1"},
                    {"kind", "Pod"},
                    {"metadata", {{"name", "hami-scheduler-0"}, {"namespace", "kube-system"}}},
                    {"spec", {{"containers", {{{"name", "s"}, {"image", "x"}}}}}}});
  api_.put("resourcequotas", {{"apiVersion", "v1"},
                              {"kind", "ResourceQuota"},
                              {"metadata", {{"name", "gpu"}, {"namespace", "team"}}},
                              {"spec", {{"hard", {{"limits.nvidia.com/gpumem", "10000"}}}}}});
  start();
  if (HasFatalFailure()) return;
  auto gpu_pod = [](const std::string& name, const std::string& mem) {
    return json{{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata", {{"name", name}, {"namespace", "team"}}},
                {"spec",
                 {{"schedulerName", "hami-scheduler"},
                  {"containers",
                   {{{"name", "main"},
                     {"image", "cuda"},
                     {"resources",
                      {{"limits", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", mem}}}}}}}}}},
                {"status", {{"phase", "Pending"}}}};
  };
  // The scheduler labels its own pod as the leader (no --leader-elect).
  ASSERT_TRUE(wait_until([&] {
    auto p = api_.get("pods", "kube-system", "hami-scheduler-0");
    return p &&
           (*p)["metadata"].value("labels", json::object()).value("hami.io/scheduler-role", "") ==
               "leader";
  }));
  // The webhook: alone over the quota.
  const json review = {{"apiVersion", "admission.k8s.io/v1"},
                       {"kind", "AdmissionReview"},
                       {"request",
                        {{"uid", "r"},
                         {"namespace", "team"},
                         {"operation", "CREATE"},
                         {"object", gpu_pod("huge", "12000")}}}};
  const json denied = post("/webhook", review);
  EXPECT_FALSE(denied["response"]["allowed"]);
  EXPECT_THAT(denied["response"]["status"]["message"].get<std::string>(),
              ::testing::HasSubstr("exceeding resource quota: ResourceQuotaNotFit"));
  // Bind one pod of 6000 MiB; a second of 6000 then passes the quota.
  json first = api_.put("pods", gpu_pod("first", "6000"));
  json f;
  ASSERT_TRUE(wait_until([&] {
    f = post("/filter", {{"Pod", first}, {"NodeNames", {kNode}}});
    return f["NodeNames"] == json::array({kNode});
  })) << f.dump();
  const json bound = post("/bind", {{"PodName", "first"},
                                    {"PodNamespace", "team"},
                                    {"PodUID", first["metadata"]["uid"]},
                                    {"Node", kNode}});
  ASSERT_EQ(bound["Error"], "") << bound.dump();
  json second = api_.put("pods", gpu_pod("second", "6000"));
  f = post("/filter", {{"Pod", second}, {"NodeNames", {kNode}}});
  EXPECT_EQ(f["NodeNames"], json::array());
  EXPECT_THAT(f["FailedNodes"][kNode].get<std::string>(),
              ::testing::HasSubstr("ResourceQuotaNotFit: namespace team ResourceQuota gpu limits "
                                   "nvidia.com/gpumem to 10000; 6000 used + 6000 requested"));
  // Events through the API server, and the pod label.
  auto event = [&](const std::string& pod, const std::string& reason) -> std::optional<json> {
    for (const json& e : api_.objects("events", "team")) {
      if (e["involvedObject"]["name"] == pod && e["reason"] == reason) return e;
    }
    return std::nullopt;
  };
  ASSERT_TRUE(wait_until([&] { return event("second", "FilteringFailed").has_value(); }));
  EXPECT_THAT((*event("second", "FilteringFailed"))["message"].get<std::string>(),
              ::testing::HasSubstr("ResourceQuotaNotFit"));
  ASSERT_TRUE(wait_until([&] { return event("first", "BindingSucceed").has_value(); }));
  EXPECT_EQ((*event("first", "BindingSucceed"))["source"]["component"], "hami-scheduler");
  // Upstream's pod label: on a node whose plugin matches pods (ours), the
  // scheduler leaves it to the plugin's Allocate patch, one pod write fewer.
  auto label = [&] {
    auto p = api_.get("pods", "team", "first");
    return p ? (*p)["metadata"].value("labels", json::object()).value("hami.io/vgpu-node", "")
             : "<no pod>";
  };
  std::this_thread::sleep_for(300ms);  // the event's worker also writes labels
  EXPECT_EQ(label(), "");
  const std::string alloc =
      annotation(api_.get("pods", "team", "first"), "hami.io/vgpu-devices-allocated");
  ASSERT_NE(alloc.find(','), std::string::npos) << alloc;
  ASSERT_TRUE(
      kubelet_->wait_for_devices(kRes, [](const auto& l) { return l.devices_size() == 20; }));
  v1beta1::AllocateResponse resp;
  const grpc::Status st =
      kubelet_->allocate(kRes, {{alloc.substr(0, alloc.find(',')) + "-0"}}, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(label(), kNode);
}

}  // namespace
}  // namespace hami::scheduler
