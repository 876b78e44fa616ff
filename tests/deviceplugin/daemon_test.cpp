// hami-device-plugin as a real process: the simulated NVML (two GPUs on NUMA
// nodes 0 and 1, scripted failures), the kubelet harness on real unix sockets
// and the test API server over HTTPS. Registration and the device list, a
// kubelet restart, a GPU lost and back, Xid critical errors (scripted `xid`
// lines), the node annotation, and Allocate for pods annotated the way
// upstream's scheduler annotates them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "deviceplugin/device_state.hpp"
#include "deviceplugin/discovery.hpp"
#include "k8s/objects.hpp"
#include "nvml/nvml.hpp"
#include "protocol/decision.hpp"
#include "protocol/node_lock.hpp"
#include "protocol/node_register.hpp"
#include "region/control_file.hpp"
#include "support/apiserver/api_server.hpp"
#include "support/bound_pod.hpp"
#include "support/forged_pod.hpp"
#include "support/kubelet/fake_kubelet.hpp"
#include "support/object_text.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"
#include "support/wait.hpp"

namespace hami::deviceplugin {
namespace {

using test::annotation;
using test::slurp;

using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::StartsWith;
using namespace std::chrono_literals;

constexpr const char* kA = "GPU-5a3e0000-0000-4000-8000-0000000000a1";
constexpr const char* kB = "GPU-5a3e0000-0000-4000-8000-0000000000b2";
constexpr const char* kNode = "node-1";
constexpr const char* kRes = "nvidia.com/gpu";
constexpr const char* kKey = "0123456789abcdef0123456789abcdef-test";

using test::wait_until;

std::string lock_for(const std::string& ns, const std::string& name) {
  return protocol::format_node_lock(std::chrono::system_clock::now(), ns, name);
}

class DevicePluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    plugins_ = root_.file("plugins");
    hook_ = root_.file("hook");
    std::filesystem::create_directories(plugins_);
    std::filesystem::create_directories(hook_ + "/vgpu");
    std::ofstream(hook_ + "/vgpu/libvgpu.so") << "not really a library";
    write_script("");
    api_.put("nodes", {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", kNode}}}});
    kubeconfig_ = api_.write_kubeconfig(root_.file("kubeconfig"));
    kubelet_ = std::make_unique<test::FakeKubelet>(plugins_);
  }

  void TearDown() override {
    if (!plugin_) return;
    plugin_->kill(SIGTERM);
    const test::ProcessResult r = plugin_->finish();
    EXPECT_EQ(r.exit_code, 0) << "the plugin did not stop cleanly on SIGTERM";
    if (HasFailure() || std::getenv("DP_LOG"))
      std::fprintf(stderr, "--- hami-device-plugin log ---\n%s", r.err.c_str());
  }

  // start_plugin adds --allocate-protocol=lock unless the test names one.
  bool lock_unless_told_ = true;

  void start_plugin(std::vector<std::string> extra = {}, bool scripted = true,
                    const test::Env& sim_env = {}) {
    std::vector<std::string> argv = {DEVICE_PLUGIN_BINARY,
                                     "--node-name=" + std::string(kNode),
                                     "--kubeconfig=" + kubeconfig_,
                                     "--device-plugin-path=" + plugins_,
                                     "--hook-path=" + hook_,
                                     "--lock-dir=" + root_.file("vgpulock"),
                                     "--nvml-library=" + std::string(SIMNVML),
                                     "--health-interval=50ms",
                                     "--register-interval=200ms",
                                     "-v4"};
    // Most tests follow upstream's lock, the protocol of an upstream
    // scheduler; the default (match-pods) has its own.
    if (lock_unless_told_ && std::none_of(extra.begin(), extra.end(), [](const std::string& a) {
          return a.rfind("--allocate-protocol", 0) == 0;
        })) {
      argv.push_back("--allocate-protocol=lock");
    }
    argv.insert(argv.end(), extra.begin(), extra.end());
    test::Env env = {{"SIMGPU_STATE", root_.file("gpu.state")},
                     {"SIMGPU_DEVICES", std::string(kA) + ":80g," + kB + ":40g"},
                     {"SIMGPU_NUMA", "0,1"},
                     {"SIMGPU_NAMES", test::kUnset},
                     {"SIMGPU_MIG", test::kUnset},
                     {"SIMGPU_NVML_SCRIPT", scripted ? root_.file("nvml.script") : test::kUnset},
                     {"SIMGPU_FAIL", test::kUnset},
                     {"DP_DISABLE_HEALTHCHECKS", test::kUnset},
                     {"KUBECONFIG", test::kUnset}};
    // The simulated node's own settings (SIMGPU_NAMES, SIMGPU_MIG) replace the defaults.
    for (const auto& [k, v] : sim_env) {
      auto it = std::find_if(env.begin(), env.end(), [&](const auto& e) { return e.first == k; });
      if (it != env.end()) it->second = v;
    }
    plugin_.emplace(test::Child::spawn(argv, env));
  }

  // Replaced in one step (a new inode), as the simulated NVML asks.
  void write_script(const std::string& text) {
    const std::string path = root_.file("nvml.script");
    std::ofstream(path + ".tmp") << text;
    ASSERT_EQ(std::rename((path + ".tmp").c_str(), path.c_str()), 0);
  }

  void wait_registered() {
    ASSERT_TRUE(kubelet_->wait_for_registrations(1)) << "the plugin never registered";
    ASSERT_TRUE(kubelet_->wait_for_devices(kRes, [](const auto& l) {
      return l.devices_size() == 20;
    })) << "no device list of 20 devices";
  }

  std::optional<json> node() const { return api_.get("nodes", "", kNode); }
  std::string vgpu_node_label(const std::string& name) const {
    auto p = pod(name);
    return p ? (*p)["metadata"].value("labels", json::object()).value("hami.io/vgpu-node", "")
             : "<no pod>";
  }
  std::optional<json> pod(const std::string& name) const {
    return api_.get("pods", "default", name);
  }

  void lock_node(const std::string& value) {
    json n = *node();
    n["metadata"]["annotations"]["hami.io/mutex.lock"] = value;
    api_.put("nodes", n);
  }

  // A pod after our scheduler (without a decision key, so unsigned) has
  // filtered and bound it: its decision annotations, bind-phase allocating,
  // bound to the node.
  json scheduled_pod(const std::string& name, const std::string& devices, json containers,
                     json init_containers = json::array()) {
    json p = test::bound_pod(name, kNode, devices, containers);
    if (!init_containers.empty()) p["spec"]["initContainers"] = init_containers;
    return api_.put("pods", p);
  }

  // What kubelet does to a pod whose Allocate failed (UnexpectedAdmissionError).
  void kubelet_refused(const std::string& name) {
    json p = *pod(name);
    p["status"]["phase"] = "Failed";
    api_.put("pods", p);
  }

  // The decision key the scheduler and this plugin share, in a file.
  std::string key_file() {
    std::ofstream(root_.file("decision.key")) << kKey << "\n";
    return root_.file("decision.key");
  }
  static protocol::DecisionKeys keys() { return *protocol::DecisionKeys::parse(kKey, "test"); }
  // The pod as it stands, signed the way the scheduler signs its binding.
  json sign(const std::string& name) {
    json p = *pod(name);
    auto typed = k8s::Pod::from_json(p);
    p["metadata"]["annotations"]["hami.io/decision-signature"] =
        keys().sign(protocol::decision_of(*typed));
    return api_.put("pods", p);
  }

  // kubelet's GetPreferredAllocation for one container of one device, out
  // of every device the plugin advertises.
  grpc::Status prefer_one(v1beta1::PreferredAllocationResponse* out) {
    v1beta1::PreferredAllocationRequest preq;
    auto* c = preq.add_container_requests();
    const v1beta1::ListAndWatchResponse listed = kubelet_->devices(kRes);
    for (const auto& d : listed.devices())
      c->add_available_deviceids(d.id());
    c->set_allocation_size(1);
    return kubelet_->preferred(kRes, preq, out);
  }

  static json container(const std::string& name, json limits = json::object(),
                        json env = json::array()) {
    json c = {{"name", name}, {"image", "cuda"}};
    if (!limits.empty()) c["resources"] = {{"limits", limits}};
    if (!env.empty()) c["env"] = env;
    return c;
  }

  static std::map<std::string, std::string> envs(const v1beta1::ContainerAllocateResponse& r) {
    return {r.envs().begin(), r.envs().end()};
  }

  static std::map<std::string, std::pair<std::string, bool>> mounts(
      const v1beta1::ContainerAllocateResponse& r) {
    std::map<std::string, std::pair<std::string, bool>> out;
    for (const auto& m : r.mounts())
      out[m.container_path()] = {m.host_path(), m.read_only()};
    return out;
  }

  test::TempDir root_;
  std::string plugins_;
  std::string hook_;
  std::string kubeconfig_;
  test::ApiServer api_;
  std::unique_ptr<test::FakeKubelet> kubelet_;
  std::optional<test::Child> plugin_;
};

TEST_F(DevicePluginTest, RegistersAndAdvertisesSplitDevicesWithNuma) {
  start_plugin();
  wait_registered();
  const auto regs = kubelet_->registrations();
  ASSERT_EQ(regs.size(), 1u);
  EXPECT_EQ(regs[0].version(), "v1beta1");
  EXPECT_EQ(regs[0].endpoint(), "nvidia-gpu.sock");
  EXPECT_EQ(regs[0].resource_name(), kRes);
  EXPECT_TRUE(regs[0].options().get_preferred_allocation_available());
  EXPECT_FALSE(regs[0].options().pre_start_required());
  EXPECT_TRUE(kubelet_->options(kRes).get_preferred_allocation_available());

  const auto list = kubelet_->devices(kRes);
  ASSERT_EQ(list.devices_size(), 20);  // 2 GPUs × split count 10
  for (int i = 0; i < 20; ++i) {
    const auto& d = list.devices(i);
    const bool on_a = i < 10;
    EXPECT_EQ(d.id(), std::string(on_a ? kA : kB) + "-" + std::to_string(i % 10));
    EXPECT_EQ(d.health(), "Healthy");
    ASSERT_EQ(d.topology().nodes_size(), 1);
    EXPECT_EQ(d.topology().nodes(0).id(), on_a ? 0 : 1);
  }
}

TEST_F(DevicePluginTest, ConfigFileSetsSplitCountAndResourceName) {
  std::ofstream(root_.file("cfg.yaml"))
      << "nvidia:\n  resourceCountName: example.com/vgpu\n  deviceSplitCount: 3\n"
      << "nodeconfig:\n  - name: node-1\n    enablenumatopology: false\n";
  start_plugin({"--config-file=" + root_.file("cfg.yaml")});
  ASSERT_TRUE(kubelet_->wait_for_registrations(1));
  EXPECT_EQ(kubelet_->registrations()[0].endpoint(), "nvidia-vgpu.sock");
  ASSERT_TRUE(kubelet_->wait_for_devices("example.com/vgpu",
                                         [](const auto& l) { return l.devices_size() == 6; }));
  EXPECT_FALSE(kubelet_->devices("example.com/vgpu").devices(0).has_topology());
}

TEST_F(DevicePluginTest, BadConfigExitsWithTheReason) {
  std::ofstream(root_.file("cfg.yaml")) << "nvidia:\n  deviceSplitCount: many\n";
  const auto r = test::run_process(
      {DEVICE_PLUGIN_BINARY, "--node-name=n", "--config-file=" + root_.file("cfg.yaml")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("cfg.yaml:2: nvidia.deviceSplitCount: expected a whole number"));
}

TEST_F(DevicePluginTest, ReRegistersAfterKubeletRestart) {
  start_plugin();
  wait_registered();
  const std::string our_socket = plugins_ + "/nvidia-gpu.sock";
  ASSERT_TRUE(std::filesystem::exists(our_socket));
  for (int round = 2; round <= 3; ++round) {
    const auto before = std::chrono::steady_clock::now();
    kubelet_->restart();  // our socket is deleted, kubelet.sock recreated
    ASSERT_TRUE(kubelet_->wait_for_registrations(static_cast<size_t>(round), 5s))
        << "no re-registration within 5 s";
    EXPECT_LT(std::chrono::steady_clock::now() - before, 5s);
    ASSERT_TRUE(kubelet_->wait_for_devices(kRes, [](const auto& l) {
      return l.devices_size() == 20;
    })) << "kubelet could not watch the re-served plugin";
    EXPECT_TRUE(std::filesystem::exists(our_socket));
  }
}

// SIGHUP is the plugin's reload (docs/device-plugin.md): it serves and
// registers again, and goes on serving (TearDown's SIGTERM finds it running).
TEST_F(DevicePluginTest, SighupServesAndRegistersAgain) {
  start_plugin();
  wait_registered();
  plugin_->kill(SIGHUP);
  ASSERT_TRUE(kubelet_->wait_for_registrations(2, 5s)) << "no registration after SIGHUP";
  EXPECT_TRUE(kubelet_->wait_for_devices(kRes, [](const auto& l) {
    return l.devices_size() == 20;
  })) << "kubelet could not watch the plugin served again";
}

TEST_F(DevicePluginTest, RegistersOnceKubeletAppears) {
  kubelet_->stop();
  std::filesystem::remove(kubelet_->socket_path());
  start_plugin();
  ASSERT_TRUE(wait_until([&] { return std::filesystem::exists(plugins_ + "/nvidia-gpu.sock"); }));
  kubelet_->start();
  ASSERT_TRUE(kubelet_->wait_for_registrations(1, 5s));
}

TEST_F(DevicePluginTest, LostGpuIsUnhealthyThenHealthyAgain) {
  start_plugin();
  wait_registered();
  auto gpu_b_is = [](const char* health) {
    return [health](const v1beta1::ListAndWatchResponse& l) {
      for (const auto& d : l.devices()) {
        const bool on_b = d.id().rfind(kB, 0) == 0;
        if (d.health() != (on_b ? health : "Healthy")) return false;
      }
      return l.devices_size() == 20;
    };
  };
  write_script("gpu_lost nvmlDeviceGetMemoryInfo_v2 1\ngpu_lost nvmlDeviceGetMemoryInfo 1\n");
  ASSERT_TRUE(kubelet_->wait_for_devices(kRes, gpu_b_is("Unhealthy")))
      << "GPU 1 never reported Unhealthy";
  // The scheduler learns it too: health is omitted (false) for GPU 1.
  ASSERT_TRUE(wait_until([&] {
    auto d = protocol::decode_node_devices(annotation(node(), "hami.io/node-nvidia-register"));
    return d && d->size() == 2 && (*d)[0].health && !(*d)[1].health;
  }));
  write_script("");
  ASSERT_TRUE(kubelet_->wait_for_devices(kRes, gpu_b_is("Healthy"))) << "GPU 1 never came back";
  write_script("fail nvmlDeviceGetMemoryInfo_v2 0\nfail nvmlDeviceGetMemoryInfo 0\n");
  ASSERT_TRUE(kubelet_->wait_for_devices(kRes, [](const auto& l) {
    return l.devices(0).health() == "Unhealthy" && l.devices(10).health() == "Healthy";
  })) << "an NVML_ERROR_UNKNOWN did not make GPU 0 unhealthy";
}

// Every device of GPU 1 (kB) has `b`, every device of GPU 0 has `a`.
test::DeviceListPredicate gpus_are(const char* a, const char* b) {
  return [a, b](const v1beta1::ListAndWatchResponse& l) {
    for (const auto& d : l.devices()) {
      const bool on_b = d.id().rfind(kB, 0) == 0;
      if (d.health() != (on_b ? b : a)) return false;
    }
    return l.devices_size() == 20;
  };
}

TEST_F(DevicePluginTest, CriticalXidMakesOnlyItsGpuUnhealthy) {
  start_plugin();
  wait_registered();
  // Lines are delivered in order: by the time GPU 1 is unhealthy, GPU 0's
  // application error (Xid 13) has been seen and ignored.
  write_script("xid 0 13\nxid 1 79\n");
  ASSERT_TRUE(kubelet_->wait_for_devices(kRes, gpus_are("Healthy", "Unhealthy")))
      << "Xid 79 did not make GPU 1 (alone) unhealthy";
  ASSERT_TRUE(wait_until([&] {
    auto d = protocol::decode_node_devices(annotation(node(), "hami.io/node-nvidia-register"));
    return d && d->size() == 2 && (*d)[0].health && !(*d)[1].health;
  })) << "the scheduler was not told";
  // NVML still answers, yet within --xid-recovery (5m) GPU 1 stays unhealthy
  // (20 periodic checks of 50 ms).
  EXPECT_FALSE(kubelet_->wait_for_devices(kRes, gpus_are("Healthy", "Healthy"), 1s));
  EXPECT_TRUE(gpus_are("Healthy", "Unhealthy")(kubelet_->devices(kRes)));
}

TEST_F(DevicePluginTest, IgnoredXidsLeaveTheGpuHealthy) {
  start_plugin({"--ignore-xids=48, 94"});
  wait_registered();
  // 13, 31, 43, 45, 68, 109 (application errors) and the listed ones are
  // skipped; the 63 after them is the first to count.
  write_script(
      "xid 0 13\nxid 0 31\nxid 0 43\nxid 0 45\nxid 0 68\nxid 0 109\nxid 0 48\nxid 0 94\n"
      "xid 1 63\n");
  ASSERT_TRUE(kubelet_->wait_for_devices(kRes, gpus_are("Healthy", "Unhealthy")))
      << "GPU 0 went unhealthy on an ignored Xid, or GPU 1 never on Xid 63";
}

TEST_F(DevicePluginTest, XidGpuIsHealthyAgainAfterTheRecoveryWindow) {
  start_plugin({"--xid-recovery=1s"});
  wait_registered();
  const auto written = std::chrono::steady_clock::now();
  write_script("xid 1 79\n");
  ASSERT_TRUE(kubelet_->wait_for_devices(kRes, gpus_are("Healthy", "Unhealthy")));
  ASSERT_TRUE(kubelet_->wait_for_devices(kRes, gpus_are("Healthy", "Healthy")))
      << "GPU 1 never came back after --xid-recovery=1s";
  EXPECT_GE(std::chrono::steady_clock::now() - written, 1s) << "back before its window ended";
  // A later Xid starts a new window.
  write_script("xid 1 79\nxid 1 92\n");
  ASSERT_TRUE(kubelet_->wait_for_devices(kRes, gpus_are("Healthy", "Unhealthy")));
}

TEST_F(DevicePluginTest, WithoutXidEventsThePeriodicChecksGoOn) {
  // No script: the simulated NVML cannot create an event set, as an old driver.
  start_plugin({}, /*scripted=*/false);
  wait_registered();
  plugin_->kill(SIGTERM);
  const test::ProcessResult r = plugin_->finish();
  plugin_.reset();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("Xid events are not watched, only the periodic NVML checks run"));
  EXPECT_THAT(r.err, HasSubstr("NVML_ERROR_NOT_SUPPORTED"));
}

TEST_F(DevicePluginTest, BadIgnoreXidsIsAUsageError) {
  const auto r =
      test::run_process({DEVICE_PLUGIN_BINARY, "--node-name=n", "--ignore-xids=48,seventy-nine"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("'seventy-nine' is not an Xid number"));
}

TEST_F(DevicePluginTest, NodeAnnotationIsUpstreamJsonWithHandshake) {
  start_plugin();
  const std::string want =
      std::string(R"([{"id":")") + kA +
      R"(","count":10,"devmem":81920,"devcore":100,"type":"NVIDIA-Simulated GPU 0",)"
      R"("mode":"hami-core","health":true},{"id":")" +
      kB +
      R"(","index":1,"count":10,"devmem":40960,"devcore":100,"type":"NVIDIA-Simulated GPU 1",)"
      R"("numa":1,"mode":"hami-core","health":true}])";
  ASSERT_TRUE(wait_until([&] {
    return annotation(node(), "hami.io/node-nvidia-register") == want;
  })) << annotation(node(), "hami.io/node-nvidia-register");
  EXPECT_THAT(annotation(node(), "hami.io/node-handshake"),
              MatchesRegex("Reported_[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}"));

  // The scheduler answers; the plugin reports again within a period.
  json n = *node();
  n["metadata"]["annotations"]["hami.io/node-handshake"] = "Requesting_2024-05-01 10:00:00";
  n["metadata"]["annotations"].erase("hami.io/node-nvidia-register");
  api_.put("nodes", n);
  ASSERT_TRUE(wait_until([&] {
    return annotation(node(), "hami.io/node-handshake").rfind("Reported_", 0) == 0 &&
           annotation(node(), "hami.io/node-nvidia-register") == want;
  }));
}

TEST_F(DevicePluginTest, RegistersEachGpuPairsScoreAndP2pStatus) {
  // One PCIe switch and four NVLinks: upstream's 50 + 4 x 100. P2P disabled
  // by a registry key (nvmlGpuP2PStatus_t 4).
  write_script("topology 0 1 single\nnvlink 0 1 4\np2p 0 1 4\n");
  start_plugin();
  const std::string score = std::string(R"([{"uuid":")") + kA + R"(","score":{")" + kB +
                            R"(":450}},{"uuid":")" + kB + R"(","score":{")" + kA + R"(":450}}])";
  const std::string p2p = std::string(R"([{"uuid":")") + kA + R"(","p2p":{")" + kB +
                          R"(":"disabled_by_regkey"}},{"uuid":")" + kB + R"(","p2p":{")" + kA +
                          R"(":"disabled_by_regkey"}}])";
  ASSERT_TRUE(wait_until([&] {
    return annotation(node(), "hami.io/node-nvidia-score") == score &&
           annotation(node(), "hami.io/node-nvidia-p2p") == p2p;
  })) << annotation(node(), "hami.io/node-nvidia-score")
      << "\n"
      << annotation(node(), "hami.io/node-nvidia-p2p");

  // Removed by someone else, it comes back within a period.
  json n = *node();
  n["metadata"]["annotations"].erase("hami.io/node-nvidia-score");
  api_.put("nodes", n);
  EXPECT_TRUE(wait_until([&] { return annotation(node(), "hami.io/node-nvidia-score") == score; }))
      << annotation(node(), "hami.io/node-nvidia-score");
}

TEST_F(DevicePluginTest, TopologyNvmlCannotReadIsLoggedAndScoresAsUnknown) {
  write_script("nvlink 0 1 2\nfail nvmlDeviceGetTopologyCommonAncestor\n");
  start_plugin();
  const std::string score = std::string(R"([{"uuid":")") + kA + R"(","score":{")" + kB +
                            R"(":200}},{"uuid":")" + kB + R"(","score":{")" + kA + R"(":200}}])";
  ASSERT_TRUE(wait_until([&] { return annotation(node(), "hami.io/node-nvidia-score") == score; }))
      << annotation(node(), "hami.io/node-nvidia-score");
  plugin_->kill(SIGTERM);
  const test::ProcessResult r = plugin_->finish();
  plugin_.reset();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("GPU topology: GPUs 0-1: nvmlDeviceGetTopologyCommonAncestor"));
  EXPECT_THAT(r.err, HasSubstr("GPUs 0-1: unknown, 2 NVLink(s), P2P ok: pair score 200"));
}

TEST_F(DevicePluginTest, AllocateServesThePodNamedByTheNodeLock) {
  start_plugin();
  wait_registered();
  scheduled_pod("p1", std::string(kB) + ",NVIDIA,3000,30:;",
                json::array({container("main", {{"nvidia.com/gpu", "1"},
                                                {"nvidia.com/gpumem", "3000"},
                                                {"nvidia.com/gpucores", "30"},
                                                {"nvidia.com/priority", "0"}})}));
  lock_node(lock_for("default", "p1"));
  const std::string uid = (*pod("p1"))["metadata"]["uid"];

  // kubelet first asks which IDs the plugin prefers: one on the annotated GPU.
  v1beta1::PreferredAllocationResponse presp;
  ASSERT_TRUE(prefer_one(&presp).ok());
  ASSERT_EQ(presp.container_responses_size(), 1);
  ASSERT_EQ(presp.container_responses(0).deviceids_size(), 1);
  EXPECT_THAT(presp.container_responses(0).deviceids(0), StartsWith(kB));

  v1beta1::AllocateResponse resp;
  const grpc::Status st =
      kubelet_->allocate(kRes, {{presp.container_responses(0).deviceids(0)}}, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(resp.container_responses_size(), 1);
  const auto& r = resp.container_responses(0);
  const auto env = envs(r);
  EXPECT_EQ(env.at("NVIDIA_VISIBLE_DEVICES"), kB);
  EXPECT_EQ(env.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "3000m");
  EXPECT_EQ(env.at("CUDA_DEVICE_SM_LIMIT"), "30");
  EXPECT_EQ(env.at("CUDA_TASK_PRIORITY"), "0");
  EXPECT_THAT(env.at("CUDA_DEVICE_MEMORY_SHARED_CACHE"),
              MatchesRegex(hook_ + "/vgpu/[0-9a-f-]{36}\\.cache"));
  EXPECT_EQ(env.count("GPU_CORE_UTILIZATION_POLICY"), 0u);

  const std::string vgpu = hook_ + "/vgpu";
  const std::string key = uid + "_main";
  const auto m = mounts(r);
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m.at(vgpu + "/libvgpu.so"), std::make_pair(vgpu + "/libvgpu.so", true));
  EXPECT_EQ(m.at(vgpu), std::make_pair(vgpu + "/containers/" + key, false));
  EXPECT_EQ(m.at("/tmp/vgpulock"), std::make_pair(root_.file("vgpulock"), false));
  EXPECT_EQ(m.at("/etc/ld.so.preload"), std::make_pair(vgpu + "/ld.so.preload", true));
  EXPECT_EQ(m.at("/etc/vgpu/limits.d"), std::make_pair(vgpu + "/limits/" + key, true));
  EXPECT_EQ(m.at("/etc/vgpu/control"), std::make_pair(vgpu + "/control/" + key, true));

  // The host side exists before kubelet mounts it.
  struct stat sb {};
  ASSERT_EQ(::stat((vgpu + "/containers/" + key).c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 0777, 0777u);
  EXPECT_EQ(slurp(vgpu + "/limits/" + key + "/limits"),
            "# written by hami-device-plugin for pod " + uid +
                ", container main\nCUDA_DEVICE_MEMORY_LIMIT_0=3000m\nCUDA_DEVICE_SM_LIMIT=30\n"
                "CUDA_TASK_PRIORITY=0\nCUDA_DEVICE_MEMORY_SHARED_CACHE=" +
                env.at("CUDA_DEVICE_MEMORY_SHARED_CACHE") + "\nVGPU_DEVICE_UUID_0=" + kB + "\n");
  EXPECT_EQ(std::filesystem::file_size(vgpu + "/control/" + key), region::kControlFileSize);
  EXPECT_EQ(slurp(vgpu + "/ld.so.preload"), vgpu + "/libvgpu.so\n");

  // The protocol's end: bind-phase success, devices consumed, upstream's
  // pod label (in the same patch), lock released.
  EXPECT_EQ(annotation(pod("p1"), "hami.io/bind-phase"), "success");
  EXPECT_EQ(vgpu_node_label("p1"), kNode);
  EXPECT_EQ(annotation(pod("p1"), "hami.io/vgpu-devices-to-allocate"), ";");
  EXPECT_EQ(annotation(pod("p1"), "hami.io/vgpu-devices-allocated"),
            std::string(kB) + ",NVIDIA,3000,30:;");
  EXPECT_EQ(annotation(node(), "hami.io/mutex.lock"), "<absent>");
}

// Static MIG (docs/mig.md): GPU A, an H100 80GB, partitioned 3g.40gb and
// 1g.10gb; GPU B an H100 with MIG off, time-sliced beside it. A's MIG devices
// are split and registered like GPUs, with their slice's memory and mode
// "mig"; a pod the scheduler placed on one gets it by its MIG UUID, with the
// library's memory limit inside the slice.
TEST_F(DevicePluginTest, StaticMigDevicesAreAdvertisedRegisteredAndAllocated) {
  start_plugin({}, true,
               {{"SIMGPU_NAMES", "NVIDIA H100 80GB HBM3,NVIDIA H100 80GB HBM3"},
                {"SIMGPU_MIG", "0:3g.40gb,1g.10gb"}});
  ASSERT_TRUE(kubelet_->wait_for_registrations(1)) << "the plugin never registered";
  ASSERT_TRUE(kubelet_->wait_for_devices(kRes, [](const auto& l) {
    return l.devices_size() == 30;
  })) << "no device list of 3 x 10 devices";
  std::vector<protocol::NodeDevice> reg;
  ASSERT_TRUE(wait_until([&] {
    auto d = protocol::decode_node_devices(annotation(node(), "hami.io/node-nvidia-register"));
    if (!d) return false;
    reg = *d;
    return reg.size() == 3;
  })) << annotation(node(), "hami.io/node-nvidia-register");
  const protocol::NodeDevice& big = reg[0];
  const protocol::NodeDevice& small = reg[1];
  EXPECT_THAT(big.id, StartsWith("MIG-"));
  EXPECT_EQ(big.index, 0);
  EXPECT_EQ(big.count, 10);
  EXPECT_EQ(big.devmem, 40192);
  EXPECT_EQ(big.devcore, 100);
  EXPECT_EQ(big.type, "NVIDIA H100 80GB HBM3 MIG 3g.40gb");
  EXPECT_EQ(big.mode, "mig");
  EXPECT_TRUE(big.health);
  EXPECT_EQ(small.devmem, 9984);
  EXPECT_EQ(small.type, "NVIDIA H100 80GB HBM3 MIG 1g.10gb");
  EXPECT_EQ(small.mode, "mig");
  EXPECT_EQ(reg[2].id, kB);
  EXPECT_EQ(reg[2].mode, "hami-core");
  EXPECT_EQ(reg[2].index, 1);
  // kubelet's IDs: the MIG UUID split like a GPU's.
  const v1beta1::ListAndWatchResponse listed = kubelet_->devices(kRes);
  EXPECT_EQ(listed.devices(10).id(), small.id + "-0");

  scheduled_pod("m1", small.id + ",NVIDIA,5000,100:;",
                json::array({container("main", {{"nvidia.com/gpu", "1"},
                                                {"nvidia.com/gpumem", "5000"},
                                                {"nvidia.com/gpucores", "100"}})}));
  lock_node(lock_for("default", "m1"));
  const std::string uid = (*pod("m1"))["metadata"]["uid"];
  v1beta1::AllocateResponse resp;
  const grpc::Status st = kubelet_->allocate(kRes, {{small.id + "-3"}}, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(resp.container_responses_size(), 1);
  const auto env = envs(resp.container_responses(0));
  EXPECT_EQ(env.at("NVIDIA_VISIBLE_DEVICES"), small.id);
  EXPECT_EQ(env.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "5000m");
  const std::string limits = slurp(hook_ + "/vgpu/limits/" + uid + "_main/limits");
  EXPECT_THAT(limits, HasSubstr("VGPU_DEVICE_UUID_0=" + small.id + "\n"));
  EXPECT_EQ(annotation(pod("m1"), "hami.io/bind-phase"), "success");
}

TEST_F(DevicePluginTest, AMigModeGpuWithMigOffIsLeftOut) {
  // GPU B's operatingmode is mig, but its MIG is off: not advertised as a
  // whole GPU behind the operator's back.
  std::ofstream(root_.file("config.json"))
      << R"({"nodeconfig":[{"name":"node-1","devicemodes":[{"index":1,"operatingmode":"mig"}]}]})";
  start_plugin({"--node-config-file=" + root_.file("config.json")}, true,
               {{"SIMGPU_NAMES", "NVIDIA H100 80GB HBM3,NVIDIA H100 80GB HBM3"}});
  ASSERT_TRUE(kubelet_->wait_for_registrations(1)) << "the plugin never registered";
  ASSERT_TRUE(kubelet_->wait_for_devices(kRes, [](const auto& l) {
    return l.devices_size() == 10;
  })) << "no device list of GPU A alone";
  ASSERT_TRUE(wait_until([&] {
    auto d = protocol::decode_node_devices(annotation(node(), "hami.io/node-nvidia-register"));
    return d && d->size() == 1 && (*d)[0].id == kA && (*d)[0].mode == "hami-core";
  })) << annotation(node(), "hami.io/node-nvidia-register");
}

// An Xid the driver places in a MIG device's GPU instance (and compute
// instance) makes that MIG device alone unhealthy; one it does not place,
// every MIG device of the GPU (the health checker itself, on the simulated
// NVML, which it does not ask here).
TEST(HealthCheckerMig, AnXidInAGpuInstanceMarksItsMigDevicesOnly) {
  test::TempDir dir;
  ::setenv("SIMGPU_STATE", dir.file("gpu.state").c_str(), 1);
  ::setenv("SIMGPU_DEVICES", kA, 1);
  auto nvml = nvml::Library::open(SIMNVML);
  ASSERT_TRUE(nvml) << nvml.error().message;
  auto mig = [](const char* uuid, unsigned gi, unsigned ci) {
    Gpu g;
    g.index = 0;
    g.uuid = uuid;
    g.mig = MigSlice{kA, "1g.10gb", gi, ci, 16};
    return g;
  };
  Gpu other;
  other.index = 1;
  other.uuid = kB;
  DeviceState state({mig("MIG-a", 3, 0), mig("MIG-b", 4, 0), mig("MIG-c", 4, 1), other});
  HealthChecker health(**nvml, state, XidPolicy{});
  auto unhealthy = [&] {
    std::string out;
    for (const Gpu& g : state.gpus())
      if (!g.healthy) out += g.uuid + " ";
    return out;
  };
  health.on_xid(0, 79, 4u, 1u);
  EXPECT_EQ(unhealthy(), "MIG-c ");
  health.on_xid(0, 79, 4u, std::nullopt);
  EXPECT_EQ(unhealthy(), "MIG-b MIG-c ");
  health.on_xid(0, 79);
  EXPECT_EQ(unhealthy(), "MIG-a MIG-b MIG-c ");
  EXPECT_TRUE(state.gpus()[3].healthy);
}

TEST_F(DevicePluginTest, AllocateServesInitAndAppContainersInOrder) {
  start_plugin();
  wait_registered();
  // Upstream's encoding example: an init container without GPU, two app containers.
  scheduled_pod(
      "p2", std::string(";") + kA + ",NVIDIA,2500,25:;" + kB + ",NVIDIA,2500,25:;",
      json::array(
          {container("app", {{"nvidia.com/gpu", "1"}}),
           container("sidecar", {{"nvidia.com/gpu", "1"}},
                     json::array({{{"name", "CUDA_DISABLE_CONTROL"}, {"value", "true"}}}))}),
      json::array({container("init")}));
  lock_node(lock_for("default", "p2"));
  const std::string uid = (*pod("p2"))["metadata"]["uid"];

  v1beta1::AllocateResponse first;
  ASSERT_TRUE(kubelet_->allocate(kRes, {{std::string(kA) + "-4"}}, &first).ok());
  EXPECT_EQ(envs(first.container_responses(0)).at("NVIDIA_VISIBLE_DEVICES"), kA);
  EXPECT_EQ(mounts(first.container_responses(0)).at(hook_ + "/vgpu").first,
            hook_ + "/vgpu/containers/" + uid + "_app");
  EXPECT_EQ(mounts(first.container_responses(0)).count("/etc/ld.so.preload"), 1u);
  // One container left: still allocating, the lock still held.
  EXPECT_EQ(annotation(pod("p2"), "hami.io/bind-phase"), "allocating");
  EXPECT_EQ(vgpu_node_label("p2"), "") << "set with bind-phase success only";
  EXPECT_EQ(annotation(pod("p2"), "hami.io/vgpu-devices-to-allocate"),
            std::string(";;") + kB + ",NVIDIA,2500,25:;");
  EXPECT_THAT(annotation(node(), "hami.io/mutex.lock"), HasSubstr(",default,p2"));

  v1beta1::AllocateResponse second;
  ASSERT_TRUE(kubelet_->allocate(kRes, {{std::string(kB) + "-0"}}, &second).ok());
  const auto& s = second.container_responses(0);
  EXPECT_EQ(envs(s).at("NVIDIA_VISIBLE_DEVICES"), kB);
  EXPECT_EQ(envs(s).at("CUDA_DEVICE_MEMORY_LIMIT_0"), "2500m");
  EXPECT_EQ(mounts(s).count("/etc/ld.so.preload"), 0u) << "CUDA_DISABLE_CONTROL=true";
  EXPECT_EQ(mounts(s).count("/etc/vgpu/limits.d"), 1u);
  EXPECT_EQ(annotation(pod("p2"), "hami.io/bind-phase"), "success");
  EXPECT_EQ(vgpu_node_label("p2"), kNode);
  EXPECT_EQ(annotation(node(), "hami.io/mutex.lock"), "<absent>");
}

TEST_F(DevicePluginTest, AllocateMapsEntriesWithoutInitSlotsToAppContainers) {
  start_plugin();
  wait_registered();
  // HAMi#2899: a v2.10 scheduler may write no slot for GPU-less init containers.
  scheduled_pod("p4", std::string(kA) + ",NVIDIA,1000,10:;",
                json::array({container("app", {{"nvidia.com/gpu", "1"}})}),
                json::array({container("init-a"), container("init-b")}));
  lock_node(lock_for("default", "p4"));
  const std::string uid = (*pod("p4"))["metadata"]["uid"];
  v1beta1::AllocateResponse resp;
  const grpc::Status st = kubelet_->allocate(kRes, {{std::string(kA) + "-2"}}, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(mounts(resp.container_responses(0)).at(hook_ + "/vgpu").first,
            hook_ + "/vgpu/containers/" + uid + "_app");
  EXPECT_EQ(annotation(pod("p4"), "hami.io/bind-phase"), "success");
}

// Upstream's fallback served any Pending pod on the node with the right
// annotations when the lock named none: anyone who can create a pod could
// forge one. Without the lock, no pod is served.
// The plugin tells the scheduler it matches pods itself: our scheduler then
// binds there without the node lock (docs/scheduler-protocol.md).
// With --allocate-protocol lock the node keeps upstream's lock: no marker,
// and one left by an earlier run with match-pods goes.
TEST_F(DevicePluginTest, WithTheLockProtocolTheNodeIsLockedAsUpstreamsIs) {
  json n = *node();
  n["metadata"]["annotations"]["hami.io/node-allocate-protocol"] = "match-pods/v1";
  api_.put("nodes", n);
  start_plugin({"--allocate-protocol=lock"});
  wait_registered();
  ASSERT_TRUE(test::wait_until(
      [&] { return annotation(node(), "hami.io/node-allocate-protocol") == "<absent>"; }, 5s))
      << annotation(node(), "hami.io/node-allocate-protocol");
}

TEST_F(DevicePluginTest, ByDefaultRegistrationSaysThePluginMatchesPods) {
  lock_unless_told_ = false;
  start_plugin();
  wait_registered();
  ASSERT_TRUE(test::wait_until(
      [&] { return annotation(node(), "hami.io/node-allocate-protocol") == "match-pods/v1"; }, 5s));
}

// Without a lock, each Allocate goes to the pod whose GPUs kubelet asks
// for, whatever order they come in: two pods of one size, no swap.
TEST_F(DevicePluginTest, WithoutALockEachPodIsMatchedByItsGpus) {
  start_plugin({"--allocate-protocol=match-pods"});
  wait_registered();
  ASSERT_TRUE(test::wait_until(
      [&] { return annotation(node(), "hami.io/node-allocate-protocol") == "match-pods/v1"; }, 5s));
  scheduled_pod("on-a", std::string(kA) + ",NVIDIA,1000,10:;",
                json::array({container("main", {{"nvidia.com/gpu", "1"}})}));
  scheduled_pod("on-b", std::string(kB) + ",NVIDIA,2000,20:;",
                json::array({container("main", {{"nvidia.com/gpu", "1"}})}));
  v1beta1::AllocateResponse rb;
  grpc::Status st = kubelet_->allocate(kRes, {{std::string(kB) + "-3"}}, &rb);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(envs(rb.container_responses(0)).at("NVIDIA_VISIBLE_DEVICES"), kB);
  EXPECT_EQ(envs(rb.container_responses(0)).at("CUDA_DEVICE_MEMORY_LIMIT_0"), "2000m");
  EXPECT_EQ(annotation(pod("on-b"), "hami.io/bind-phase"), "success");
  EXPECT_EQ(annotation(pod("on-a"), "hami.io/bind-phase"), "allocating");
  v1beta1::AllocateResponse ra;
  st = kubelet_->allocate(kRes, {{std::string(kA) + "-1"}}, &ra);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(envs(ra.container_responses(0)).at("NVIDIA_VISIBLE_DEVICES"), kA);
  EXPECT_EQ(envs(ra.container_responses(0)).at("CUDA_DEVICE_MEMORY_LIMIT_0"), "1000m");
  EXPECT_EQ(annotation(pod("on-a"), "hami.io/bind-phase"), "success");
  EXPECT_EQ(annotation(node(), "hami.io/mutex.lock"), "<absent>");
}

// Two pods on the same GPU are told apart by kubelet's admission order (bind
// time first); GetPreferredAllocation and Allocate agree on the pod. A pod
// deleted before its turn is skipped, and a plugin restarted between two
// Allocates goes on from the annotations.
TEST_F(DevicePluginTest, OnOneGpuPodsGoInBindOrderPastDeletedOnesAndRestarts) {
  start_plugin({"--allocate-protocol=match-pods"});
  wait_registered();
  ASSERT_TRUE(test::wait_until(
      [&] { return annotation(node(), "hami.io/node-allocate-protocol") == "match-pods/v1"; }, 5s));
  const auto one = json::array({container("main", {{"nvidia.com/gpu", "1"}})});
  for (auto [name, mem, bound] :
       {std::tuple{"third", "3000", "1700000003"}, std::tuple{"first", "1000", "1700000001"},
        std::tuple{"gone", "500", "1700000000"}, std::tuple{"second", "2000", "1700000002"}}) {
    json p = scheduled_pod(name, std::string(kA) + ",NVIDIA," + mem + ",10:;", one);
    p["metadata"]["annotations"]["hami.io/bind-time"] = bound;
    api_.put("pods", p);
  }
  ASSERT_TRUE(api_.remove("pods", "default", "gone"));
  auto next = [&](const std::string& want_mem) {
    v1beta1::PreferredAllocationResponse presp;
    ASSERT_TRUE(prefer_one(&presp).ok());
    ASSERT_EQ(presp.container_responses(0).deviceids_size(), 1);
    const std::string id = presp.container_responses(0).deviceids(0);
    EXPECT_THAT(id, StartsWith(kA));
    v1beta1::AllocateResponse r;
    const grpc::Status st = kubelet_->allocate(kRes, {{id}}, &r);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(envs(r.container_responses(0)).at("CUDA_DEVICE_MEMORY_LIMIT_0"), want_mem + "m");
  };
  next("1000");
  EXPECT_EQ(annotation(pod("first"), "hami.io/bind-phase"), "success");
  EXPECT_EQ(annotation(pod("second"), "hami.io/bind-phase"), "allocating");
  plugin_->kill(SIGTERM);
  EXPECT_EQ(plugin_->finish().exit_code, 0);
  plugin_.reset();
  start_plugin({"--allocate-protocol=match-pods"});
  ASSERT_TRUE(kubelet_->wait_for_registrations(2)) << "the restarted plugin never registered";
  ASSERT_TRUE(kubelet_->wait_for_devices(kRes, [](const auto& l) {
    return l.devices_size() == 20;
  })) << "the restarted plugin sent no device list";
  next("2000");
  EXPECT_EQ(annotation(pod("second"), "hami.io/bind-phase"), "success");
  next("3000");
  EXPECT_EQ(annotation(pod("third"), "hami.io/bind-phase"), "success");
  v1beta1::AllocateResponse none;
  const grpc::Status st = kubelet_->allocate(kRes, {{std::string(kA) + "-0"}}, &none);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.error_message(), HasSubstr("no pod waiting for GPUs on node node-1 matches"));
}

// Issue 36, the attack: a pod with schedulerName nobody (or spec.nodeName
// preset) and forged annotations, bind-time 0 so it sorts first, no lock.
// Allocate answered CUDA_DEVICE_MEMORY_LIMIT_0=81920m, SM 100; and an honest
// pod admitted while it was pending got the attacker's 1 MiB, 1 % slice.
json forged_pod(const std::string& name, const std::string& devices, bool asks_for_gpus) {
  return test::forged_pod(name, kNode, devices,
                          asks_for_gpus ? json{{"nvidia.com/gpu", "1"}} : json::object(), "nobody",
                          true);
}

TEST_F(DevicePluginTest, ForgedPendingPodIsNeverServed) {
  start_plugin();
  wait_registered();
  api_.put("pods", forged_pod("attacker", std::string(kA) + ",NVIDIA,81920,100:;", true));
  v1beta1::AllocateResponse resp;
  grpc::Status st = kubelet_->allocate(kRes, {{std::string(kA) + "-0"}}, &resp);
  ASSERT_FALSE(st.ok()) << "served " << resp.DebugString();
  EXPECT_EQ(annotation(pod("attacker"), "hami.io/bind-phase"), "allocating");
  // Even with a lock that names it (a lock on a node is the scheduler's;
  // here as if forged too): its scheduler is not trusted.
  lock_node(lock_for("default", "attacker"));
  st = kubelet_->allocate(kRes, {{std::string(kA) + "-0"}}, &resp);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.error_message(), HasSubstr("its scheduler \"nobody\" is not trusted"));
  EXPECT_EQ(annotation(pod("attacker"), "hami.io/bind-phase"), "failed");
  EXPECT_EQ(annotation(node(), "hami.io/mutex.lock"), "<absent>");
}

TEST_F(DevicePluginTest, HonestPodIsNeverGivenAForgedPodsSlice) {
  start_plugin();
  wait_registered();
  // A phantom that asks for no GPU (kubelet never calls Allocate for it).
  api_.put("pods", forged_pod("phantom", std::string(kA) + ",NVIDIA,1,1:;", false));
  scheduled_pod("honest", std::string(kB) + ",NVIDIA,4000,40:;",
                json::array({container("main", {{"nvidia.com/gpu", "1"}})}));
  lock_node(lock_for("default", "honest"));
  v1beta1::AllocateResponse resp;
  grpc::Status st = kubelet_->allocate(kRes, {{std::string(kB) + "-0"}}, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(envs(resp.container_responses(0)).at("NVIDIA_VISIBLE_DEVICES"), kB);
  EXPECT_EQ(envs(resp.container_responses(0)).at("CUDA_DEVICE_MEMORY_LIMIT_0"), "4000m");
  EXPECT_EQ(annotation(pod("honest"), "hami.io/bind-phase"), "success");
  EXPECT_EQ(annotation(pod("phantom"), "hami.io/bind-phase"), "allocating");
}

// A GPU pod created with spec.nodeName preset (past the webhook) waits on
// the node while another pod holds the lock: kubelet does not say which of
// the two it admits, so neither is served until the intruder is gone.
TEST_F(DevicePluginTest, PresetNodeNameGpuPodGetsNoGpuAndStealsNone) {
  start_plugin();
  wait_registered();
  api_.put("pods", forged_pod("intruder", std::string(kA) + ",NVIDIA,1,1:;", true));
  scheduled_pod("honest", std::string(kB) + ",NVIDIA,4000,40:;",
                json::array({container("main", {{"nvidia.com/gpu", "1"}})}));
  lock_node(lock_for("default", "honest"));
  v1beta1::AllocateResponse resp;
  grpc::Status st = kubelet_->allocate(kRes, {{std::string(kB) + "-0"}}, &resp);
  ASSERT_FALSE(st.ok()) << "served " << resp.DebugString();
  EXPECT_THAT(st.error_message(),
              HasSubstr("node node-1 is locked for pod default/honest, but pod default/intruder "
                        "also waits there for nvidia.com/gpu"));
  // Nothing spent: the honest pod keeps its decision and the lock.
  EXPECT_EQ(annotation(pod("honest"), "hami.io/bind-phase"), "allocating");
  EXPECT_EQ(annotation(pod("intruder"), "hami.io/bind-phase"), "allocating");
  EXPECT_THAT(annotation(node(), "hami.io/mutex.lock"), HasSubstr(",default,honest"));
  // kubelet refused the intruder (it is Failed now): the honest pod is served.
  kubelet_refused("intruder");
  st = kubelet_->allocate(kRes, {{std::string(kB) + "-0"}}, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(envs(resp.container_responses(0)).at("CUDA_DEVICE_MEMORY_LIMIT_0"), "4000m");
  EXPECT_EQ(annotation(pod("honest"), "hami.io/bind-phase"), "success");
}

// With the scheduler's key, only what it signed is served, and only as it
// signed it.
TEST_F(DevicePluginTest, WithAKeyOnlySignedUnalteredDecisionsAreServed) {
  start_plugin({"--decision-key-file=" + key_file()});
  wait_registered();
  const json one = json::array({container("main", {{"nvidia.com/gpu", "1"}})});
  // Unsigned: not the scheduler's, whatever schedulerName says.
  scheduled_pod("unsigned", std::string(kA) + ",NVIDIA,1000,10:;", one);
  lock_node(lock_for("default", "unsigned"));
  v1beta1::AllocateResponse resp;
  grpc::Status st = kubelet_->allocate(kRes, {{std::string(kA) + "-0"}}, &resp);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.error_message(), HasSubstr("without hami.io/decision-signature"));
  EXPECT_EQ(annotation(pod("unsigned"), "hami.io/bind-phase"), "failed");
  EXPECT_EQ(annotation(node(), "hami.io/mutex.lock"), "<absent>");
  // Signed, then its owner raised what is left to allocate.
  scheduled_pod("raised", std::string(kA) + ",NVIDIA,1000,10:;", one);
  json raised = sign("raised");
  raised["metadata"]["annotations"]["hami.io/vgpu-devices-to-allocate"] =
      std::string(kA) + ",NVIDIA,81920,100:;";
  api_.put("pods", raised);
  lock_node(lock_for("default", "raised"));
  st = kubelet_->allocate(kRes, {{std::string(kA) + "-0"}}, &resp);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.error_message(), HasSubstr("was changed after the scheduler bound it"));
  EXPECT_EQ(annotation(pod("raised"), "hami.io/bind-phase"), "failed");
  // kubelet fails a pod whose Allocate failed; until then it might be the
  // one kubelet admits next.
  for (const char* name : {"unsigned", "raised"})
    kubelet_refused(name);
  // Signed and intact.
  scheduled_pod("ours", std::string(kA) + ",NVIDIA,1000,10:;", one);
  sign("ours");
  lock_node(lock_for("default", "ours"));
  st = kubelet_->allocate(kRes, {{std::string(kA) + "-0"}}, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(envs(resp.container_responses(0)).at("CUDA_DEVICE_MEMORY_LIMIT_0"), "1000m");
  EXPECT_EQ(annotation(pod("ours"), "hami.io/bind-phase"), "success");
}

TEST_F(DevicePluginTest, MalformedAnnotationFailsThePodAndReleasesTheLock) {
  start_plugin();
  wait_registered();
  scheduled_pod("bad", std::string(kB) + ",NVIDIA,lots,30:;",
                json::array({container("main", {{"nvidia.com/gpu", "1"}})}));
  lock_node(lock_for("default", "bad"));
  v1beta1::AllocateResponse resp;
  const grpc::Status st = kubelet_->allocate(kRes, {{std::string(kB) + "-0"}}, &resp);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.error_message(), HasSubstr("pod default/bad"));
  EXPECT_THAT(st.error_message(), HasSubstr("hami.io/vgpu-devices-to-allocate"));
  EXPECT_THAT(st.error_message(), HasSubstr("memory is not a non-negative 32-bit integer"));
  EXPECT_EQ(annotation(pod("bad"), "hami.io/bind-phase"), "failed");
  EXPECT_EQ(annotation(node(), "hami.io/mutex.lock"), "<absent>");
}

TEST_F(DevicePluginTest, MissingPodIsAClearErrorAndTheLockIsReleased) {
  start_plugin();
  wait_registered();
  lock_node(lock_for("default", "ghost"));
  v1beta1::AllocateResponse resp;
  const grpc::Status st = kubelet_->allocate(kRes, {{std::string(kA) + "-0"}}, &resp);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.error_message(), HasSubstr("no pod waiting for GPUs on node node-1"));
  EXPECT_THAT(st.error_message(), HasSubstr("names pod default/ghost, which does not exist"));
  EXPECT_EQ(annotation(node(), "hami.io/mutex.lock"), "<absent>");
}

TEST_F(DevicePluginTest, GpuNotOnThisNodeFailsThePod) {
  start_plugin();
  wait_registered();
  scheduled_pod("elsewhere", "GPU-00000000-0000-4000-8000-000000000000,NVIDIA,100,10:;",
                json::array({container("main", {{"nvidia.com/gpu", "1"}})}));
  lock_node(lock_for("default", "elsewhere"));
  v1beta1::AllocateResponse resp;
  const grpc::Status st = kubelet_->allocate(kRes, {{std::string(kA) + "-0"}}, &resp);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.error_message(), HasSubstr("is not on node node-1"));
  EXPECT_EQ(annotation(pod("elsewhere"), "hami.io/bind-phase"), "failed");
  EXPECT_EQ(annotation(node(), "hami.io/mutex.lock"), "<absent>");
}

}  // namespace
}  // namespace hami::deviceplugin
