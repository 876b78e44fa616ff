// `vgpu run --sharing mps` and `vgpu mps` on the simulated GPUs and the
// simulated nvidia-cuda-mps-control: the command is an MPS client of its GPU's
// daemon (started once, then reused), keeps libvgpu.so's memory limit without
// its SM pacing, and the errors say what to do.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/vgpu_run_fixture.hpp"
#include "mps/control_daemon.hpp"
#include "mps/paths.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"

namespace hami::cli {
namespace {

namespace fs = std::filesystem;
constexpr const char* kGpu0 = "GPU-5a3e0000-0000-4000-8000-000000000000";
constexpr const char* kGpu1 = "GPU-5a3e0000-0000-4000-8000-000000000001";

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool has_line(const std::string& text, const std::string& line) {
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (l == line) return true;
  return false;
}

class VgpuRunMps : public test::VgpuRunFixture {
 protected:
  test::Env env(bool with_mps = true) const {
    return test::with_overrides(
        VgpuRunFixture::env(),
        {{"SIMMPS_RECORD", root_.file("launches")},
         {"PATH", (with_mps ? std::string(SIMMPS_BIN_DIR) + ":" : "") + "/usr/bin:/bin"},
         {"CUDA_MPS_PIPE_DIRECTORY", test::kUnset}});
  }
  std::vector<std::string> mps(const std::string& verb, std::vector<std::string> opts = {}) const {
    std::vector<std::string> argv = {VGPU_BINARY,
                                     "mps",
                                     verb,
                                     "--hook-path",
                                     root_.path(),
                                     "--nvml-library",
                                     std::string(SIMGPU_LIB_DIR) + "/libnvidia-ml.so.1"};
    argv.insert(argv.end(), opts.begin(), opts.end());
    return argv;
  }
  std::string pipe_dir() const { return mps::mps_pipe_dir(root_.path(), kGpu0).string(); }
  void TearDown() override {
    for (const char* uuid : {kGpu0, kGpu1}) {
      mps::DaemonOptions o;
      o.control_binary = std::string(SIMMPS_BIN_DIR) + "/nvidia-cuda-mps-control";
      o.pipe_dir = mps::mps_pipe_dir(root_.path(), uuid);
      o.log_dir = mps::mps_log_dir(root_.path(), uuid);
      o.gpu_uuid = uuid;
      o.stop_timeout = std::chrono::seconds(1);
      (void)mps::ControlDaemon(o).stop();
    }
  }
};

TEST_F(VgpuRunMps, CommandIsAClientOfItsGpusDaemonWithItsShares) {
  auto r = test::run_process(
      run({"--sharing", "mps", "--gpu", "0", "--memory", "4g", "--cores", "30"}, {"env"}), env());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_TRUE(has_line(r.out, "CUDA_MPS_PIPE_DIRECTORY=" + pipe_dir())) << r.out;
  EXPECT_TRUE(has_line(r.out, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=30")) << r.out;
  EXPECT_TRUE(has_line(r.out, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=4096M")) << r.out;
  EXPECT_TRUE(has_line(r.out, std::string("CUDA_VISIBLE_DEVICES=") + kGpu0)) << r.out;
  // libvgpu.so keeps the memory limit; MPS, not the library, gives the SM share.
  EXPECT_TRUE(has_line(r.out, "CUDA_DEVICE_MEMORY_LIMIT_0=4096m")) << r.out;
  EXPECT_TRUE(has_line(r.out, "GPU_CORE_UTILIZATION_POLICY=disable")) << r.out;
  EXPECT_EQ(r.out.find("CUDA_DEVICE_SM_LIMIT"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(std::string("LD_PRELOAD=") + LIBVGPU), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("started the MPS control daemon of " + std::string(kGpu0)),
            std::string::npos)
      << r.err;
  EXPECT_EQ(read_file(root_.file("launches")), std::string("start ") + kGpu0 + "\n");
}

TEST_F(VgpuRunMps, AHighPriorityJobIsNotCappedButKeepsItsShareInTheStateFile) {
  auto r = test::run_process(run({"--sharing", "mps", "--gpu", "0", "--memory", "4g", "--cores",
                                  "30", "--priority", "high"},
                                 {"env"}),
                             env());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_EQ(r.out.find("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), std::string::npos) << r.out;
  EXPECT_TRUE(has_line(r.out, "CUDA_TASK_PRIORITY=0")) << r.out;
  EXPECT_TRUE(has_line(r.out, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=4096M")) << r.out;
}

// A standalone job has no device-plugin record: its directory says it is an
// MPS client and with which cap, for the node agent and `vgpu top`.
TEST_F(VgpuRunMps, JobDirectorySaysItsThreadPercentage) {
  const std::string cat = "cat \"$(dirname \"$CUDA_DEVICE_MEMORY_SHARED_CACHE\")/mps\"";
  auto capped = test::run_process(
      run({"--sharing", "mps", "--gpu", "0", "--cores", "30"}, {"sh", "-c", cat}), env());
  ASSERT_EQ(capped.exit_code, 0) << capped.err << capped.out;
  EXPECT_EQ(capped.out, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=30\n");
  auto high = test::run_process(
      run({"--sharing", "mps", "--gpu", "0", "--cores", "30", "--priority", "high"},
          {"sh", "-c", cat}),
      env());
  ASSERT_EQ(high.exit_code, 0) << high.err << high.out;
  EXPECT_EQ(high.out, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=100\n");
  // A time-sliced job leaves no such file.
  auto ts = test::run_process(run({"--gpu", "0", "--cores", "30"}, {"sh", "-c", cat}), env());
  EXPECT_NE(ts.exit_code, 0) << ts.out;
}

TEST_F(VgpuRunMps, DaemonIsLeftRunningAndReused) {
  auto first =
      test::run_process(run({"--sharing", "mps", "--gpu", "0", "--memory", "1g"}, {"true"}), env());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  // The command reaches the daemon through the pipe directory it was given.
  auto second = test::run_process(
      run({"--sharing", "mps", "--gpu", "0", "--memory", "1g"},
          {"sh", "-c", "echo get_default_active_thread_percentage | nvidia-cuda-mps-control"}),
      env());
  ASSERT_EQ(second.exit_code, 0) << second.err << second.out;
  EXPECT_EQ(second.out, "100.0\n");
  EXPECT_NE(second.err.find("reusing the MPS control daemon"), std::string::npos) << second.err;
  EXPECT_EQ(read_file(root_.file("launches")), std::string("start ") + kGpu0 + "\n");
}

TEST_F(VgpuRunMps, MemoryLimitStillAppliesUnderMps) {
  auto r = test::run_process(run({"--sharing", "mps", "--memory", "40g", "--cores", "30"},
                                 {CUDA_CLIENT, "init", "ctx:0", "meminfo"}),
                             env());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("total=42949672960"), std::string::npos) << r.out;
}

TEST_F(VgpuRunMps, StatusAndStop) {
  ASSERT_EQ(test::run_process(run({"--sharing", "mps", "--gpu", "0"}, {"true"}), env()).exit_code,
            0);
  auto status = test::run_process(mps("status"), env());
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find(std::string(kGpu0) + ": running"), std::string::npos) << status.out;
  const std::string pid_text = read_file(pipe_dir() + "/nvidia-cuda-mps-control.pid");
  ASSERT_FALSE(pid_text.empty());

  auto stop = test::run_process(mps("stop", {"--gpu", "0"}), env());
  EXPECT_EQ(stop.exit_code, 0) << stop.err;
  EXPECT_NE(stop.out.find("stopped the MPS control daemon"), std::string::npos) << stop.out;
  status = test::run_process(mps("status", {"--gpu", kGpu0}), env());
  EXPECT_EQ(status.exit_code, 1);
  EXPECT_NE(status.out.find("not running"), std::string::npos) << status.out;
  const std::string stat = read_file("/proc/" + pid_text + "/stat");
  EXPECT_TRUE(stat.empty() || stat.find(") Z") != std::string::npos) << stat;  // gone or a zombie
  // Nothing to stop is not an error.
  stop = test::run_process(mps("stop"), env());
  EXPECT_EQ(stop.exit_code, 0) << stop.err;
}

TEST_F(VgpuRunMps, MissingControlBinaryIsAClearErrorAndLeavesNothing) {
  auto r = test::run_process(run({"--sharing", "mps", "--memory", "1g"}, {"true"}), env(false));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("nvidia-cuda-mps-control not found in PATH"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--mps-control"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_empty(root_.path() + "/containers"));

  // --mps-control names it instead.
  r = test::run_process(run({"--sharing", "mps", "--mps-control",
                             std::string(SIMMPS_BIN_DIR) + "/nvidia-cuda-mps-control"},
                            {"true"}),
                        env(false));
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(VgpuRunMps, GpuInAComputeModeWithoutMpsIsRefusedBeforeAnyDaemon) {
  auto e = env();
  e.push_back({"SIMGPU_COMPUTE_MODE", "2,0"});
  auto r = test::run_process(run({"--sharing", "mps", "--gpu", "0"}, {"true"}), e);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is in compute mode PROHIBITED, where MPS cannot run"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(root_.file("launches")));
  // The other GPU, in DEFAULT mode, is fine.
  r = test::run_process(run({"--sharing", "mps", "--gpu", "1"}, {"true"}), e);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(VgpuRunMps, UnknownSharingModeIsAUsageError) {
  auto r = test::run_process(run({"--sharing", "mig"}, {"true"}), env());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--sharing"), std::string::npos) << r.err;
}

TEST_F(VgpuRunMps, TimesliceKeepsTheLibrarysSmShare) {
  auto r = test::run_process(run({"--memory", "1g", "--cores", "30"}, {"env"}), env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(has_line(r.out, "CUDA_DEVICE_SM_LIMIT=30")) << r.out;
  EXPECT_EQ(r.out.find("CUDA_MPS_PIPE_DIRECTORY"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(root_.path() + "/mps"));
}

}  // namespace
}  // namespace hami::cli
