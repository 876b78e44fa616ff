// `vgpu run` on the simulated GPUs: the machine's state as the fitting code
// sees it, the GPU it picks, the limits the command runs under, and refusing
// to over-commit.
#include "cli/run.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "region/region.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"

namespace hami::cli {
namespace {

namespace fs = std::filesystem;
constexpr const char* kGpu0 = "GPU-5a3e0000-0000-4000-8000-000000000000";
constexpr const char* kGpu1 = "GPU-5a3e0000-0000-4000-8000-000000000001";

monitor::ContainerState state(const std::string& uuid, uint64_t limit, uint64_t sm, bool live) {
  monitor::ContainerState c;
  c.snapshot.device_num = 1;
  c.snapshot.uuids[0] = uuid;
  c.snapshot.memory_limit[0] = limit;
  c.snapshot.sm_limit[0] = sm;
  if (live) {
    region::SlotSnapshot s;
    s.pid = 42;
    s.status = region::kSlotRunning;
    s.liveness = region::Liveness::kAlive;
    c.snapshot.slots.push_back(s);
  }
  return c;
}

TEST(LocalNode, RunningContainersReserveTheirLimits) {
  std::vector<LocalGpu> gpus = {{0, kGpu0, "Simulated GPU 0", 80ull << 30},
                                {1, kGpu1, "Simulated GPU 1", 80ull << 30}};
  auto node = local_node(gpus, {state(kGpu0, 4ull << 30, 30, true),
                                state(kGpu0, 0, 100, true),             // no limits: whole GPU
                                state(kGpu1, 8ull << 30, 50, false)});  // nobody left: free
  ASSERT_EQ(node.devices.size(), 2u);
  EXPECT_EQ(node.devices[0].total_mem_mib, 81920);
  EXPECT_EQ(node.devices[0].used_tenants, 2);
  EXPECT_EQ(node.devices[0].used_mem_mib, 4096 + 81920);
  EXPECT_EQ(node.devices[0].used_cores, 30);
  EXPECT_EQ(node.devices[1].used_tenants, 0);
  EXPECT_EQ(node.devices[1].used_mem_mib, 0);
}

class VgpuRun : public ::testing::Test {
 protected:
  test::Env env() const {
    return {{"LD_LIBRARY_PATH", SIMGPU_LIB_DIR},
            {"SIMGPU_STATE", root_.file("gpu.state")},
            {"SIMGPU_CONTEXT_SIZE", "0"},
            {"ASAN_OPTIONS", "verify_asan_link_order=0:detect_leaks=0"},
            {"CUDA_VISIBLE_DEVICES", test::kUnset},
            {"LD_PRELOAD", test::kUnset}};
  }
  std::vector<std::string> run(std::vector<std::string> opts, std::vector<std::string> cmd) const {
    std::vector<std::string> argv = {
        VGPU_BINARY, "run",   "--hook-path",    root_.path(),
        "--library", LIBVGPU, "--nvml-library", std::string(SIMGPU_LIB_DIR) + "/libnvidia-ml.so.1"};
    argv.insert(argv.end(), opts.begin(), opts.end());
    argv.push_back("--");
    argv.insert(argv.end(), cmd.begin(), cmd.end());
    return argv;
  }
  test::TempDir root_;
};

TEST_F(VgpuRun, CommandSeesItsLimit) {
  auto r = test::run_process(
      run({"--memory", "40g", "--cores", "30"}, {CUDA_CLIENT, "init", "ctx:0", "meminfo"}), env());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("total=42949672960"), std::string::npos) << r.out;
  // Its state directory is gone once it has ended.
  EXPECT_TRUE(fs::is_empty(root_.path() + "/containers")) << r.out;
}

TEST_F(VgpuRun, RefusesToOvercommitAndSpreads) {
  // A job holding 60 GiB of GPU 0 (80 GiB) until its stdin closes.
  auto holder = test::Child::spawn(run({"--gpu", "0", "--memory", "60g", "--name", "holder"},
                                       {CUDA_CLIENT, "init", "ctx:0", "mark", "hold"}),
                                   env());
  ASSERT_TRUE(holder.wait_for_line("op=mark")) << holder.out();

  auto refused = test::run_process(run({"--gpu", "0", "--memory", "30g"}, {"true"}), env());
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("no GPU has room"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("CardInsufficientMemory"), std::string::npos) << refused.err;

  auto forced =
      test::run_process(run({"--gpu", "0", "--memory", "30g", "--overcommit"}, {"true"}), env());
  EXPECT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_NE(forced.err.find("over-committing"), std::string::npos);

  // Left to choose, it takes the other GPU.
  auto env_only = test::run_process(run({"--memory", "30g", "--print-env"}, {}), env());
  ASSERT_EQ(env_only.exit_code, 0) << env_only.err;
  EXPECT_NE(env_only.out.find(std::string("CUDA_VISIBLE_DEVICES=") + kGpu1), std::string::npos)
      << env_only.out;
  EXPECT_NE(env_only.out.find("CUDA_DEVICE_MEMORY_LIMIT=32212254720"), std::string::npos);
  EXPECT_NE(env_only.out.find(std::string("LD_PRELOAD=") + LIBVGPU), std::string::npos);
  holder.finish();
}

TEST_F(VgpuRun, ClearErrors) {
  auto r = test::run_process(run({"--memory", "lots"}, {"true"}), env());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--memory"), std::string::npos) << r.err;
  r = test::run_process(run({"--gpu", "7"}, {"true"}), env());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("has 2 GPU(s)"), std::string::npos) << r.err;
  r = test::run_process(run({}, {"/nonexistent/program"}), env());
  EXPECT_EQ(r.exit_code, 127);
  r = test::run_process(run({"--memory", "1g"}, {"sh", "-c", "exit 7"}), env());
  EXPECT_EQ(r.exit_code, 7);
}

}  // namespace
}  // namespace hami::cli
