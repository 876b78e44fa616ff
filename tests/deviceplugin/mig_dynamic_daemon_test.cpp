// Dynamic MIG through the real hami-device-plugin process (docs/mig-dynamic.md):
// the simulated NVML with GPU A an H100 80GB in MIG mode holding no instance
// and operatingmode mig, GPU B an H100 time-sliced; the kubelet harness over
// gRPC and the test API server. Registration with the allowed profiles,
// Allocate making the MIG device the scheduler reserved and answering with
// it, a failure at each step leaving no instance, cleanup, a forged
// reservation refused. The test process looks at the GPU through its own
// nvml::MigControl on the same simulated state.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "deviceplugin/mig_manager.hpp"
#include "k8s/objects.hpp"
#include "nvml/mig_control.hpp"
#include "protocol/decision.hpp"
#include "protocol/mig_allocations.hpp"
#include "protocol/node_lock.hpp"
#include "protocol/node_register.hpp"
#include "support/apiserver/api_server.hpp"
#include "support/bound_pod.hpp"
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
using ::testing::StartsWith;
using namespace std::chrono_literals;
using test::wait_until;

constexpr const char* kA = "GPU-6b4f0000-0000-4000-8000-0000000000a1";
constexpr const char* kB = "GPU-6b4f0000-0000-4000-8000-0000000000b2";
constexpr const char* kNode = "node-1";
constexpr const char* kRes = "nvidia.com/gpu";
constexpr const char* kKey = "0123456789abcdef0123456789abcdef-mig";
constexpr const char* kNames = "NVIDIA H100 80GB HBM3,NVIDIA H100 80GB HBM3";

std::string lock_for(const std::string& name) {
  return protocol::format_node_lock(std::chrono::system_clock::now(), "default", name);
}

// The scheduler's reservation of one MIG device for container entry 0.
std::string reservation(const char* profile, unsigned start, unsigned size) {
  protocol::MigAllocation a;
  a.gpu_uuid = kA;
  a.profile = profile;
  a.placement = {start, size};
  return protocol::encode_mig_allocations({a});
}

class DynamicMigPluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    plugins_ = root_.file("plugins");
    hook_ = root_.file("hook");
    std::filesystem::create_directories(plugins_);
    std::filesystem::create_directories(hook_ + "/vgpu");
    std::ofstream(hook_ + "/vgpu/libvgpu.so") << "not really a library";
    write_script("");
    std::ofstream(root_.file("cfg.yaml"))
        << "nvidia:\n  migProfileAllowlist:\n"
        << "  - models: [\"H100-SXM5-80GB\"]\n"
        << "    profiles: [\"1g.10gb\", \"3g.40gb\", \"7g.80gb\"]\n"
        << "nodeconfig:\n  - name: node-1\n    devicemodes:\n"
        << "    - {index: 0, operatingmode: mig}\n";
    api_.put("nodes", {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", kNode}}}});
    kubeconfig_ = api_.write_kubeconfig(root_.file("kubeconfig"));
    kubelet_ = std::make_unique<test::FakeKubelet>(plugins_);
    // The test's own view of the simulated GPUs (never scripted to fail).
    ::setenv("SIMGPU_STATE", root_.file("gpu.state").c_str(), 1);
    ::setenv("SIMGPU_DEVICES", (std::string(kA) + ":80g," + kB + ":80g").c_str(), 1);
    ::setenv("SIMGPU_NAMES", kNames, 1);
    ::setenv("SIMGPU_MIG", "0:on", 1);
    for (const char* v : {"SIMGPU_NVML_SCRIPT", "SIMGPU_FAIL", "SIMGPU_NUMA"})
      ::unsetenv(v);
    auto c = nvml::MigControl::open(SIMNVML);
    ASSERT_TRUE(c) << c.error().message;
    control_ = std::move(*c);
  }

  void TearDown() override {
    stop_plugin();
    EXPECT_FALSE(MigApplyLock::held(apply_lock())) << "the apply lock was left behind";
  }

  std::string apply_lock() const { return root_.file("hami/hami-mig-apply.lock"); }

  void start_plugin(std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {DEVICE_PLUGIN_BINARY,
                                     "--node-name=" + std::string(kNode),
                                     "--kubeconfig=" + kubeconfig_,
                                     "--device-plugin-path=" + plugins_,
                                     "--hook-path=" + hook_,
                                     "--lock-dir=" + root_.file("vgpulock"),
                                     "--nvml-library=" + std::string(SIMNVML),
                                     "--config-file=" + root_.file("cfg.yaml"),
                                     "--mig-apply-lock=" + apply_lock(),
                                     "--mig-cleanup-interval=200ms",
                                     "--health-interval=50ms",
                                     "--register-interval=200ms",
                                     "--allocate-protocol=lock",
                                     "-v4"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    test::Env env = {{"SIMGPU_STATE", root_.file("gpu.state")},
                     {"SIMGPU_DEVICES", std::string(kA) + ":80g," + kB + ":80g"},
                     {"SIMGPU_NAMES", kNames},
                     {"SIMGPU_MIG", "0:on"},
                     {"SIMGPU_NUMA", test::kUnset},
                     {"SIMGPU_NVML_SCRIPT", root_.file("nvml.script")},
                     {"SIMGPU_FAIL", test::kUnset},
                     {"DP_DISABLE_HEALTHCHECKS", test::kUnset},
                     {"KUBECONFIG", test::kUnset}};
    plugin_.emplace(test::Child::spawn(argv, env));
    ++starts_;
    ASSERT_TRUE(kubelet_->wait_for_registrations(starts_)) << "the plugin never registered";
    // GPU A: its registration's count (seven 1g.10gb) of IDs; GPU B: 10.
    ASSERT_TRUE(kubelet_->wait_for_devices(kRes, [](const auto& l) {
      return l.devices_size() == 17;
    })) << "no device list of 7 + 10 devices";
  }

  std::string stop_plugin() {
    if (!plugin_) return "";
    plugin_->kill(SIGTERM);
    const test::ProcessResult r = plugin_->finish();
    plugin_.reset();
    EXPECT_EQ(r.exit_code, 0) << "the plugin did not stop cleanly on SIGTERM";
    if (HasFailure() || std::getenv("DP_LOG"))
      std::fprintf(stderr, "--- hami-device-plugin log ---\n%s", r.err.c_str());
    return r.err;
  }

  void write_script(const std::string& text) {
    const std::string path = root_.file("nvml.script");
    std::ofstream(path + ".tmp") << text;
    ASSERT_EQ(std::rename((path + ".tmp").c_str(), path.c_str()), 0);
  }

  std::optional<json> node() const { return api_.get("nodes", "", kNode); }
  std::optional<json> pod(const std::string& name) const {
    return api_.get("pods", "default", name);
  }

  void lock_node(const std::string& name) {
    json n = *node();
    n["metadata"]["annotations"]["hami.io/mutex.lock"] = lock_for(name);
    api_.put("nodes", n);
  }

  // A pod our scheduler placed on GPU A with `mem` MiB, reserving a MIG
  // device there in hami.io/vgpu-mig-allocations; bound, allocating.
  json mig_pod(const std::string& name, int mem, const std::string& mig) {
    const std::string devices = std::string(kA) + ",NVIDIA," + std::to_string(mem) + ",100:;";
    json p = test::bound_pod(name, kNode, devices, json::array({test::gpu_container("main", 1)}));
    p["metadata"]["annotations"]["hami.io/vgpu-mig-allocations"] = mig;
    return api_.put("pods", p);
  }

  void set_phase(const std::string& name, const std::string& phase) {
    json p = *pod(name);
    p["status"]["phase"] = phase;
    api_.put("pods", p);
  }

  std::string key_file() {
    std::ofstream(root_.file("decision.key")) << kKey << "\n";
    return root_.file("decision.key");
  }
  json sign(const std::string& name) {
    json p = *pod(name);
    auto typed = k8s::Pod::from_json(p);
    p["metadata"]["annotations"]["hami.io/decision-signature"] =
        protocol::DecisionKeys::parse(kKey, "test")->sign(protocol::decision_of(*typed));
    return api_.put("pods", p);
  }

  grpc::Status allocate(v1beta1::AllocateResponse* resp) {
    return kubelet_->allocate(kRes, {{std::string(kA) + "-2"}}, resp);
  }

  std::vector<nvml::GpuInstance> instances() {
    auto l = control_->instances(0);
    EXPECT_TRUE(l) << l.error().message;
    return l ? *l : std::vector<nvml::GpuInstance>{};
  }

  unsigned profile_id(const std::string& name) {
    auto ps = control_->profiles(0);
    EXPECT_TRUE(ps);
    for (const nvml::GiProfile& p : *ps)
      if (p.name == name) return p.id;
    ADD_FAILURE() << "no profile " << name;
    return 0;
  }

  std::vector<protocol::MigAllocation> recorded(const std::string& name) {
    auto r =
        protocol::decode_mig_allocations(annotation(pod(name), "hami.io/vgpu-mig-allocations"));
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    return r ? *r : std::vector<protocol::MigAllocation>{};
  }

  test::TempDir root_;
  std::string plugins_;
  std::string hook_;
  std::string kubeconfig_;
  test::ApiServer api_;
  std::unique_ptr<test::FakeKubelet> kubelet_;
  std::optional<test::Child> plugin_;
  size_t starts_ = 0;
  std::unique_ptr<nvml::MigControl> control_;
};

TEST_F(DynamicMigPluginTest, RegistersTheAllowedProfilesOfAGpuWithoutInstances) {
  start_plugin();
  std::vector<protocol::NodeDevice> reg;
  ASSERT_TRUE(wait_until([&] {
    auto d = protocol::decode_node_devices(annotation(node(), "hami.io/node-nvidia-register"));
    if (!d || d->size() != 2) return false;
    reg = *d;
    return true;
  })) << annotation(node(), "hami.io/node-nvidia-register");
  const protocol::NodeDevice& a = reg[0];
  EXPECT_EQ(a.id, kA);
  EXPECT_EQ(a.mode, "mig");
  EXPECT_EQ(a.count, 7);  // seven 1g.10gb
  EXPECT_EQ(a.devmem, 81920);
  EXPECT_EQ(a.devcore, 100);
  ASSERT_EQ(a.mig_profiles.size(), 3u);
  EXPECT_EQ(a.mig_profiles[0].name, "1g.10gb");
  EXPECT_EQ(a.mig_profiles[1].name, "3g.40gb");
  EXPECT_EQ(a.mig_profiles[1].core, 42);
  EXPECT_EQ(a.mig_profiles[1].placements, (std::vector<protocol::MigPlacement>{{0, 4}, {4, 4}}));
  EXPECT_EQ(a.mig_profiles[2].name, "7g.80gb");
  EXPECT_EQ(reg[1].id, kB);
  EXPECT_EQ(reg[1].mode, "hami-core");
  EXPECT_TRUE(reg[1].mig_profiles.empty());
  EXPECT_TRUE(instances().empty());
}

// A `mig` GPU the operator partitioned stays static MIG: its MIG devices are
// registered, no profiles, and nothing of it is removed.
TEST_F(DynamicMigPluginTest, AGpuTheOperatorPartitionedStaysStatic) {
  auto made = control_->create(0, profile_id("3g.40gb"), {0, 4});
  ASSERT_TRUE(made) << made.error().message;
  plugin_.emplace(test::Child::spawn(
      {DEVICE_PLUGIN_BINARY, "--node-name=" + std::string(kNode), "--kubeconfig=" + kubeconfig_,
       "--device-plugin-path=" + plugins_, "--hook-path=" + hook_,
       "--nvml-library=" + std::string(SIMNVML), "--config-file=" + root_.file("cfg.yaml"),
       "--mig-apply-lock=" + apply_lock(), "--mig-cleanup-interval=100ms",
       "--register-interval=200ms", "-v4"},
      {{"SIMGPU_NVML_SCRIPT", root_.file("nvml.script")}, {"KUBECONFIG", test::kUnset}}));
  ASSERT_TRUE(wait_until([&] {
    auto d = protocol::decode_node_devices(annotation(node(), "hami.io/node-nvidia-register"));
    return d && d->size() == 2 && (*d)[0].id == made->mig_uuid && (*d)[0].mig_profiles.empty();
  })) << annotation(node(), "hami.io/node-nvidia-register");
  std::this_thread::sleep_for(500ms);  // cleanup rounds, had the GPU been dynamic
  EXPECT_EQ(instances().size(), 1u);
}

// The scheduler's reservation becomes a MIG device at Allocate: made at the
// placement it names, recorded on the pod, and the container given it by its
// MIG UUID with the library's limit at the request.
TEST_F(DynamicMigPluginTest, AllocateMakesTheReservedMigDeviceAndAnswersWithIt) {
  start_plugin();
  mig_pod("m1", 20000, reservation("3g.40gb", 4, 4));
  lock_node("m1");
  const std::string uid = (*pod("m1"))["metadata"]["uid"];
  v1beta1::AllocateResponse resp;
  const grpc::Status st = allocate(&resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(resp.container_responses_size(), 1);
  const auto& envs = resp.container_responses(0).envs();
  const std::string mig = envs.at("NVIDIA_VISIBLE_DEVICES");
  EXPECT_THAT(mig, StartsWith("MIG-"));
  EXPECT_EQ(envs.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "20000m");
  EXPECT_THAT(slurp(hook_ + "/vgpu/limits/" + uid + "_main/limits"),
              HasSubstr("VGPU_DEVICE_UUID_0=" + mig + "\n"));

  const auto live = instances();
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(live[0].placement, (nvml::GiPlacement{4, 4}));
  const auto rec = recorded("m1");
  ASSERT_EQ(rec.size(), 1u);
  EXPECT_EQ(rec[0].mig_uuid, mig);
  EXPECT_EQ(rec[0].gpu_instance_id, live[0].id);
  EXPECT_EQ(rec[0].placement, (protocol::MigPlacement{4, 4}));
  EXPECT_EQ(annotation(pod("m1"), "hami.io/bind-phase"), "success");
  EXPECT_EQ(annotation(node(), "hami.io/mutex.lock"), "<absent>");

  // Without gpumem, the limit is the whole MIG device.
  mig_pod("m2", 0, reservation("1g.10gb", 0, 1));
  lock_node("m2");
  const grpc::Status st2 = allocate(&resp);
  ASSERT_TRUE(st2.ok()) << st2.error_message();
  EXPECT_EQ(resp.container_responses(0).envs().at("CUDA_DEVICE_MEMORY_LIMIT_0"), "9984m");
  EXPECT_EQ(instances().size(), 2u);
}

// Each step failed in turn: Allocate fails saying why, the pod is failed,
// and the GPU holds no instance.
TEST_F(DynamicMigPluginTest, AFailureAtAnyStepLeavesNoInstance) {
  start_plugin();
  int n = 0;
  auto fails = [&](const std::string& why) {
    SCOPED_TRACE(why);
    const std::string name = "f" + std::to_string(++n);
    mig_pod(name, 20000, reservation("3g.40gb", 0, 4));
    lock_node(name);
    v1beta1::AllocateResponse resp;
    const grpc::Status st = allocate(&resp);
    EXPECT_FALSE(st.ok()) << "served " << resp.DebugString();
    EXPECT_THAT(st.error_message(), HasSubstr(why));
    EXPECT_THAT(st.error_message(), HasSubstr("pod default/" + name));
    EXPECT_TRUE(instances().empty());
    EXPECT_FALSE(MigApplyLock::held(apply_lock()));
    write_script("");
    api_.clear_faults();
    set_phase(name, "Failed");  // what kubelet does to it
  };
  for (const char* step :
       {"nvmlDeviceGetGpuInstanceProfileInfoV", "nvmlDeviceCreateGpuInstanceWithPlacement",
        "nvmlGpuInstanceCreateComputeInstance", "nvmlDeviceGetUUID"}) {
    write_script(std::string("fail ") + step + " 0\n");
    fails(step);
  }
  // The host files cannot be prepared (the library is missing).
  std::filesystem::rename(hook_ + "/vgpu/libvgpu.so", hook_ + "/vgpu/libvgpu.so.away");
  fails("libvgpu.so");
  std::filesystem::rename(hook_ + "/vgpu/libvgpu.so.away", hook_ + "/vgpu/libvgpu.so");
  // The pod cannot be patched with the MIG device.
  api_.inject({.verb = "patch",
               .path_prefix = "/api/v1/namespaces/default/pods/f6",
               .status = 403,
               .count = -1});
  fails("recording the MIG devices");
  // A reservation that does not fit the GPU.
  mig_pod("f7", 20000, reservation("3g.40gb", 1, 4));
  lock_node("f7");
  v1beta1::AllocateResponse resp;
  EXPECT_FALSE(allocate(&resp).ok());
  EXPECT_TRUE(instances().empty());
  set_phase("f7", "Failed");
  // And with nothing failing, the same reservation is made.
  mig_pod("ok", 20000, reservation("3g.40gb", 0, 4));
  lock_node("ok");
  const grpc::Status st = allocate(&resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(instances().size(), 1u);
}

// A signed pod whose reservation was changed after the scheduler signed it
// is refused before anything is made.
TEST_F(DynamicMigPluginTest, AnAlteredReservationOnASignedPodIsRefused) {
  start_plugin({"--decision-key-file=" + key_file()});
  mig_pod("altered", 20000, reservation("1g.10gb", 0, 1));
  json p = sign("altered");
  p["metadata"]["annotations"]["hami.io/vgpu-mig-allocations"] = reservation("7g.80gb", 0, 8);
  api_.put("pods", p);
  lock_node("altered");
  v1beta1::AllocateResponse resp;
  grpc::Status st = allocate(&resp);
  ASSERT_FALSE(st.ok()) << "served " << resp.DebugString();
  EXPECT_THAT(st.error_message(), HasSubstr("hami.io/decision-signature"));
  EXPECT_TRUE(instances().empty());
  EXPECT_EQ(annotation(pod("altered"), "hami.io/bind-phase"), "failed");
  set_phase("altered", "Failed");
  // Signed as the scheduler wrote it: served.
  mig_pod("signed", 20000, reservation("1g.10gb", 0, 1));
  sign("signed");
  lock_node("signed");
  st = allocate(&resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(instances().size(), 1u);
}

// Cleanup keeps what a running pod's reservation names (across a restart of
// the plugin, which must still take the GPU as dynamic) and removes what no
// pod names, and a pod's instance once the pod has finished.
TEST_F(DynamicMigPluginTest, CleanupRemovesWhatNoRunningPodNames) {
  start_plugin({"--decision-key-file=" + key_file()});
  mig_pod("runs", 20000, reservation("3g.40gb", 4, 4));
  sign("runs");
  lock_node("runs");
  v1beta1::AllocateResponse resp;
  const grpc::Status st = allocate(&resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  set_phase("runs", "Running");
  const unsigned kept = *recorded("runs")[0].gpu_instance_id;
  // A stray instance while the plugin runs: gone within a round.
  auto stray = control_->create(0, profile_id("1g.10gb"), {0, 1});
  ASSERT_TRUE(stray) << stray.error().message;
  ASSERT_TRUE(wait_until([&] { return instances().size() == 1; }, 5s)) << "the stray stayed";
  EXPECT_EQ(instances()[0].id, kept);

  // Restarted with a stray among the pod's: the GPU is still dynamic, the
  // stray goes at start and the running pod's instance stays.
  const std::string first_log = stop_plugin();
  EXPECT_THAT(first_log, HasSubstr("MIG cleanup: removed GPU instance " +
                                   std::to_string(stray->gpu_instance_id) + " of " + kA));
  stray = control_->create(0, profile_id("1g.10gb"), {0, 1});
  ASSERT_TRUE(stray) << stray.error().message;
  start_plugin({"--decision-key-file=" + key_file()});
  ASSERT_TRUE(wait_until([&] { return instances().size() == 1; }, 5s)) << "the stray stayed";
  EXPECT_EQ(instances()[0].id, kept);
  auto d = protocol::decode_node_devices(annotation(node(), "hami.io/node-nvidia-register"));
  ASSERT_TRUE(d && !d->empty());
  EXPECT_FALSE((*d)[0].mig_profiles.empty()) << "the restarted plugin took the GPU as static";

  // The pod finished: its instance goes.
  set_phase("runs", "Succeeded");
  EXPECT_TRUE(wait_until([&] { return instances().empty(); }, 5s));
}

}  // namespace
}  // namespace hami::deviceplugin
