// hami-device-plugin with the CDI device list strategies, as a real process:
// the simulated NVML (two GPUs, minors 0 and 1), a fake driver root, the
// kubelet harness over real gRPC and the test API server. The spec it writes
// is checked against the CDI rules, and Allocate's answer per strategy.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "deviceplugin/cdi.hpp"
#include "protocol/node_lock.hpp"
#include "support/apiserver/api_server.hpp"
#include "support/bound_pod.hpp"
#include "support/kubelet/fake_kubelet.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"
#include "support/wait.hpp"

namespace hami::deviceplugin {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::MatchesRegex;
using namespace std::chrono_literals;

constexpr const char* kA = "GPU-5a3e0000-0000-4000-8000-0000000000a1";
constexpr const char* kB = "GPU-5a3e0000-0000-4000-8000-0000000000b2";
constexpr const char* kNode = "node-1";
constexpr const char* kRes = "nvidia.com/gpu";

void touch(const fs::path& p) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << "x";
}

class CdiPluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    plugins_ = root_.file("plugins");
    hook_ = root_.file("hook");
    specs_ = root_.file("cdi");
    driver_ = root_.file("driver");
    fs::create_directories(plugins_);
    fs::create_directories(hook_ + "/vgpu");
    std::ofstream(hook_ + "/vgpu/libvgpu.so") << "not really a library";
    // The driver as the plugin's container sees it (--driver-root-ctr-path).
    touch(fs::path(driver_) / "dev/nvidiactl");
    touch(fs::path(driver_) / "dev/nvidia-uvm");
    touch(fs::path(driver_) / "usr/lib64/libcuda.so.570.1");
    fs::create_symlink("libcuda.so.570.1", fs::path(driver_) / "usr/lib64/libcuda.so.1");
    touch(fs::path(driver_) / "usr/bin/nvidia-smi");
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

  std::vector<std::string> argv(std::vector<std::string> extra) const {
    std::vector<std::string> a = {DEVICE_PLUGIN_BINARY,
                                  "--node-name=" + std::string(kNode),
                                  "--kubeconfig=" + kubeconfig_,
                                  "--device-plugin-path=" + plugins_,
                                  "--hook-path=" + hook_,
                                  "--lock-dir=" + root_.file("vgpulock"),
                                  "--nvml-library=" + std::string(SIMNVML),
                                  "--cdi-spec-dir=" + specs_,
                                  "--driver-root-ctr-path=" + driver_,
                                  "--health-interval=50ms",
                                  "-v4"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

  test::Env env() const {
    return {{"SIMGPU_STATE", root_.file("gpu.state")},
            {"SIMGPU_DEVICES", std::string(kA) + ":80g," + kB + ":40g"},
            {"SIMGPU_NVML_SCRIPT", test::kUnset},
            {"SIMGPU_FAIL", test::kUnset},
            {"DEVICE_LIST_STRATEGY", test::kUnset},
            {"KUBECONFIG", test::kUnset}};
  }

  void start_plugin(std::vector<std::string> extra) {
    plugin_.emplace(test::Child::spawn(argv(std::move(extra)), env()));
    ASSERT_TRUE(kubelet_->wait_for_registrations(1)) << "the plugin never registered";
    ASSERT_TRUE(kubelet_->wait_for_devices(kRes, [](const auto& l) {
      return l.devices_size() == 20;
    })) << "no device list of 20 devices";
  }

  std::string spec_path() const { return specs_ + "/k8s.device-plugin.nvidia.com-gpu.json"; }

  // A pod our scheduler (no decision key) bound here: one container on GPU B.
  void schedule_on_b(const std::string& name) {
    const std::string devices = std::string(kB) + ",NVIDIA,3000,30:;";
    api_.put("pods",
             test::bound_pod(name, kNode, devices, json::array({test::gpu_container("main", 1)})));
    json n = *api_.get("nodes", "", kNode);
    n["metadata"]["annotations"]["hami.io/mutex.lock"] =
        protocol::format_node_lock(std::chrono::system_clock::now(), "default", name);
    api_.put("nodes", n);
  }

  v1beta1::ContainerAllocateResponse allocate_b() {
    v1beta1::AllocateResponse resp;
    const grpc::Status st = kubelet_->allocate(kRes, {{std::string(kB) + "-0"}}, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(resp.container_responses_size(), 1);
    return resp.container_responses_size() ? resp.container_responses(0)
                                           : v1beta1::ContainerAllocateResponse();
  }

  test::TempDir root_;
  std::string plugins_, hook_, specs_, driver_, kubeconfig_;
  test::ApiServer api_;
  std::unique_ptr<test::FakeKubelet> kubelet_;
  std::optional<test::Child> plugin_;
};

TEST_F(CdiPluginTest, CdiAnnotationsWriteTheSpecAndNameTheGpus) {
  start_plugin({"--device-list-strategy=cdi-annotations", "--nvidia-driver-root=/run/nvidia/driver",
                "--cdi-annotation-prefix=nvidia.cdi.k8s.io/"});
  // The spec is there before the plugin registers.
  std::ifstream in(spec_path());
  ASSERT_TRUE(in) << "no spec at " << spec_path();
  const json spec = json::parse(in);
  EXPECT_THAT(cdi::validate_spec(spec), IsEmpty()) << spec.dump(2);
  EXPECT_EQ(spec["kind"], "k8s.device-plugin.nvidia.com/gpu");
  EXPECT_EQ(spec["cdiVersion"], "0.5.0");  // host paths under the driver root
  ASSERT_EQ(spec["devices"].size(), 2u);
  EXPECT_EQ(spec["devices"][0]["name"], kA);
  EXPECT_EQ(spec["devices"][1]["name"], kB);
  EXPECT_EQ(spec["devices"][1]["containerEdits"]["deviceNodes"][0],
            json::parse(R"({"path":"/dev/nvidia1","hostPath":"/run/nvidia/driver/dev/nvidia1"})"));
  const json& e = spec["containerEdits"];
  EXPECT_EQ(e["deviceNodes"].size(), 2u);
  EXPECT_EQ(e["mounts"][0]["hostPath"], "/run/nvidia/driver/usr/lib64/libcuda.so.570.1");
  EXPECT_EQ(e["mounts"][0]["containerPath"], "/usr/lib64/libcuda.so.1");

  schedule_on_b("p1");
  const auto r = allocate_b();
  ASSERT_EQ(r.annotations_size(), 1);
  const auto& [key, value] = *r.annotations().begin();
  EXPECT_THAT(key, MatchesRegex("nvidia\\.cdi\\.k8s\\.io/nvidia-device-plugin_[0-9a-f]{32}"));
  EXPECT_EQ(value, std::string("k8s.device-plugin.nvidia.com/gpu=") + kB);
  EXPECT_EQ(cdi::qualified_name_problem(value), std::nullopt);
  EXPECT_EQ(r.cdi_devices_size(), 0);
  // The GPU goes by CDI alone; HAMi's per-container part is unchanged.
  EXPECT_EQ(r.envs().at("NVIDIA_VISIBLE_DEVICES"), "void");
  EXPECT_EQ(r.envs().at("CUDA_DEVICE_MEMORY_LIMIT_0"), "3000m");
  EXPECT_EQ(r.mounts_size(), 6);
}

TEST_F(CdiPluginTest, CdiCriFillsTheCdiDevicesField) {
  start_plugin({"--device-list-strategy=envvar,cdi-cri"});
  std::ifstream in(spec_path());
  ASSERT_TRUE(in);
  EXPECT_EQ(json::parse(in)["cdiVersion"], "0.3.0");  // the host's own root: no hostPath
  schedule_on_b("p1");
  const auto r = allocate_b();
  ASSERT_EQ(r.cdi_devices_size(), 1);
  EXPECT_EQ(r.cdi_devices(0).name(), std::string("k8s.device-plugin.nvidia.com/gpu=") + kB);
  EXPECT_EQ(r.annotations_size(), 0);
  EXPECT_EQ(r.envs().at("NVIDIA_VISIBLE_DEVICES"), kB);  // envvar too
}

TEST_F(CdiPluginTest, EnvvarWritesNoSpec) {
  start_plugin({});
  schedule_on_b("p1");
  const auto r = allocate_b();
  EXPECT_EQ(r.envs().at("NVIDIA_VISIBLE_DEVICES"), kB);
  EXPECT_EQ(r.annotations_size(), 0);
  EXPECT_EQ(r.cdi_devices_size(), 0);
  EXPECT_FALSE(fs::exists(specs_));
}

TEST_F(CdiPluginTest, SighupWritesARemovedSpecAgain) {
  start_plugin({"--device-list-strategy=cdi-cri"});
  ASSERT_TRUE(fs::remove(spec_path()));
  plugin_->kill(SIGHUP);
  EXPECT_TRUE(test::wait_until([&] { return fs::exists(spec_path()); }))
      << "SIGHUP did not write the spec again";
}

TEST_F(CdiPluginTest, BadValuesAreUsageErrorsThatSayWhy) {
  struct Case {
    std::string flag;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {"--device-list-strategy=volume-mounts", "volume-mounts: not supported by this build"},
           {"--device-list-strategy=cdi", "unknown strategy 'cdi'"},
           {"--cdi-annotation-prefix=cdi.k8s.io", "ends with '/'"},
           {"--cdi-annotation-prefix=CDI/", "DNS subdomain"},
           {"--nvidia-driver-root=run/nvidia/driver", "not an absolute path"},
           {"--nvidia-cdi-hook-path=nvidia-cdi-hook", "not an absolute path"}}) {
    const auto r = test::run_process({DEVICE_PLUGIN_BINARY, "--node-name=n", c.flag});
    EXPECT_EQ(r.exit_code, 2) << c.flag;
    EXPECT_THAT(r.err, HasSubstr(c.says)) << c.flag;
  }
}

TEST_F(CdiPluginTest, ASpecThatCannotBeWrittenStopsTheStart) {
  std::ofstream(root_.file("file")) << "x";
  specs_ = root_.file("file") + "/cdi";
  const auto r = test::run_process(argv({"--device-list-strategy=cdi-annotations"}), env());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("cannot create the CDI spec directory"));
}

}  // namespace
}  // namespace hami::deviceplugin
