// hami-node-agent as a real process: against a real CUDA process (the
// simulated driver with libvgpu.so preloaded) it resolves the process's host
// PID and exports its GPU use. This is the case upstream gets wrong (container
// utilisation stuck at 0 because the stored "host PID" did not match NVML's).
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
#include <sstream>
#include <thread>

#include "region/region.hpp"
#include "region/snapshot.hpp"
#include "support/apiserver/api_server.hpp"
#include "support/free_port.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"

namespace hami::monitor {
namespace {

namespace fs = std::filesystem;
using test::Env;

const std::string kSimNvml = std::string(SIMGPU_LIB_DIR) + "/libnvidia-ml.so.1";

// The value of the first sample of `family` whose labels contain `labels`.
std::optional<double> metric(const std::string& text, const std::string& family,
                             const std::string& labels) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(family + "{", 0) != 0 || line.find(labels) == std::string::npos) continue;
    return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return std::nullopt;
}

class AgentDaemon : public ::testing::Test {
 protected:
  void SetUp() override { fs::create_directories(container_dir_); }

  Env gpu_env() const {
    return {{"LD_LIBRARY_PATH", SIMGPU_LIB_DIR},
            {"SIMGPU_STATE", root_.file("gpu.state")},
            {"SIMGPU_CONTEXT_SIZE", "300m"},
            {"ASAN_OPTIONS", "verify_asan_link_order=0:detect_leaks=0"},
            {"CUDA_VISIBLE_DEVICES", test::kUnset},
            {"SIMGPU_NVML_SCRIPT", test::kUnset},
            {"SIMGPU_NVML_PID_OFFSET", test::kUnset},
            {"KUBECONFIG", test::kUnset},
            {"KUBERNETES_SERVICE_HOST", test::kUnset}};
  }
  Env container_env() const {
    Env e = gpu_env();
    e.push_back({"LD_PRELOAD", LIBVGPU});
    e.push_back({"CUDA_DEVICE_MEMORY_SHARED_CACHE", container_dir_ + "/vgpu.cache"});
    e.push_back({"CUDA_DEVICE_MEMORY_LIMIT", "2g"});
    e.push_back({"SIMGPU_KERNEL_NS", "1000000"});  // 1 ms of GPU time per kernel
    return e;
  }
  std::vector<std::string> agent_argv(std::vector<std::string> extra) const {
    std::vector<std::string> argv = {AGENT,         "--hook-path", root_.path(),
                                     "--node-name", "node-1",      "--nvml-library",
                                     kSimNvml,      "--pod-names", "none"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }

  test::TempDir root_;
  const std::string pod_uid_ = "0f6c2d52-7a8b-4c1e-9d3f-aa00bb11cc22";
  const std::string container_dir_ = root_.path() + "/containers/" + pod_uid_ + "_main";
};

TEST_F(AgentDaemon, ExportsUtilisationOfARealCudaProcess) {
  // 4 s of queued kernels: the GPU is busy while the agent samples.
  auto client = test::Child::spawn(
      {CUDA_CLIENT, "init", "ctx:0", "alloc:64m", "launchpath:kernel:4000", "mark", "hold"},
      container_env());
  ASSERT_TRUE(client.wait_for_line("op=mark")) << client.out();

  auto r = test::run_process(agent_argv({"--once"}), gpu_env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string labels = "pod=\"" + pod_uid_ + "\",container=\"main\",vdevice_index=\"0\"";
  auto util = metric(r.out, "hami_container_device_utilization_ratio", labels);
  ASSERT_TRUE(util) << r.out;
  EXPECT_GT(*util, 0) << r.out;
  auto nvml_mem = metric(r.out, "hami_container_device_nvml_memory_bytes", labels);
  ASSERT_TRUE(nvml_mem);
  EXPECT_GE(*nvml_mem, 64.0 * (1 << 20));
  auto used = metric(r.out, "hami_vgpu_memory_used_bytes", labels);
  ASSERT_TRUE(used);
  EXPECT_GE(*used, 64.0 * (1 << 20));
  EXPECT_EQ(metric(r.out, "hami_vgpu_memory_limit_bytes", labels), 2.0 * (1ull << 30));
  EXPECT_EQ(metric(r.out, "hami_monitor_unresolved_processes", ""), 0.0);

  // The host PID and the samples were written into the client's slot.
  auto snap = region::read_snapshot(container_dir_ + "/vgpu.cache");
  ASSERT_TRUE(snap) << snap.error().message;
  ASSERT_EQ(snap->slots.size(), 1u);
  EXPECT_EQ(snap->slots[0].host_pid, client.pid());
  EXPECT_GT(snap->slots[0].sm_util[0], 0u);
  client.finish();
}

using test::free_port;

TEST_F(AgentDaemon, BadFlagsAreUsageErrors) {
  auto r = test::run_process(agent_argv({"--interval", "1.5s"}), gpu_env());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("is not a duration"), std::string::npos) << r.err;
  r = test::run_process(agent_argv({"--metrics-bind-address", "nonsense"}), gpu_env());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("expected [host]:port"), std::string::npos) << r.err;
  r = test::run_process({AGENT, "--help"}, gpu_env());
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--hook-path"), std::string::npos);
}

TEST_F(AgentDaemon, MissingNvmlIsLoggedAndMetricsStillServed) {
  auto r = test::run_process({AGENT, "--once", "--hook-path", root_.path(), "--nvml-library",
                              "/nonexistent/libnvml.so", "--pod-names", "none"},
                             gpu_env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("/nonexistent/libnvml.so"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("hami_monitor_passes_total{zone=\"vGPU\"} 1"), std::string::npos);
}

TEST_F(AgentDaemon, StopsCleanlyOnSigterm) {
  const int port = free_port();
  auto agent = test::Child::spawn(agent_argv({"--interval", "200ms", "--metrics-bind-address",
                                              "127.0.0.1:" + std::to_string(port)}),
                                  gpu_env());
  // Up once /healthz answers 200 (the first pass has completed).
  bool healthy = false;
  httplib::Client http("127.0.0.1", port);
  for (int i = 0; i < 200 && !healthy; ++i) {
    auto r = http.Get("/healthz");
    healthy = r && r->status == 200 && r->body == "ok\n";
    if (!healthy) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(healthy);
  auto metrics = http.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("hami_host_gpu_memory_total_bytes{node=\"node-1\""),
            std::string::npos);
  agent.kill(SIGTERM);
  auto done = agent.finish();
  EXPECT_EQ(done.exit_code, 0) << done.err;
  EXPECT_NE(done.err.find("stopping"), std::string::npos) << done.err;
}

// While the device plugin changes MIG instances (its apply lock is held by a
// live process, here this test) no pass runs; once it is released, passes go on.
TEST_F(AgentDaemon, NoPassRunsWhileTheMigApplyLockIsHeld) {
  const std::string lock = root_.file("hami/hami-mig-apply.lock");
  fs::create_directories(root_.file("hami"));
  std::ofstream(lock) << ::getpid() << "\n";
  const int port = free_port();
  auto agent = test::Child::spawn(
      agent_argv({"--interval", "100ms", "--mig-apply-lock", lock, "-v3", "--metrics-bind-address",
                  "127.0.0.1:" + std::to_string(port)}),
      gpu_env());
  httplib::Client http("127.0.0.1", port);
  auto passes = [&]() -> std::optional<double> {
    auto r = http.Get("/metrics");
    if (!r || r->status != 200) return std::nullopt;
    return metric(r->body, "hami_monitor_passes_total", "zone=\"vGPU\"");
  };
  std::optional<double> seen;
  for (int i = 0; i < 200 && !seen; ++i) {
    seen = passes();
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // five intervals
  EXPECT_EQ(passes().value_or(-1), 0) << "a pass ran while the lock was held";
  fs::remove(lock);
  bool resumed = false;
  for (int i = 0; i < 200 && !resumed; ++i) {
    resumed = passes().value_or(0) >= 1;
    if (!resumed) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(resumed) << "no pass after the lock was released";
  agent.kill(SIGTERM);
  auto done = agent.finish();
  EXPECT_EQ(done.exit_code, 0) << done.err;
  EXPECT_NE(done.err.find("pass skipped: " + lock + " is held"), std::string::npos) << done.err;
}

// Pod names come from the API server, for this node's pods only: a pod of
// another node is not listed, so its directory stays labelled by UID.
TEST_F(AgentDaemon, NamesPodsOfItsNodeFromTheApiServer) {
  test::ApiServer api;
  auto mine = api.put("pods", {{"metadata", {{"name", "trainer-0"}, {"namespace", "ml"}}},
                               {"spec", {{"nodeName", "node-1"}}}});
  auto other = api.put("pods", {{"metadata", {{"name", "elsewhere"}, {"namespace", "ml"}}},
                                {"spec", {{"nodeName", "node-2"}}}});
  const std::string mine_uid = mine["metadata"]["uid"];
  const std::string other_uid = other["metadata"]["uid"];
  for (const std::string& uid : {mine_uid, other_uid}) {
    const std::string d = root_.path() + "/containers/" + uid + "_main";
    fs::create_directories(d);
    region::OpenOptions opt;
    opt.initial.memory_limit[0] = 1ull << 30;
    auto r = region::Region::open(d + "/vgpu.cache", opt);
    ASSERT_TRUE(r) << r.error().message;
    r->set_device_count(1);
    ASSERT_TRUE(r->set_device_uuid(0, "GPU-5a3e0000-0000-4000-8000-000000000000"));
  }
  const std::string kubeconfig = api.write_kubeconfig(root_.file("kubeconfig"));
  std::vector<std::string> argv = {AGENT,         "--once",       "--hook-path", root_.path(),
                                   "--node-name", "node-1",       "--no-nvml",   "--pod-names",
                                   "api",         "--kubeconfig", kubeconfig};
  auto r = test::run_process(argv, gpu_env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("hami_vgpu_memory_limit_bytes{namespace=\"ml\",pod=\"trainer-0\","
                       "container=\"main\""),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("hami_vgpu_memory_limit_bytes{namespace=\"\",pod=\"" + other_uid + "\""),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("elsewhere"), std::string::npos);
  EXPECT_EQ(api.requests("list", "/api/v1/pods"), 1u);

  // --pod-names api without a reachable configuration refuses to start.
  argv.back() = root_.file("missing-kubeconfig");
  r = test::run_process(argv, gpu_env());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("missing-kubeconfig"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace hami::monitor
