// Virtual device memory (CUDA_OVERSUBSCRIBE, vgpu/spill.hpp): libvgpu.so
// preloaded into real processes against a simulated GPU with less physical
// memory (1 GiB) than the container's limit (2 GiB).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "region/snapshot.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"
#include "vgpu/client_output.hpp"

namespace hami::vgpu {
namespace {

using test::Child;
using test::Env;
using test::find_op;
using test::num;

constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t GiB = 1ull << 30;
const std::string kGpu = "GPU-5a3e0000-0000-4000-8000-0000000000aa";

class Spill : public ::testing::Test {
 protected:
  std::string state_file() const { return dir_.file("vgpu.cache"); }

  // A 1 GiB GPU, a 2 GiB limit, oversubscription on unless `extra` says otherwise.
  Env env(const Env& extra) const {
    Env e = {{"LD_PRELOAD", LIBVGPU},
             {"LD_LIBRARY_PATH", SIMGPU_LIB_DIR},
             {"SIMGPU_STATE", dir_.file("gpu.state")},
             {"SIMGPU_DEVICES", kGpu + ":1g"},
             {"SIMGPU_CONTEXT_SIZE", "0"},
             {"CUDA_DEVICE_MEMORY_SHARED_CACHE", state_file()},
             {"CUDA_DEVICE_MEMORY_LIMIT", "2g"},
             {"CUDA_OVERSUBSCRIBE", "true"},
             {"ASAN_OPTIONS", "verify_asan_link_order=0:detect_leaks=0"},
             {"CUDA_VISIBLE_DEVICES", test::kUnset},
             {"LIBCUDA_LOG_LEVEL", test::kUnset},
             {"VGPU_LIMITS_FILE", test::kUnset},
             {"CUDA_DEVICE_SM_LIMIT", test::kUnset},
             {"SIMGPU_FAIL", test::kUnset}};
    return test::with_overrides(std::move(e), extra);
  }
  Child spawn(std::vector<std::string> ops, const Env& extra = {}) const {
    ops.insert(ops.begin(), CUDA_CLIENT);
    return Child::spawn(ops, env(extra));
  }
  region::DeviceMemoryUsage usage_of(pid_t pid) const {
    auto s = region::read_snapshot(state_file());
    EXPECT_TRUE(s) << s.error().message;
    if (!s) return {};
    for (const auto& slot : s->slots) {
      if (slot.pid == pid) return slot.used[0];
    }
    return {};
  }
  void touch(const std::string& name) const { std::ofstream(dir_.file(name)) << "go"; }
  // Runs to the next "op=mark"; its output so far.
  static std::string to_mark(Child& c) {
    EXPECT_TRUE(c.wait_for_line("op=mark")) << c.out();
    return c.out();
  }

  test::TempDir dir_;
};

int rc(const std::string& out, const std::string& op, int nth = 0) {
  return test::rc_of(out, op, nth);
}

TEST_F(Spill, PastPhysicalMemoryWithinTheLimitGoesToTheHostAndIsReported) {
  Child c = spawn({"init", "ctx:0", "alloc:768m", "alloc:768m", "procmem:0", "meminfo", "nvml:0",
                   "simcalls:cuMemAdvise:preferred-host", "simcalls:cuMemAdvise:accessed-by",
                   "simcalls:cuMemAdvise_v2", "mark", "await:" + dir_.file("a"), "free:1",
                   "procmem:0", "mark", "await:" + dir_.file("b"), "free:0", "mark", "hold"});
  std::string out = to_mark(c);
  EXPECT_EQ(rc(out, "alloc:768m", 0), 0) << out;
  EXPECT_EQ(rc(out, "alloc:768m", 1), 0) << "within the limit, past the GPU: spilled\n" << out;
  auto u = usage_of(c.pid());
  EXPECT_EQ(u.total, 1536 * MiB);  // the limit counts both
  EXPECT_EQ(u.data, 1536 * MiB);
  EXPECT_EQ(u.spilled, 768 * MiB);
  EXPECT_EQ(num(find_op(out, "procmem:0"), "used"), 768 * MiB) << "only one is on the device";
  // The virtual GPU is the limit's size, whatever the GPU holds.
  EXPECT_EQ(num(find_op(out, "meminfo"), "total"), 2 * GiB);
  EXPECT_EQ(num(find_op(out, "meminfo"), "free"), 512 * MiB);
  EXPECT_EQ(num(find_op(out, "nvml:0"), "total"), 2 * GiB);
  EXPECT_EQ(num(find_op(out, "nvml:0"), "used"), 1536 * MiB);
  // Managed memory preferring the host, mapped for the device.
  EXPECT_EQ(num(find_op(out, "simcalls:cuMemAdvise:preferred-host"), "n"), 1u);
  EXPECT_EQ(num(find_op(out, "simcalls:cuMemAdvise:accessed-by"), "n"), 1u);
  EXPECT_EQ(num(find_op(out, "simcalls:cuMemAdvise_v2"), "n"), 2u) << "a CUDA 12.2+ driver's form";

  touch("a");
  out = to_mark(c);
  EXPECT_EQ(rc(out, "free:1"), 0);
  u = usage_of(c.pid());
  EXPECT_EQ(u.total, 768 * MiB);
  EXPECT_EQ(u.spilled, 0u);
  touch("b");
  out = to_mark(c);
  EXPECT_EQ(rc(out, "free:0"), 0);
  u = usage_of(c.pid());
  EXPECT_EQ(u.total, 0u);
  EXPECT_EQ(u.spilled, 0u);
  c.close_stdin();
  const auto done = c.finish();
  EXPECT_EQ(done.exit_code, 0) << done.err;
  EXPECT_EQ(done.err, "") << "the library printed at the default log level";
}

TEST_F(Spill, KeepsAReserveOfTheDeviceFreeForTheDriver) {
  // A 1 GiB GPU keeps a sixteenth (64 MiB) free: 900 MiB leaves 124 on the
  // device, the next 100 MiB would leave 24, so it goes to the host although
  // the driver would still have found room for it.
  Child c = spawn(
      {"init", "ctx:0", "alloc:900m", "procmem:0", "alloc:100m", "procmem:0", "mark", "hold"});
  const std::string out = to_mark(c);
  EXPECT_EQ(rc(out, "alloc:900m"), 0) << out;
  EXPECT_EQ(rc(out, "alloc:100m"), 0) << out;
  EXPECT_EQ(num(find_op(out, "procmem:0", 1), "used"), 900 * MiB)
      << "the second is not on the device";
  const auto u = usage_of(c.pid());
  EXPECT_EQ(u.total, 1000 * MiB);
  EXPECT_EQ(u.spilled, 100 * MiB);
}

TEST_F(Spill, TheLimitStillHoldsAtTheVirtualSize) {
  Child c = spawn({"init", "ctx:0", "alloc:768m", "alloc:768m", "alloc:768m", "alloc:512m",
                   "alloc:2m", "mark", "hold"});
  const std::string out = to_mark(c);
  EXPECT_EQ(rc(out, "alloc:768m", 2), 2) << "past the 2 GiB limit\n" << out;
  EXPECT_EQ(rc(out, "alloc:512m"), 0) << out;  // exactly to the limit
  EXPECT_EQ(rc(out, "alloc:2m"), 2) << out;
  const auto u = usage_of(c.pid());
  EXPECT_EQ(u.total, 2 * GiB);  // 0 bytes over
  EXPECT_EQ(u.spilled, 1280 * MiB);
}

TEST_F(Spill, WithoutTheVariableTheDriversOutOfMemoryIsReturnedUnchanged) {
  for (const char* value : {test::kUnset, "false"}) {
    SCOPED_TRACE(value == test::kUnset ? "unset" : value);
    std::filesystem::remove(state_file());
    Child c = spawn({"init", "ctx:0", "alloc:768m", "alloc:768m", "expand:0:128m:4",
                     "simcalls:cuMemAllocManaged", "simcalls:cuMemAdvise", "mark", "hold"},
                    {{"CUDA_OVERSUBSCRIBE", value}});
    const std::string out = to_mark(c);
    EXPECT_EQ(rc(out, "alloc:768m", 1), 2) << out;
    EXPECT_EQ(rc(out, "expand:0:128m:4"), 2) << out;
    EXPECT_EQ(num(find_op(out, "expand:0:128m:4"), "mapped"), 2u) << out;
    EXPECT_EQ(num(find_op(out, "simcalls:cuMemAllocManaged"), "n"), 0u);
    EXPECT_EQ(num(find_op(out, "simcalls:cuMemAdvise"), "n"), 0u);
    const auto u = usage_of(c.pid());
    EXPECT_EQ(u.total, 1024 * MiB);
    EXPECT_EQ(u.spilled, 0u);
    c.close_stdin();
    EXPECT_EQ(c.finish().exit_code, 0);
  }
}

struct PathCase {
  std::string op;
  uint64_t charge;
  uint64_t spilled;
};

TEST_F(Spill, EveryDeviceAllocationPathSpillsAndFreesBack) {
  const std::vector<PathCase> cases = {
      {"alloc:64m", 64 * MiB, 64 * MiB},
      {"pitch:1000x3000", 4 * MiB, 4 * MiB},  // 512-byte rows (the pitch is ours), 2 MiB pages
      {"async:6m", 6 * MiB, 6 * MiB},         // managed, not a pool granule
      {"pool:0:4m", 4 * MiB, 4 * MiB},
      {"vmm:0:8m", 8 * MiB, 8 * MiB},  // a host-located cuMemCreate
      {"managed:10m", 10 * MiB, 0},    // asked for explicitly: charged, not spilled
      {"vmm-host:8m", 0, 0},           // host memory asked for: not device memory
  };
  for (const PathCase& p : cases) {
    SCOPED_TRACE(p.op);
    std::filesystem::remove(state_file());
    std::filesystem::remove(dir_.file("go"));
    // 960 MiB leaves the 1 GiB GPU exactly its reserve (64 MiB): full.
    Child c = spawn({"init", "ctx:0", "alloc:960m", p.op, "simcalls:cuMemCreate:host", "mark",
                     "await:" + dir_.file("go"), "free:1", "mark", "hold"});
    std::string out = to_mark(c);
    EXPECT_EQ(rc(out, "alloc:960m"), 0) << out;
    EXPECT_EQ(rc(out, p.op), 0) << "the GPU is full\n" << out;
    auto u = usage_of(c.pid());
    EXPECT_EQ(u.total, 960 * MiB + p.charge);
    EXPECT_EQ(u.spilled, p.spilled);
    const bool host_vmm = p.op.rfind("vmm", 0) == 0;
    EXPECT_EQ(num(find_op(out, "simcalls:cuMemCreate:host"), "n"), host_vmm ? 1u : 0u);
    touch("go");
    out = to_mark(c);
    EXPECT_EQ(rc(out, "free:1"), 0) << out;
    u = usage_of(c.pid());
    EXPECT_EQ(u.total, 960 * MiB);
    EXPECT_EQ(u.spilled, 0u);
    c.close_stdin();
    const auto done = c.finish();
    EXPECT_EQ(done.exit_code, 0) << done.err;
  }
}

// PyTorch with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True grows one
// address range chunk by chunk; past the GPU (less its 64 MiB reserve), the
// chunks come from the host.
TEST_F(Spill, ExpandableSegmentsGrowPastTheGpu) {
  Child c = spawn({"init",
                   "ctx:0",
                   "expand:0:256m:6",
                   "simcalls:cuMemCreate:host",
                   "simcalls:cuMemSetAccess",
                   "procmem:0",
                   "mark",
                   "await:" + dir_.file("go"),
                   "unmap:5",
                   "free:5",
                   "unmap:4",
                   "free:4",
                   "unmap:3",
                   "free:3",
                   "unmap:2",
                   "free:2",
                   "unmap:1",
                   "free:1",
                   "unmap:0",
                   "free:0",
                   "mark",
                   "hold"});
  std::string out = to_mark(c);
  EXPECT_EQ(rc(out, "expand:0:256m:6"), 0) << out;
  EXPECT_EQ(num(find_op(out, "expand:0:256m:6"), "mapped"), 6u);
  EXPECT_EQ(num(find_op(out, "simcalls:cuMemCreate:host"), "n"), 3u);
  EXPECT_EQ(num(find_op(out, "simcalls:cuMemSetAccess"), "n"), 6u);
  EXPECT_EQ(num(find_op(out, "procmem:0"), "used"), 768 * MiB);
  auto u = usage_of(c.pid());
  EXPECT_EQ(u.total, 1536 * MiB);
  EXPECT_EQ(u.spilled, 768 * MiB);
  touch("go");
  out = to_mark(c);
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(rc(out, "free:" + std::to_string(i)), 0) << out;
  u = usage_of(c.pid());
  EXPECT_EQ(u.total, 0u);
  EXPECT_EQ(u.spilled, 0u);
  c.close_stdin();
  EXPECT_EQ(c.finish().exit_code, 0);
}

TEST_F(Spill, AnUnreadableValueKeepsItOffAndSaysWhy) {
  Child c = spawn({"init", "ctx:0", "alloc:768m", "alloc:768m", "mark", "hold"},
                  {{"CUDA_OVERSUBSCRIBE", "yes"}});
  const std::string out = to_mark(c);
  EXPECT_EQ(rc(out, "alloc:768m", 1), 2) << out;
  c.close_stdin();
  const auto done = c.finish();
  EXPECT_NE(done.err.find("CUDA_OVERSUBSCRIBE=yes is not true or false"), std::string::npos)
      << done.err;
}

TEST_F(Spill, AContextResetGivesSpilledMemoryBack) {
  Child c = spawn({"init", "ctx:0", "alloc:768m", "alloc:768m", "mark", "await:" + dir_.file("go"),
                   "reset:0", "mark", "hold"});
  std::string out = to_mark(c);
  EXPECT_EQ(usage_of(c.pid()).spilled, 768 * MiB) << out;
  touch("go");
  out = to_mark(c);
  EXPECT_EQ(rc(out, "reset:0"), 0) << out;
  const auto u = usage_of(c.pid());
  EXPECT_EQ(u.total, 0u);
  EXPECT_EQ(u.spilled, 0u);
  c.close_stdin();
  EXPECT_EQ(c.finish().exit_code, 0);
}

TEST_F(Spill, TheFirstSpillIsLoggedOnceAtWarningLevel) {
  Child c = spawn({"init", "ctx:0", "alloc:900m", "alloc:128m", "alloc:128m", "mark", "hold"},
                  {{"LIBCUDA_LOG_LEVEL", "2"}});
  const std::string out = to_mark(c);
  EXPECT_EQ(rc(out, "alloc:128m", 1), 0) << out;
  c.close_stdin();
  const auto done = c.finish();
  const std::string needle = "placing it and later ones in host memory (CUDA_OVERSUBSCRIBE)";
  const size_t first = done.err.find(needle);
  ASSERT_NE(first, std::string::npos) << done.err;
  EXPECT_EQ(done.err.find(needle, first + 1), std::string::npos) << "once per process\n"
                                                                 << done.err;
}

}  // namespace
}  // namespace hami::vgpu
