// A resize as libvgpu.so sees it: the read-only limits file replaced by
// rename under running processes (as the device plugin and `vgpu resize` do).
// Every process of the container follows it without a restart; the waits are
// bounded polls (cuda-client's waittotal), never sleeps.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "region/snapshot.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"
#include "vgpu/client_env.hpp"
#include "vgpu/client_output.hpp"

namespace hami::vgpu {
namespace {

using test::Child;
using test::Env;
using test::find_op;
using test::num;

constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t GiB = 1ull << 30;
// The library looks for a new file at most every 100 ms on these paths; the
// contract is 1 s. The polls allow 5 s so a loaded 2-core CI machine that
// deschedules the child does not fail them; a library that never rereads the
// file still fails.
constexpr const char* kWithinMs = "5000";

class Resize : public ::testing::Test {
 protected:
  std::string limits() const { return dir_.file("limits"); }
  // Replaced whole, by rename, as a resize does.
  void write_limits(const std::string& memory, int sm) const {
    const std::string tmp = limits() + ".tmp";
    std::ofstream(tmp) << "# test\nCUDA_DEVICE_MEMORY_LIMIT_0=" << memory
                       << "\nCUDA_DEVICE_SM_LIMIT=" << sm << "\n";
    std::filesystem::rename(tmp, limits());
  }
  Child spawn(std::vector<std::string> ops, const Env& extra = {}) const {
    ops.insert(ops.begin(), CUDA_CLIENT);
    Env e = {{"VGPU_LIMITS_FILE", limits()}, {"LIBCUDA_LOG_LEVEL", "3"}};
    for (const auto& kv : extra)
      e.push_back(kv);
    return Child::spawn(ops, test::client_env(dir_, e));
  }
  void go(const std::string& name = "go") const { std::ofstream(dir_.file(name)) << "go"; }
  std::string await(const std::string& name = "go") const { return "await:" + dir_.file(name); }
  region::RegionSnapshot snapshot() const {
    auto s = region::read_snapshot(dir_.file("vgpu.cache"));
    EXPECT_TRUE(s) << s.error().message;
    return s ? *s : region::RegionSnapshot{};
  }

  test::TempDir dir_;
};

TEST_F(Resize, MemoryRaisedAppliesToEveryRunningProcess) {
  write_limits("1g", 0);
  Child a = spawn({"init", "ctx:0", "alloc:700m", "alloc:400m", "mark", await(),
                   "waittotal:2g:" + std::string(kWithinMs), "alloc:400m", "alloc:700m", "nvml:0"});
  Child b = spawn({"init", "ctx:0", "mark", await(), "waittotal:2g:" + std::string(kWithinMs),
                   "meminfo", "totalmem:0"});
  ASSERT_TRUE(a.wait_for_line("op=mark")) << a.out();
  ASSERT_TRUE(b.wait_for_line("op=mark")) << b.out();
  write_limits("2g", 0);
  go();
  const auto ra = a.finish();
  const auto rb = b.finish();
  ASSERT_EQ(ra.exit_code, 0) << ra.err;
  EXPECT_EQ(test::rc_of(ra.out, "alloc:400m", 0), 2) << "past the old 1 GiB: refused";
  for (const auto* r : {&ra, &rb}) {
    const auto waited = find_op(r->out, "waittotal:2g:" + std::string(kWithinMs));
    EXPECT_EQ(test::rc_of(r->out, "waittotal:2g:" + std::string(kWithinMs)), 0) << r->out;
    EXPECT_LE(std::stod(waited.at("ms")), 5000.0);
  }
  // Past the old limit now: 700 + 400 + 700 MiB under the new 2 GiB.
  EXPECT_EQ(test::rc_of(ra.out, "alloc:400m", 1), 0) << ra.out;
  EXPECT_EQ(test::rc_of(ra.out, "alloc:700m", 1), 0) << ra.out;
  EXPECT_EQ(num(find_op(ra.out, "nvml:0"), "total"), 2 * GiB);
  EXPECT_EQ(num(find_op(rb.out, "meminfo"), "total"), 2 * GiB);
  EXPECT_EQ(num(find_op(rb.out, "totalmem:0"), "total"), 2 * GiB);
  EXPECT_NE(ra.err.find("memory limit 1 GiB -> 2 GiB"), std::string::npos) << ra.err;
}

TEST_F(Resize, MemoryLoweredBelowUseTakesNothingAndRefusesUntilUnder) {
  write_limits("2g", 0);
  Child a = spawn({"init", "ctx:0", "alloc:1500m", "mark", await(),
                   "waittotal:1g:" + std::string(kWithinMs), "alloc:1m", "mark", await("go2"),
                   "free:0", "alloc:512m", "alloc:600m"});
  ASSERT_TRUE(a.wait_for_line("op=mark")) << a.out();
  write_limits("1g", 0);
  go();
  ASSERT_TRUE(a.wait_for_line("op=mark")) << a.out();
  // Over its limit meanwhile, where the node agent and `vgpu top` look.
  const auto s = snapshot();
  EXPECT_EQ(s.memory_limit[0], GiB);
  uint64_t used = 0;
  for (const auto& slot : s.slots)
    used += slot.used[0].total;
  EXPECT_EQ(used, 1500 * MiB) << "nothing is taken back";
  go("go2");
  const auto r = a.finish();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(test::rc_of(r.out, "waittotal:1g:" + std::string(kWithinMs)), 0) << r.out;
  EXPECT_EQ(test::rc_of(r.out, "alloc:1m"), 2) << "over the new limit: refused";
  EXPECT_EQ(test::rc_of(r.out, "free:0"), 0);
  EXPECT_EQ(test::rc_of(r.out, "alloc:512m"), 0) << "under it again";
  EXPECT_EQ(test::rc_of(r.out, "alloc:600m"), 2) << "the new limit holds";
  EXPECT_NE(r.err.find("over its new 1 GiB limit"), std::string::npos) << r.err;
}

// The share changes under a running process: uncapped, then held to 25 %,
// then uncapped again, each from the launch after the limiter saw the file.
TEST_F(Resize, PacingFollowsTheNewShare) {
  write_limits("1g", 0);
  const Env kernels = {{"SIMGPU_KERNEL_NS", "2000000"}};
  Child a =
      spawn({"init", "ctx:0", "launchpath:kernel:1", "sync", "stream:nb", "launchpath:kernel:40",
             "mark", await(), "waittotal:2g:1000", "launchpath:kernel:60", "mark", await("go2"),
             "waittotal:1g:1000", "launchpath:kernel:50"},
            kernels);
  ASSERT_TRUE(a.wait_for_line("op=mark")) << a.out();
  write_limits("2g", 25);
  go();
  ASSERT_TRUE(a.wait_for_line("op=mark")) << a.out();
  write_limits("1g", 0);
  go("go2");
  const auto r = a.finish();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const double free_ms = std::stod(find_op(r.out, "launchpath:kernel:40").at("ms"));
  const double paced_ms = std::stod(find_op(r.out, "launchpath:kernel:60").at("ms"));
  const double after_ms = std::stod(find_op(r.out, "launchpath:kernel:50").at("ms"));
  // 60 launches of 2 ms at 25 %: at least 480 ms of wall time, less one 20 ms
  // burst; uncapped they take no more than the GPU's 2 ms each, queued.
  EXPECT_GE(paced_ms, 0.5 * (60 * 2.0 * 100 / 25 - 20)) << r.out;
  EXPECT_LT(free_ms, 0.5 * paced_ms) << r.out;
  EXPECT_LT(after_ms, 0.5 * paced_ms) << r.out;
  EXPECT_NE(r.err.find("SM share 100% -> 25%"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("SM share 25% -> 100%"), std::string::npos) << r.err;
}

TEST_F(Resize, ACorruptOrMissingFileChangesNothing) {
  write_limits("1g", 0);
  Child a = spawn({"init", "ctx:0", "mark", await(), "waittotal:2g:1000", "alloc:1500m"});
  ASSERT_TRUE(a.wait_for_line("op=mark")) << a.out();
  {
    std::ofstream(limits() + ".tmp") << "CUDA_DEVICE_MEMORY_LIMIT_0=2g\nnot a pair\n";
    std::filesystem::rename(limits() + ".tmp", limits());
  }
  go();
  const auto r = a.finish();
  EXPECT_EQ(test::rc_of(r.out, "waittotal:2g:1000"), 999) << r.out;
  EXPECT_EQ(test::rc_of(r.out, "alloc:1500m"), 2) << "still the old 1 GiB";
  EXPECT_NE(r.err.find("corrupt after a change; the limits stay as they were"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace hami::vgpu
