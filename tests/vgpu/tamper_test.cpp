// Hostile tenants against libvgpu.so (issue 23, docs/security.md): a process
// inside the container rewrites the state file it can write, points itself at
// another state file, forges the device table, or reaches the driver past our
// dlsym. Each test is an attack that worked before the library defended
// against it; the limit must hold, the share stay enforced, and the attempt be
// answered the way an honest program would be (CUDA_ERROR_OUT_OF_MEMORY).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "region/control_file.hpp"
#include "region/layout_v1.hpp"
#include "region/region.hpp"
#include "region/snapshot.hpp"
#include "support/subprocess.hpp"
#include "support/tamper.hpp"
#include "support/temp_dir.hpp"
#include "vgpu/client_output.hpp"

namespace hami::vgpu {
namespace {

using region::SharedRegion;
using test::Child;
using test::Env;
using test::find_op;
using test::num;
using test::rc_of;

constexpr uint64_t MiB = 1ull << 20;
constexpr int kOutOfMemory = 2;  // CUDA_ERROR_OUT_OF_MEMORY
const std::string kGpuA = "GPU-5a3e0000-0000-4000-8000-000000000000";

class Tamper : public ::testing::Test {
 protected:
  std::string state_file() const { return dir_.file("vgpu.cache"); }
  std::string limits_file() const { return dir_.file("limits"); }

  // The device plugin's limits file: a 1 GiB limit on the container's GPU,
  // naming the state file and the GPU.
  void write_limits(const std::string& extra = "") const {
    std::ofstream(limits_file()) << "# hami-device-plugin\nCUDA_DEVICE_MEMORY_LIMIT_0=1g\n"
                                 << "CUDA_DEVICE_MEMORY_SHARED_CACHE=" << state_file() << "\n"
                                 << "VGPU_DEVICE_UUID_0=" << kGpuA << "\n"
                                 << extra;
  }

  Env env(const Env& extra = {}) const {
    Env e = {{"LD_PRELOAD", LIBVGPU},
             {"LD_LIBRARY_PATH", SIMGPU_LIB_DIR},
             {"SIMGPU_STATE", dir_.file("gpu.state")},
             {"SIMGPU_CONTEXT_SIZE", "0"},
             {"CUDA_DEVICE_MEMORY_SHARED_CACHE", state_file()},
             {"VGPU_LIMITS_FILE", limits_file()},
             {"VGPU_CONTROL_FILE", test::kUnset},
             {"ASAN_OPTIONS", "verify_asan_link_order=0:detect_leaks=0"},
             {"CUDA_VISIBLE_DEVICES", test::kUnset},
             {"LIBCUDA_LOG_LEVEL", test::kUnset},
             {"CUDA_DEVICE_MEMORY_LIMIT", test::kUnset},
             {"CUDA_DEVICE_SM_LIMIT", test::kUnset},
             {"GPU_CORE_UTILIZATION_POLICY", test::kUnset},
             {"SIMGPU_FAIL", test::kUnset}};
    return test::with_overrides(std::move(e), extra);
  }
  std::vector<std::string> argv(std::vector<std::string> ops) const {
    ops.insert(ops.begin(), CUDA_CLIENT);
    return ops;
  }
  Child spawn(const std::vector<std::string>& ops, const Env& extra = {}) const {
    return Child::spawn(argv(ops), env(extra));
  }
  test::ProcessResult run(const std::vector<std::string>& ops, const Env& extra = {}) const {
    return test::run_process(argv(ops), env(extra));
  }
  void go() const { std::ofstream(dir_.file("go")) << "go"; }
  std::string await_go() const { return "await:" + dir_.file("go"); }

  // The slot of process `pid` in the state file, or -1.
  int slot_of(pid_t pid) const {
    auto s = region::read_snapshot(state_file());
    if (!s) return -1;
    for (const auto& slot : s->slots) {
      if (slot.pid == pid) return slot.index;
    }
    return -1;
  }
  uint64_t file_usage(pid_t pid) const {
    auto s = region::read_snapshot(state_file());
    if (!s) return ~0ull;
    for (const auto& slot : s->slots) {
      if (slot.pid == pid) return slot.used[0].total;
    }
    return ~0ull;
  }

  test::TempDir dir_;
};

// A process under a 1 GiB limit holding 768 MiB writes proc_num = 0, so that
// the container's total over [0, proc_num) reads 0. Before, that bought it 768
// MiB more at each try (issue 23: eight more buffers).
TEST_F(Tamper, ProcNumZeroDoesNotLiftTheLimit) {
  write_limits();
  Child c = spawn({"init", "ctx:0", "alloc:768m", "mark", await_go(), "alloc:768m", "alloc:768m",
                   "mark", "hold"});
  ASSERT_TRUE(c.wait_for_line("op=mark")) << c.out();
  ASSERT_TRUE(test::poke(state_file(), offsetof(SharedRegion, proc_num), int32_t{0}));
  go();
  ASSERT_TRUE(c.wait_for_line("op=mark", std::chrono::seconds(20))) << c.out();
  const auto done = c.finish();
  EXPECT_EQ(rc_of(done.out, "alloc:768m", 0), 0);
  EXPECT_EQ(rc_of(done.out, "alloc:768m", 1), kOutOfMemory) << done.out;
  EXPECT_EQ(rc_of(done.out, "alloc:768m", 2), kOutOfMemory) << done.out;
}

// The same process zeroes its own slot's usage instead.
TEST_F(Tamper, OwnUsageZeroedDoesNotLiftTheLimit) {
  write_limits();
  Child c =
      spawn({"init", "ctx:0", "alloc:768m", "mark", await_go(), "alloc:768m", "mark", "hold"});
  ASSERT_TRUE(c.wait_for_line("op=mark")) << c.out();
  const int slot = slot_of(c.pid());
  ASSERT_GE(slot, 0);
  ASSERT_TRUE(test::poke(state_file(), test::slot_usage(slot, 0), region::DeviceMemory{}));
  ASSERT_EQ(file_usage(c.pid()), 0u) << "the tenant's write landed";
  go();
  ASSERT_TRUE(c.wait_for_line("op=mark", std::chrono::seconds(20))) << c.out();
  EXPECT_EQ(rc_of(c.out(), "alloc:768m", 1), kOutOfMemory) << c.out();
  // The slot mirrors what the process holds again, for the node agent.
  EXPECT_EQ(file_usage(c.pid()), 768 * MiB);
}

// With the limits file present, the state file is the one it names: a second
// process pointed at another file (or at none, the upstream default
// /tmp/cudevshr.cache) shares the container's limit instead of getting one of
// its own.
TEST_F(Tamper, AnotherStateFileGetsNoLimitOfItsOwn) {
  write_limits();
  Child holder = spawn({"init", "ctx:0", "alloc:768m", "mark", "hold"});
  ASSERT_TRUE(holder.wait_for_line("op=mark")) << holder.out();
  for (const std::string& other : {dir_.file("mine.cache"), std::string(test::kUnset)}) {
    SCOPED_TRACE("CUDA_DEVICE_MEMORY_SHARED_CACHE=" + other);
    const auto r = run({"init", "ctx:0", "alloc:768m", "alloc:200m"},
                       {{"CUDA_DEVICE_MEMORY_SHARED_CACHE", other}});
    EXPECT_EQ(rc_of(r.out, "alloc:768m"), kOutOfMemory) << r.out << r.err;
    EXPECT_EQ(rc_of(r.out, "alloc:200m"), 0) << r.out << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_.file("mine.cache")));
}

// The tenant fills the state file's device table with GPUs it does not have:
// before, a new process found its GPU nowhere in a full table and charged
// nothing at all. The limits file's table governs.
TEST_F(Tamper, ForgedDeviceTableDoesNotMoveCharges) {
  write_limits();
  {
    region::OpenOptions opt;
    auto r = region::Region::open(state_file(), opt);
    ASSERT_TRUE(r) << r.error().message;
  }
  for (int d = 0; d < region::kMaxDevices; ++d) {
    char uuid[region::kUuidSize] = {};
    std::snprintf(uuid, sizeof uuid, "GPU-forged-%02d", d);
    ASSERT_TRUE(test::poke(
        state_file(), offsetof(SharedRegion, uuids) + region::kUuidSize * static_cast<size_t>(d),
        uuid));
  }
  ASSERT_TRUE(test::poke(state_file(), offsetof(SharedRegion, device_num), uint64_t{16}));
  const auto r = run({"init", "ctx:0", "alloc:768m", "alloc:768m"});
  EXPECT_EQ(rc_of(r.out, "alloc:768m", 0), 0) << r.out << r.err;
  EXPECT_EQ(rc_of(r.out, "alloc:768m", 1), kOutOfMemory) << r.out << r.err;
  auto snap = region::read_snapshot(state_file());
  ASSERT_TRUE(snap);
  EXPECT_EQ(snap->uuids[0], kGpuA) << "the table is the limits file's again";
}

// Two ways to the driver's own cuMemAlloc_v2 past an interposer's dlsym:
// glibc's dlsym fetched with dlvsym(RTLD_DEFAULT, "dlsym", "GLIBC_2.34"), and
// RTLD_NEXT from a library linked before libcuda.so.1. Both must answer with
// our hook, and the limit hold.
TEST_F(Tamper, DlsymRoutesPastTheInterposerReachOurHooks) {
  write_limits();
  for (const std::string via : {"--via=dlvsym", "--via=next"}) {
    SCOPED_TRACE(via);
    const auto r = run({via, "init", "ctx:0", "whois:cuMemAlloc_v2", "whois:cuMemFree_v2",
                        "alloc:768m", "alloc:768m"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(find_op(r.out, "whois:cuMemAlloc_v2").at("lib"), "libvgpu.so");
    EXPECT_EQ(find_op(r.out, "whois:cuMemFree_v2").at("lib"), "libvgpu.so");
    EXPECT_EQ(rc_of(r.out, "alloc:768m", 0), 0);
    EXPECT_EQ(rc_of(r.out, "alloc:768m", 1), kOutOfMemory);
  }
}

// The SM share's switch comes from the read-only control file the node agent
// writes, not from the state file the tenant writes: a 10 % share stays
// enforced after the tenant clears utilization_switch. The control file's own
// answer is what counts (the agent clearing it turns enforcement off), and a
// control file that cannot be read leaves the share enforced.
// The library's exit line for device 0 says how long launches waited.
double waited_ms(const std::string& err) {
  const size_t at = err.find("ms, waited ");
  return at == std::string::npos ? -1 : std::stod(err.substr(at + 11));
}

// Under the default policy the share is paced while the node agent says the
// GPU is contended; the switch is read from the control file, which the
// container cannot write, not from the state file, which it can. 20 kernels
// of 2 ms at 10 %: paced, they wait; not paced, they never do (they are
// charged either way).
TEST_F(Tamper, UtilizationSwitchComesFromTheControlFile) {
  struct Case {
    std::string name;
    std::string control;  // file contents; "" for a 3-byte broken file
    bool paced;
  };
  const std::vector<Case> cases = {
      {"agent says enforce", region::control_file_bytes({.utilization_switch = 1}), true},
      {"agent says not now", region::control_file_bytes({.utilization_switch = 0}), false},
      {"unreadable control file", "", true}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::filesystem::remove(state_file());
    std::filesystem::remove(state_file() + ".pace");
    std::filesystem::remove(dir_.file("go"));
    write_limits("CUDA_DEVICE_SM_LIMIT=10\nGPU_CORE_UTILIZATION_POLICY=default\n");
    const std::string control = dir_.file("control");
    std::ofstream(control, std::ios::binary | std::ios::trunc)
        << (c.control.empty() ? std::string("bad") : c.control);
    Child client =
        spawn({"init", "ctx:0", "mark", await_go(), "launchpath:kernel:20", "mark", "hold"},
              {{"VGPU_CONTROL_FILE", control},
               {"SIMGPU_KERNEL_NS", "2000000"},
               {"LIBCUDA_LOG_LEVEL", "3"}});
    ASSERT_TRUE(client.wait_for_line("op=mark")) << client.out();
    // The tenant: the state file says "not enforced" in every case.
    ASSERT_TRUE(test::poke(state_file(), offsetof(SharedRegion, utilization_switch), int32_t{0}));
    go();
    ASSERT_TRUE(client.wait_for_line("op=mark")) << client.out();
    const auto done = client.finish();
    const test::Line l = find_op(done.out, "launchpath:kernel:20");
    EXPECT_EQ(num(l, "ran"), 20u);
    EXPECT_GT(num(l, "records"), 0u) << "charged (and sampled) either way";
    if (c.paced) {
      EXPECT_GT(waited_ms(done.err), 0) << "launches were not paced:\n" << done.err;
    } else {
      EXPECT_EQ(waited_ms(done.err), 0) << done.err;
    }
  }
}

// The agent holds a container for a higher-priority one through the control
// file; the tenant clearing the state file's recent_kernel (upstream's
// channel, which it can write) does not release it.
TEST_F(Tamper, APriorityBlockInTheControlFileHoldsLaunchesWhateverTheStateFileSays) {
  write_limits("CUDA_DEVICE_SM_LIMIT=30\n");
  const std::string control = dir_.file("control");
  std::ofstream(control, std::ios::binary | std::ios::trunc)
      << region::control_file_bytes({.utilization_switch = 1, .blocked = 1});
  Child client = spawn({"init", "ctx:0", "mark", await_go(), "launchpath:kernel:1", "hold"},
                       {{"VGPU_CONTROL_FILE", control}, {"LIBCUDA_LOG_LEVEL", "3"}});
  ASSERT_TRUE(client.wait_for_line("op=mark")) << client.out();
  ASSERT_TRUE(test::poke(state_file(), offsetof(SharedRegion, recent_kernel), int32_t{0}));
  go();
  EXPECT_FALSE(client.wait_for_line("op=launchpath", std::chrono::milliseconds(300)))
      << "the launch went ahead while the agent held the container:\n"
      << client.out();
  ASSERT_TRUE(test::poke(state_file(), offsetof(SharedRegion, recent_kernel), int32_t{2}));
  EXPECT_FALSE(client.wait_for_line("op=launchpath", std::chrono::milliseconds(200)));
  // The agent lifts the block.
  ASSERT_TRUE(region::write_control(control, {.utilization_switch = 1, .blocked = 0}));
  ASSERT_TRUE(client.wait_for_line("op=launchpath", std::chrono::seconds(10))) << client.out();
  EXPECT_EQ(num(find_op(client.out(), "launchpath:kernel:1"), "ran"), 1u);
  const auto done = client.finish();
  EXPECT_NE(done.err.find("high-priority"), std::string::npos) << done.err;
}

// With the limits file, a process's SM share is the file's: the tenant
// rewriting the state file's sm_limit[] before it starts gets it no more.
TEST_F(Tamper, TheSmShareIsTheLimitsFilesNotTheStateFiles) {
  write_limits("CUDA_DEVICE_SM_LIMIT=10\nGPU_CORE_UTILIZATION_POLICY=force\n");
  ASSERT_EQ(run({"init", "ctx:0"}).exit_code, 0);  // the state file now exists
  ASSERT_TRUE(test::poke(state_file(), offsetof(SharedRegion, sm_limit), uint64_t{100}));
  const auto r = run({"init", "ctx:0", "launchpath:kernel:20"},
                     {{"SIMGPU_KERNEL_NS", "2000000"}, {"LIBCUDA_LOG_LEVEL", "3"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("SM share 10%: launches"), std::string::npos) << r.err;
  EXPECT_GT(waited_ms(r.err), 0) << r.err;
}

// CUDA_DEVICE_MEMORY_LIMIT_99 names no device: it must not pass silently.
TEST_F(Tamper, LimitForADeviceIndexOutOfRangeIsReported) {
  const auto r = run({"init", "ctx:0", "alloc:1m"}, {{"VGPU_LIMITS_FILE", test::kUnset},
                                                     {"CUDA_DEVICE_MEMORY_LIMIT_99", "1g"},
                                                     {"CUDA_DEVICE_SM_LIMIT_x", "10"}});
  EXPECT_EQ(rc_of(r.out, "alloc:1m"), 0);
  EXPECT_NE(r.err.find("CUDA_DEVICE_MEMORY_LIMIT_99=1g: device index 99 is out of range (0-15); "
                       "this memory limit applies to no device"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("CUDA_DEVICE_SM_LIMIT_x=10: 'x' is not a device index"), std::string::npos)
      << r.err;
}

// A disk too full for the state file (here: a 1 KiB file-size limit) leaves
// no empty file behind for the next process to trip over; the process says
// so and still holds itself to its limit.
TEST_F(Tamper, FullDiskLeavesNoEmptyStateFile) {
  write_limits();
  // The simulated GPU's own state file is made beforehand, outside the limit.
  ASSERT_EQ(run({"init"}, {{"VGPU_LIMITS_FILE", test::kUnset},
                           {"CUDA_DEVICE_MEMORY_SHARED_CACHE", test::kUnset}})
                .exit_code,
            0);
  std::string cmd = "ulimit -f 1; trap '' XFSZ; exec";
  for (const std::string& a : argv({"init", "ctx:0", "alloc:768m", "alloc:768m"}))
    cmd += " '" + a + "'";
  const auto r = test::run_process({"/bin/sh", "-c", cmd}, env({{"LIBCUDA_LOG_LEVEL", "1"}}));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(rc_of(r.out, "alloc:768m", 0), 0) << r.out << r.err;
  EXPECT_EQ(rc_of(r.out, "alloc:768m", 1), kOutOfMemory) << r.out << r.err;
  EXPECT_NE(r.err.find("cannot allocate"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(state_file())) << "an empty state file was left behind";
}

}  // namespace
}  // namespace hami::vgpu
