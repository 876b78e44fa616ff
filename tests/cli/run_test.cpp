// `vgpu run` on the simulated GPUs: the machine's state as the fitting code
// sees it, the GPU it picks, the limits the command runs under, and refusing
// to over-commit.
#include "cli/run.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cli/state_dir.hpp"
#include "cli/vgpu_run_fixture.hpp"
#include "region/region.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"
#include "vgpu/client_output.hpp"

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

class VgpuRun : public test::VgpuRunFixture {};

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
  EXPECT_NE(env_only.out.find("CUDA_DEVICE_MEMORY_LIMIT_0=30720m"), std::string::npos);
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

// Issue 23.8: `--name ../../../../victimdir` chmodded a directory outside the
// state root to 0777 and deleted it afterwards.
TEST_F(VgpuRun, NameThatLeavesTheStateRootIsRefused) {
  test::TempDir outside;
  const std::string victim = outside.file("victimdir");
  fs::create_directories(victim);
  fs::permissions(victim, fs::perms(0700));
  std::ofstream(victim + "/precious") << "data";
  const std::string up = "../../../../../../../../../../.." + victim;
  for (const std::string& name : {up, std::string(".."), std::string("a/b"), std::string("")}) {
    SCOPED_TRACE(name);
    auto r = test::run_process(run({"--memory", "1g", "--name", name}, {"true"}), env());
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("--name"), std::string::npos) << r.err;
  }
  EXPECT_TRUE(fs::exists(victim + "/precious"));
  EXPECT_EQ(fs::status(victim).permissions() & fs::perms::all, fs::perms(0700));
}

// The state root's containers/ is a link someone planted: refused, nothing
// made or removed where it points.
TEST_F(VgpuRun, LinkInTheStateRootIsNotFollowed) {
  test::TempDir elsewhere;
  fs::remove_all(root_.path() + "/containers");
  fs::create_directory_symlink(elsewhere.path(), root_.path() + "/containers");
  auto r = test::run_process(run({"--memory", "1g"}, {"true"}), env());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("symbolic link"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_empty(elsewhere.path()));
}

// Whatever the command leaves in its state directory goes with it, links as
// links: the directory a link points to keeps its files.
TEST_F(VgpuRun, CleanupRemovesLinksNotWhatTheyPointTo) {
  test::TempDir outside;
  std::ofstream(outside.file("keep")) << "data";
  auto r = test::run_process(
      run({"--memory", "1g"},
          {"sh", "-c",
           "d=$(dirname \"$CUDA_DEVICE_MEMORY_SHARED_CACHE\"); ln -s " + outside.path() +
               " \"$d/link\"; mkdir -p \"$d/sub/deeper\"; ln -s " + outside.path() +
               " \"$d/sub/deeper/link\""}),
      env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(outside.file("keep")));
  EXPECT_TRUE(fs::is_empty(root_.path() + "/containers"));
}

// A per-user default root must be the user's own directory: /tmp/vgpu-<uid>
// can be made first by anyone.
TEST(StateRoot, PerUserRootMustBeMineAndNotALink) {
  test::TempDir tmp;
  auto fresh = open_state_root(tmp.file("vgpu-fresh"), RootOwner::kMe);
  ASSERT_TRUE(fresh) << fresh.error().message;
  EXPECT_TRUE(fs::is_directory(tmp.file("vgpu-fresh/containers")));

  fs::create_directories(tmp.file("target"));
  fs::create_directory_symlink(tmp.file("target"), tmp.file("vgpu-link"));
  auto link = open_state_root(tmp.file("vgpu-link"), RootOwner::kMe);
  ASSERT_FALSE(link);
  EXPECT_NE(link.error().message.find("symbolic link"), std::string::npos);
  EXPECT_TRUE(fs::is_empty(tmp.file("target")));

  fs::create_directories(tmp.file("vgpu-open"));
  fs::permissions(tmp.file("vgpu-open"), fs::perms(0777));
  auto open = open_state_root(tmp.file("vgpu-open"), RootOwner::kMe);
  ASSERT_FALSE(open);
  EXPECT_NE(open.error().message.find("writable by others"), std::string::npos);

  if (::geteuid() == 0) {  // only root can give a directory to someone else
    fs::create_directories(tmp.file("vgpu-theirs"));
    ASSERT_EQ(::chown(tmp.file("vgpu-theirs").c_str(), 12345, 12345), 0);
    auto theirs = open_state_root(tmp.file("vgpu-theirs"), RootOwner::kMe);
    ASSERT_FALSE(theirs);
    EXPECT_NE(theirs.error().message.find("belongs to uid 12345"), std::string::npos);
  }
}

}  // namespace
}  // namespace hami::cli

namespace hami::cli {
namespace {

class VgpuResize : public test::VgpuRunFixture {
 protected:
  std::vector<std::string> resize(std::vector<std::string> opts) const {
    std::vector<std::string> argv = {
        VGPU_BINARY,  "resize",         "--hook-path",
        root_.path(), "--nvml-library", std::string(SIMGPU_LIB_DIR) + "/libnvidia-ml.so.1"};
    argv.insert(argv.end(), opts.begin(), opts.end());
    return argv;
  }
};

// A running job is given more memory: its process allocates past the old
// limit without restarting; a size that does not fit the GPU is refused and
// changes nothing.
TEST_F(VgpuResize, ARunningJobAllocatesPastItsOldLimit) {
  const std::string go = root_.file("go");
  test::Child job =
      test::Child::spawn(run({"--gpu", "0", "--memory", "1g", "--cores", "30", "--name", "train"},
                             {CUDA_CLIENT, "init", "ctx:0", "alloc:700m", "alloc:700m", "mark",
                              "await:" + go, "waittotal:2g:1000", "alloc:700m"}),
                         env());
  ASSERT_TRUE(job.wait_for_line("op=mark")) << job.out();
  test::Child other = test::Child::spawn(run({"--gpu", "0", "--memory", "70g", "--name", "serve"},
                                             {CUDA_CLIENT, "init", "ctx:0", "mark", "hold"}),
                                         env());
  ASSERT_TRUE(other.wait_for_line("op=mark")) << other.out();

  // The other job reserves 70 GiB of GPU 0's 80: 20 GiB more cannot fit.
  auto refused = test::run_process(resize({"train", "--memory", "20g"}), env());
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("does not fit"), std::string::npos) << refused.err;
  auto unknown = test::run_process(resize({"nosuchjob", "--memory", "2g"}), env());
  EXPECT_NE(unknown.err.find("no job named nosuchjob"), std::string::npos) << unknown.err;

  auto ok = test::run_process(resize({"train", "--memory", "2g", "--cores", "50"}), env());
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("memory 1 GiB -> 2 GiB, SM share 30% -> 50%"), std::string::npos) << ok.out;
  std::ofstream(go) << "go";
  const auto r = job.finish();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(test::rc_of(r.out, "alloc:700m", 1), 2) << "refused under the old 1 GiB";
  EXPECT_EQ(test::rc_of(r.out, "waittotal:2g:1000"), 0) << r.out;
  EXPECT_EQ(test::rc_of(r.out, "alloc:700m", 2), 0) << "past the old 1 GiB" << r.out;
  EXPECT_EQ(other.finish().exit_code, 0);
}

}  // namespace
}  // namespace hami::cli
