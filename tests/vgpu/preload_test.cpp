// libvgpu.so as it runs in a container: preloaded into real processes that use
// the (simulated) driver, every process of a "container" sharing one state file.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "region/region.hpp"
#include "region/snapshot.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"
#include "vgpu/client_output.hpp"

namespace hami::vgpu {
namespace {

using test::Child;
using test::Env;
using test::ProcessResult;

constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t GiB = 1ull << 30;
const std::string kGpuA = "GPU-5a3e0000-0000-4000-8000-000000000000";
const std::string kGpuB = "GPU-5a3e0000-0000-4000-8000-000000000001";

using test::find_op;
using test::Line;
using test::num;
using test::parse_lines;

int rc(const std::string& out, const std::string& op, int nth = 0) {
  return test::rc_of(out, op, nth);
}

double ms(const Line& l, const std::string& key = "ms") {
  auto it = l.find(key);
  return it == l.end() ? -1 : std::stod(it->second);
}

// The SM limiter's exit summary for one device (LIBCUDA_LOG_LEVEL=3):
//   device 0 (GPU-...): SM share 30%: launches kernel=3 kernel_ex=0 cooperative=0
//   graph=0; charged 0.060 ms, waited 0.000 ms, 2 samples (0 on an idle stream), 1 shapes,
//   marks 1.30 us, idle lag 0.00 us
// Not found: all zero.
struct SmSummary {
  bool found = false;
  unsigned percent = 0;
  unsigned long long kernel = 0, kernel_ex = 0, cooperative = 0, graph = 0;
  double charged_ms = 0, waited_ms = 0;
  unsigned long long samples = 0, idle_samples = 0, shapes = 0;
  double mark_us = 0, lag_us = 0;
  unsigned long long launches() const { return kernel + kernel_ex + cooperative + graph; }
};

SmSummary sm_summary(const std::string& err, int device) {
  SmSummary s;
  int lines = 0;
  std::istringstream in(err);
  std::string text;
  while (std::getline(in, text)) {
    const size_t at = text.find("INFO: device ");
    if (at == std::string::npos) continue;
    SmSummary cur;
    int dev = -1;
    char uuid[128];
    const int n = std::sscanf(
        text.c_str() + at,
        "INFO: device %d (%127[^)]): SM share %u%%: launches kernel=%llu kernel_ex=%llu "
        "cooperative=%llu graph=%llu; charged %lf ms, waited %lf ms, %llu samples (%llu on an "
        "idle stream), %llu shapes, marks %lf us, idle lag %lf us",
        &dev, uuid, &cur.percent, &cur.kernel, &cur.kernel_ex, &cur.cooperative, &cur.graph,
        &cur.charged_ms, &cur.waited_ms, &cur.samples, &cur.idle_samples, &cur.shapes, &cur.mark_us,
        &cur.lag_us);
    if (n != 14 || dev != device) continue;
    cur.found = true;
    s = cur;
    ++lines;
  }
  EXPECT_LE(lines, 1) << "one summary line per device:\n" << err;
  return s;
}

class Preload : public ::testing::Test {
 protected:
  std::string state_file() const { return dir_.file("vgpu.cache"); }

  // A container's environment: the library preloaded, the simulated GPUs, no
  // context memory unless a test asks for it.
  Env env(const Env& extra = {}) const {
    Env e = {{"LD_PRELOAD", LIBVGPU},
             {"LD_LIBRARY_PATH", SIMGPU_LIB_DIR},
             {"SIMGPU_STATE", dir_.file("gpu.state")},
             {"SIMGPU_CONTEXT_SIZE", "0"},
             {"CUDA_DEVICE_MEMORY_SHARED_CACHE", state_file()},
             {"ASAN_OPTIONS", "verify_asan_link_order=0:detect_leaks=0"},
             {"CUDA_VISIBLE_DEVICES", test::kUnset},
             {"LIBCUDA_LOG_LEVEL", test::kUnset},
             {"VGPU_LIMITS_FILE", test::kUnset},
             {"CUDA_DEVICE_MEMORY_LIMIT", test::kUnset},
             {"CUDA_DEVICE_SM_LIMIT", test::kUnset},
             {"GPU_CORE_UTILIZATION_POLICY", test::kUnset},
             {"SIMGPU_KERNEL_NS", test::kUnset},
             {"SIMGPU_GRAPH_NS", test::kUnset},
             {"SIMGPU_FAIL", test::kUnset}};
    return test::with_overrides(std::move(e), extra);
  }

  static std::vector<std::string> argv(std::vector<std::string> ops) {
    ops.insert(ops.begin(), CUDA_CLIENT);
    return ops;
  }
  ProcessResult run(const std::vector<std::string>& ops, const Env& extra = {}) const {
    return test::run_process(argv(ops), env(extra));
  }
  Child spawn(const std::vector<std::string>& ops, const Env& extra = {}) const {
    return Child::spawn(argv(ops), env(extra));
  }

  region::RegionSnapshot snapshot() const {
    auto s = region::read_snapshot(state_file());
    EXPECT_TRUE(s) << s.error().message;
    return s ? *s : region::RegionSnapshot{};
  }
  // Usage the state file records for process `pid` on state-file device `dev`.
  region::DeviceMemoryUsage usage_of(pid_t pid, int dev) const {
    for (const auto& slot : snapshot().slots) {
      if (slot.pid == pid) return slot.used[dev];
    }
    return {};
  }
  void touch(const std::string& name) const { std::ofstream(dir_.file(name)) << "go"; }
  // A new container for the next process: no state file, and no SM pace
  // clocks (work a previous process admitted would otherwise hold it back).
  // Two processes of the container, each launching `n` kernels of 2 ms at a
  // share of `percent` at once (after one launch measured alone); `ready`
  // runs once both wait to start. The later one's time, what both charged,
  // and their logs.
  struct PairRun {
    double longest_ms = 0;
    double charged_ms = 0;
    std::vector<std::string> errs;
  };
  PairRun paced_pair(const std::string& percent, int n,
                     const std::function<void()>& ready = {}) const {
    const Env env = {{"CUDA_DEVICE_SM_LIMIT", percent},
                     {"SIMGPU_KERNEL_NS", "2000000"},
                     {"LIBCUDA_LOG_LEVEL", "3"}};
    const std::string launches = "launchpath:kernel:" + std::to_string(n);
    std::vector<Child> procs;
    for (int i = 0; i < 2; ++i) {
      procs.push_back(spawn({"init", "ctx:0", "launchpath:kernel:1", "sync", "stream:nb", "mark",
                             "await:" + dir_.file("go"), launches},
                            env));
    }
    for (auto& p : procs)
      EXPECT_TRUE(p.wait_for_line("op=mark")) << p.out();
    if (ready) ready();
    touch("go");
    PairRun run;
    for (auto& p : procs) {
      const ProcessResult r = p.finish();
      EXPECT_EQ(r.exit_code, 0) << r.err;
      const Line paced = find_op(r.out, launches);
      EXPECT_EQ(num(paced, "ran"), static_cast<uint64_t>(n));
      run.charged_ms += sm_summary(r.err, 0).charged_ms;
      run.longest_ms = std::max(run.longest_ms, ms(paced));
      run.errs.push_back(r.err);
    }
    return run;
  }

  void fresh_container() const {
    std::filesystem::remove(state_file());
    std::filesystem::remove(state_file() + ".pace");
  }

  test::TempDir dir_;
};

// ----------------------------------------------------------------- charging

struct PathCase {
  std::string op;
  int device;  // state-file device the charge lands on
  uint64_t bytes;
};

TEST_F(Preload, EveryAllocationPathIsChargedAndGivenBack) {
  const std::vector<PathCase> cases = {
      {"alloc:64m", 0, 64 * MiB},
      {"pitch:1000x3000", 0, 6 * MiB},  // driver pitch 2048: charge settles on what it chose
      {"managed:10m", 0, 10 * MiB},
      {"async:6m", 0, 32 * MiB},   // the pool's reservation: 32 MiB granules
      {"pool:1:4m", 1, 32 * MiB},  // pool of device 1 while device 0 is current
      {"vmm:0:8m", 0, 8 * MiB},
      {"vmm:1:8m", 1, 8 * MiB},
      {"vmm-host:8m", 0, 0},  // host memory is not device memory
      {"array:1024x1024", 0, 4 * MiB},
      {"array3d:100x100x100", 0, 6 * MiB},  // estimate 3.8 MiB; padded rows: 6 MiB
      {"mipmap:1024x1024:3", 0, 8 * MiB},
      {"alloc-v1:16m", 0, 0},  // the 32-bit API of CUDA < 3.2 passes through untouched
  };
  for (const PathCase& c : cases) {
    SCOPED_TRACE(c.op);
    std::filesystem::remove(dir_.file("go"));
    // The 32-bit API's pointer cannot be freed through the 64-bit one.
    const std::string release = c.op.rfind("alloc-v1", 0) == 0 ? "mark" : "free:0";
    Child client =
        spawn({"init", "ctx:0", c.op, "mark", "await:" + dir_.file("go"), release, "mark"},
              {{"CUDA_DEVICE_MEMORY_LIMIT", "1g"}});
    ASSERT_TRUE(client.wait_for_line("op=mark")) << client.out();
    EXPECT_EQ(rc(client.out(), c.op), 0) << client.out();
    const auto used = usage_of(client.pid(), c.device);
    EXPECT_EQ(used.total, c.bytes);
    EXPECT_EQ(used.data, c.bytes);
    touch("go");
    ASSERT_TRUE(client.wait_for_line("op=mark")) << client.out();
    EXPECT_EQ(usage_of(client.pid(), c.device).total, 0u) << "not given back";
    const ProcessResult done = client.finish();
    EXPECT_EQ(done.exit_code, 0) << done.err;
    EXPECT_EQ(done.err, "") << "the library printed at the default log level";
  }
  // Every process released its slot on exit.
  EXPECT_TRUE(snapshot().slots.empty());
}

TEST_F(Preload, EveryLookupPathIsIntercepted) {
  struct Via {
    std::string via, alloc_name, async_name;
  };
  for (const Via& v : std::vector<Via>{{"link", "cuMemAlloc_v2", "cuMemAllocAsync"},
                                       {"dlsym", "cuMemAlloc_v2", "cuMemAllocAsync"},
                                       {"procaddr", "cuMemAlloc", "cuMemAllocAsync"},
                                       {"procaddr-ptds", "cuMemAlloc", "cuMemAllocAsync"}}) {
    SCOPED_TRACE(v.via);
    const auto r =
        run({"--via=" + v.via, "init", "ctx:0", "alloc:60m", "alloc:60m", "async:60m",
             "whois:" + v.alloc_name, "whois:" + v.async_name, "whois:cuCtxGetCurrent", "launch"},
            {{"CUDA_DEVICE_MEMORY_LIMIT", "100m"}});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(rc(r.out, "alloc:60m", 0), 0);
    EXPECT_EQ(rc(r.out, "alloc:60m", 1), 2) << "second allocation must hit the 100 MiB limit";
    EXPECT_EQ(rc(r.out, "async:60m"), 2);
    EXPECT_EQ(find_op(r.out, "whois:" + v.alloc_name)["lib"], "libvgpu.so");
    EXPECT_EQ(find_op(r.out, "whois:" + v.async_name)["lib"], "libvgpu.so");
    // Launches are ours on every path; functions we do not intercept are the
    // driver's own, never a wrapper.
    EXPECT_EQ(
        find_op(r.out, "launch")["from"].substr(find_op(r.out, "launch")["from"].rfind('/') + 1),
        "libvgpu.so");
    EXPECT_EQ(find_op(r.out, "whois:cuCtxGetCurrent")["lib"], "libcuda.so.1");
  }
}

TEST_F(Preload, PerThreadStreamLookupGetsThePerThreadHook) {
  // procaddr-ptds asks for cuMemAllocAsync with the per-thread flag: the driver
  // answers cuMemAllocAsync_ptsz, and so must we (our _ptsz hook).
  const auto r = run({"--via=procaddr-ptds", "init", "ctx:0", "async:8m", "mark", "exit:0"},
                     {{"CUDA_DEVICE_MEMORY_LIMIT", "1g"}, {"LIBCUDA_LOG_LEVEL", "0"}});
  EXPECT_EQ(rc(r.out, "async:8m"), 0);
  const auto plain =
      run({"--via=dlsym", "whois:cuMemAllocAsync_ptsz"}, {{"CUDA_DEVICE_MEMORY_LIMIT", "1g"}});
  EXPECT_EQ(find_op(plain.out, "whois:cuMemAllocAsync_ptsz")["lib"], "libvgpu.so");
}

TEST_F(Preload, UnconfiguredProcessGetsTheDriverItself) {
  const Env none = {{"CUDA_DEVICE_MEMORY_SHARED_CACHE", test::kUnset}};
  for (const std::string via : {"dlsym", "procaddr"}) {
    const std::string name = via == "dlsym" ? "cuMemAlloc_v2" : "cuMemAlloc";
    const auto r = run({"--via=" + via, "init", "ctx:0", "alloc:64m", "whois:" + name}, none);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(rc(r.out, "alloc:64m"), 0);
    EXPECT_EQ(find_op(r.out, "whois:" + name)["lib"], "libcuda.so.1") << via;
  }
  EXPECT_FALSE(std::filesystem::exists(state_file())) << "nothing configured, nothing written";
}

TEST_F(Preload, UnknownPointerFreePassesThroughUnchanged) {
  const std::vector<std::string> ops = {"init", "ctx:0", "alloc:2m", "freeptr:7f00dead0000"};
  const auto bare = test::run_process(argv(ops), env({{"LD_PRELOAD", ""}}));
  const auto ours = run(ops, {{"CUDA_DEVICE_MEMORY_LIMIT", "1g"}});
  ASSERT_EQ(bare.exit_code, 0);
  ASSERT_EQ(ours.exit_code, 0);
  EXPECT_EQ(rc(ours.out, "freeptr:7f00dead0000"), rc(bare.out, "freeptr:7f00dead0000"));
  EXPECT_EQ(rc(ours.out, "freeptr:7f00dead0000"), 1);  // the driver's CUDA_ERROR_INVALID_VALUE
}

// A pool reserves more than the request (32 MiB granules): the reservation is
// what must fit, and a refused one leaves nothing behind.
TEST_F(Preload, PoolGrowthMustFitTheLimit) {
  Child c = spawn({"init", "ctx:0", "alloc:70m", "async:6m", "alloc:20m", "mark", "hold"},
                  {{"CUDA_DEVICE_MEMORY_LIMIT", "100m"}});
  ASSERT_TRUE(c.wait_for_line("op=mark"));
  EXPECT_EQ(rc(c.out(), "async:6m"), 2) << "6 MiB fits, but the pool's 32 MiB granule does not";
  EXPECT_EQ(rc(c.out(), "alloc:20m"), 0) << "the refused pool growth was handed back";
  EXPECT_EQ(usage_of(c.pid(), 0).total, 90 * MiB);
}

TEST_F(Preload, DestroyedPoolGivesItsReservationBack) {
  Child c = spawn({"init", "ctx:0", "poolnew:0", "poolalloc:40m", "mark",
                   "await:" + dir_.file("go"), "pooldestroy", "mark", "hold"},
                  {{"CUDA_DEVICE_MEMORY_LIMIT", "1g"}});
  ASSERT_TRUE(c.wait_for_line("op=mark"));
  EXPECT_EQ(usage_of(c.pid(), 0).total, 64 * MiB);  // two 32 MiB granules
  touch("go");
  ASSERT_TRUE(c.wait_for_line("op=mark"));
  EXPECT_EQ(rc(c.out(), "pooldestroy"), 0);
  EXPECT_EQ(usage_of(c.pid(), 0).total, 0u);
}

TEST_F(Preload, DriverFailureWithdrawsTheCharge) {
  Child c = spawn({"init", "ctx:0", "alloc:64m", "alloc:64m", "mark", "hold"},
                  {{"CUDA_DEVICE_MEMORY_LIMIT", "1g"}, {"SIMGPU_FAIL", "cuMemAlloc_v2:2"}});
  ASSERT_TRUE(c.wait_for_line("op=mark"));
  EXPECT_EQ(rc(c.out(), "alloc:64m", 0), 0);
  EXPECT_EQ(rc(c.out(), "alloc:64m", 1), 2);  // the driver's own out-of-memory
  EXPECT_EQ(usage_of(c.pid(), 0).total, 64 * MiB);
}

// ----------------------------------------------------------------- limits

TEST_F(Preload, LimitsFromTheEnvironmentAndTheVirtualView) {
  const auto r = run({"init", "ctx:0", "totalmem:0", "totalmem:1", "meminfo", "nvml:0", "nvml2:1",
                      "alloc:256m", "meminfo", "nvml:0", "nvml2:0"},
                     {{"CUDA_DEVICE_MEMORY_LIMIT", "1g"}, {"CUDA_DEVICE_MEMORY_LIMIT_1", "2g"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(num(find_op(r.out, "totalmem:0"), "total"), GiB);
  EXPECT_EQ(num(find_op(r.out, "totalmem:1"), "total"), 2 * GiB);
  EXPECT_EQ(num(find_op(r.out, "meminfo", 0), "total"), GiB);
  EXPECT_EQ(num(find_op(r.out, "meminfo", 0), "free"), GiB);
  const Line nv = find_op(r.out, "nvml:0", 0);
  EXPECT_EQ(num(nv, "total"), GiB);
  EXPECT_EQ(num(nv, "used"), 0u);
  EXPECT_EQ(num(nv, "free"), GiB);
  EXPECT_EQ(num(find_op(r.out, "nvml2:1"), "total"), 2 * GiB);
  // After 256 MiB: every view agrees, used + free = total.
  EXPECT_EQ(num(find_op(r.out, "meminfo", 1), "free"), GiB - 256 * MiB);
  EXPECT_EQ(num(find_op(r.out, "meminfo", 1), "total"), GiB);
  EXPECT_EQ(num(find_op(r.out, "nvml:0", 1), "used"), 256 * MiB);
  EXPECT_EQ(num(find_op(r.out, "nvml:0", 1), "free"), GiB - 256 * MiB);
  const Line v2 = find_op(r.out, "nvml2:0");
  EXPECT_EQ(num(v2, "total"), GiB);
  EXPECT_EQ(num(v2, "used"), 256 * MiB);
  EXPECT_EQ(num(v2, "free"), GiB - 256 * MiB);
  EXPECT_EQ(num(v2, "reserved"), 0u);
}

TEST_F(Preload, NoLimitShowsTheRealDevice) {
  const auto r = run({"init", "ctx:0", "totalmem:0", "meminfo", "nvml:0", "alloc:100m", "nvml:0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(num(find_op(r.out, "totalmem:0"), "total"), 80 * GiB);
  EXPECT_EQ(num(find_op(r.out, "meminfo"), "total"), 80 * GiB);
  EXPECT_EQ(num(find_op(r.out, "nvml:0", 0), "total"), 80 * GiB);
  EXPECT_EQ(num(find_op(r.out, "nvml:0", 1), "used"), 100 * MiB);  // the device's, unchanged
}

TEST_F(Preload, LimitsFileGovernsOverTheEnvironment) {
  const std::string limits = dir_.file("limits");
  std::ofstream(limits) << "# device plugin\nCUDA_DEVICE_MEMORY_LIMIT=1g\n";
  const auto r = run({"init", "ctx:0", "totalmem:0", "alloc:2g", "alloc:512m"},
                     {{"VGPU_LIMITS_FILE", limits}, {"CUDA_DEVICE_MEMORY_LIMIT", "80g"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(num(find_op(r.out, "totalmem:0"), "total"), GiB);
  EXPECT_EQ(rc(r.out, "alloc:2g"), 2);
  EXPECT_EQ(rc(r.out, "alloc:512m"), 0);
  // A process that rewrites the state file's limit does not raise its own.
  Child c = spawn({"init", "ctx:0", "mark", "await:" + dir_.file("go"), "alloc:2g"},
                  {{"VGPU_LIMITS_FILE", limits}});
  ASSERT_TRUE(c.wait_for_line("op=mark"));
  {
    auto region = region::Region::open(state_file(), region::OpenOptions{.create = false});
    ASSERT_TRUE(region);
    region->set_memory_limit(0, 100 * GiB);
  }
  touch("go");
  const auto done = c.finish();
  EXPECT_EQ(rc(done.out, "alloc:2g"), 2) << done.out;
}

TEST_F(Preload, MalformedLimitRefusesAndSaysWhy) {
  const auto r =
      run({"init", "ctx:0", "alloc:1m", "totalmem:0"}, {{"CUDA_DEVICE_MEMORY_LIMIT", "lots"}});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(rc(r.out, "alloc:1m"), 2);
  EXPECT_NE(r.err.find("CUDA_DEVICE_MEMORY_LIMIT=lots"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("refused"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST_F(Preload, UsageAboveALoweredLimitNeverUnderflows) {
  Child big =
      spawn({"init", "ctx:0", "alloc:900m", "mark", "hold"}, {{"CUDA_DEVICE_MEMORY_LIMIT", "1g"}});
  ASSERT_TRUE(big.wait_for_line("op=mark"));
  const std::string limits = dir_.file("limits");
  std::ofstream(limits) << "CUDA_DEVICE_MEMORY_LIMIT=512m\n";
  const auto r = run({"init", "ctx:0", "meminfo", "nvml:0"}, {{"VGPU_LIMITS_FILE", limits}});
  EXPECT_EQ(num(find_op(r.out, "meminfo"), "total"), 512 * MiB);
  EXPECT_EQ(num(find_op(r.out, "meminfo"), "free"), 0u);
  EXPECT_EQ(num(find_op(r.out, "nvml:0"), "used"), 512 * MiB);
  EXPECT_EQ(num(find_op(r.out, "nvml:0"), "free"), 0u);
}

// ----------------------------------------------------------------- contexts

TEST_F(Preload, ContextsAreChargedToTheirDevice) {
  for (const std::string offset : {"0", "100000"}) {  // NVML with and without our PIDs
    SCOPED_TRACE("pid offset " + offset);
    std::filesystem::remove(dir_.file("go"));
    Child c = spawn({"init", "ctx:0", "ctxcreate:1", "mark", "await:" + dir_.file("go"),
                     "ctxdestroy", "release:0", "mark", "hold"},
                    {{"CUDA_DEVICE_MEMORY_LIMIT", "2g"},
                     {"SIMGPU_CONTEXT_SIZE", "300m"},
                     {"SIMGPU_NVML_PID_OFFSET", offset}});
    ASSERT_TRUE(c.wait_for_line("op=mark")) << c.out();
    EXPECT_EQ(usage_of(c.pid(), 0).context, 300 * MiB);
    EXPECT_EQ(usage_of(c.pid(), 1).context, 300 * MiB);
    touch("go");
    ASSERT_TRUE(c.wait_for_line("op=mark"));
    EXPECT_EQ(usage_of(c.pid(), 0).total, 0u);
    EXPECT_EQ(usage_of(c.pid(), 1).total, 0u);
  }
}

TEST_F(Preload, ContextLargerThanTheLimitIsRefused) {
  const auto r = run({"init", "ctx:0", "alloc:1m"},
                     {{"CUDA_DEVICE_MEMORY_LIMIT", "100m"}, {"SIMGPU_CONTEXT_SIZE", "300m"}});
  EXPECT_EQ(rc(r.out, "ctx:0"), 2);
}

TEST_F(Preload, ContextResetGivesEverythingBack) {
  Child c = spawn({"init", "ctx:0", "alloc:64m", "array:512x512", "reset:0", "mark", "hold"},
                  {{"CUDA_DEVICE_MEMORY_LIMIT", "1g"}, {"SIMGPU_CONTEXT_SIZE", "100m"}});
  ASSERT_TRUE(c.wait_for_line("op=mark"));
  EXPECT_EQ(rc(c.out(), "reset:0"), 0);
  EXPECT_EQ(usage_of(c.pid(), 0).total, 0u);
}

// ------------------------------------------------------ CUDA_VISIBLE_DEVICES

TEST_F(Preload, VisibleDevicesPutLimitsOnTheRightGpu) {
  struct Case {
    std::string visible;
    std::vector<uint64_t> totals;  // totalmem per CUDA ordinal
    int charged_device;            // state-file device that alloc on ordinal 0 charges
  };
  const std::vector<Case> cases = {
      {test::kUnset, {GiB, 2 * GiB}, 0},
      {"1", {2 * GiB}, 1},
      {"1,0", {2 * GiB, GiB}, 1},
      {"0,1", {GiB, 2 * GiB}, 0},
      {kGpuB, {2 * GiB}, 1},
      {kGpuB.substr(0, 12), {2 * GiB}, 1},  // a unique prefix, as the driver allows
      {kGpuB + "," + kGpuA, {2 * GiB, GiB}, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("CUDA_VISIBLE_DEVICES=" + (c.visible == test::kUnset ? "(unset)" : c.visible));
    fresh_container();
    std::vector<std::string> ops = {"init", "ctx:0"};
    for (size_t o = 0; o < c.totals.size(); ++o)
      ops.push_back("totalmem:" + std::to_string(o));
    ops.insert(ops.end(), {"alloc:32m", "mark", "hold"});
    Child p = spawn(ops, {{"CUDA_VISIBLE_DEVICES", c.visible},
                          {"CUDA_DEVICE_MEMORY_LIMIT_0", "1g"},
                          {"CUDA_DEVICE_MEMORY_LIMIT_1", "2g"}});
    ASSERT_TRUE(p.wait_for_line("op=mark")) << p.out();
    for (size_t o = 0; o < c.totals.size(); ++o) {
      EXPECT_EQ(num(find_op(p.out(), "totalmem:" + std::to_string(o)), "total"), c.totals[o]) << o;
    }
    const auto snap = snapshot();
    EXPECT_EQ(snap.uuids[0], kGpuA);  // the file lists GPUs in NVML order regardless
    EXPECT_EQ(snap.uuids[1], kGpuB);
    EXPECT_EQ(usage_of(p.pid(), c.charged_device).total, 32 * MiB);
    EXPECT_EQ(usage_of(p.pid(), 1 - c.charged_device).total, 0u);
  }
}

// ------------------------------------------------------ processes and crashes

TEST_F(Preload, ProcessesShareTheContainerLimit) {
  Child a =
      spawn({"init", "ctx:0", "alloc:600m", "mark", "hold"}, {{"CUDA_DEVICE_MEMORY_LIMIT", "1g"}});
  ASSERT_TRUE(a.wait_for_line("op=mark"));
  const auto b = run({"init", "ctx:0", "alloc:600m", "alloc:400m", "meminfo"},
                     {{"CUDA_DEVICE_MEMORY_LIMIT", "1g"}});
  EXPECT_EQ(rc(b.out, "alloc:600m"), 2);
  EXPECT_EQ(rc(b.out, "alloc:400m"), 0);
  EXPECT_EQ(num(find_op(b.out, "meminfo"), "free"), GiB - 1000 * MiB);
}

TEST_F(Preload, ConcurrentProcessesNeverExceedTheLimit) {
  constexpr int kProcs = 8;
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::filesystem::remove(dir_.file("go"));
    std::vector<Child> procs;
    for (int i = 0; i < kProcs; ++i) {
      procs.push_back(
          spawn({"init", "ctx:0", "mark", "await:" + dir_.file("go"), "alloc:200m", "hold"},
                {{"CUDA_DEVICE_MEMORY_LIMIT", "1000m"}}));
    }
    for (auto& p : procs)
      ASSERT_TRUE(p.wait_for_line("op=mark"));
    touch("go");
    int admitted = 0;
    for (auto& p : procs) {
      ASSERT_TRUE(p.wait_for_line("op=alloc:200m"));
      admitted += rc(p.out(), "alloc:200m") == 0;
    }
    EXPECT_GE(admitted, 1);
    EXPECT_LE(admitted, 5);
    uint64_t total = 0;
    for (const auto& s : snapshot().slots)
      total += s.used[0].total;
    EXPECT_LE(total, 1000 * MiB);
    EXPECT_EQ(total, static_cast<uint64_t>(admitted) * 200 * MiB);
  }
}

TEST_F(Preload, ForkedChildTakesItsOwnSlot) {
  const auto r =
      run({"init", "ctx:0", "alloc:100m", "fork", "alloc:50m", "nvml:0", "join", "nvml:0"},
          {{"CUDA_DEVICE_MEMORY_LIMIT", "1g"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(rc(r.out, "alloc:50m"), 0);
  EXPECT_EQ(num(find_op(r.out, "nvml:0", 0), "used"), 150 * MiB);  // child: both processes
  EXPECT_EQ(rc(r.out, "join"), 0);
  EXPECT_EQ(num(find_op(r.out, "nvml:0", 1), "used"), 100 * MiB);  // child's slot released
}

TEST_F(Preload, KilledProcessUsageIsReclaimed) {
  Child a =
      spawn({"init", "ctx:0", "alloc:700m", "mark", "hold"}, {{"CUDA_DEVICE_MEMORY_LIMIT", "1g"}});
  ASSERT_TRUE(a.wait_for_line("op=mark"));
  const pid_t dead = a.pid();
  a.kill(SIGKILL);
  a.finish();
  auto before = snapshot();
  ASSERT_EQ(before.slots.size(), 1u);
  EXPECT_EQ(before.slots[0].pid, dead);
  EXPECT_EQ(before.slots[0].liveness, region::Liveness::kDead);
  const auto b = run({"init", "ctx:0", "alloc:700m"}, {{"CUDA_DEVICE_MEMORY_LIMIT", "1g"}});
  EXPECT_EQ(rc(b.out, "alloc:700m"), 0) << b.out << b.err;
}

TEST_F(Preload, KillNineMidAllocationsLeavesNothingCharged) {
  std::mt19937 rng(7);
  for (int i = 0; i < 10; ++i) {
    Child churn = spawn({"init", "ctx:0", "mark", "churn:64m:100000000"},
                        {{"CUDA_DEVICE_MEMORY_LIMIT", "1g"}});
    ASSERT_TRUE(churn.wait_for_line("op=mark"));
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 20000));
    churn.kill(SIGKILL);
    churn.finish();
  }
  // The next process reclaims every dead slot and gets the whole limit.
  const auto r = run({"init", "ctx:0", "alloc:1g"}, {{"CUDA_DEVICE_MEMORY_LIMIT", "1g"}});
  EXPECT_EQ(rc(r.out, "alloc:1g"), 0) << r.out << r.err;
  EXPECT_TRUE(snapshot().slots.empty());
}

// ----------------------------------------------------------------- SM share
// The limiter's view comes from its exit summary (LIBCUDA_LOG_LEVEL=3), the
// driver's from cuda-client's per-op counts of what the simulated GPU saw.

const std::vector<std::string> kRoutes = {"link", "dlsym", "procaddr", "procaddr-ptds"};

TEST_F(Preload, EveryLaunchPathIsChargedOnEveryLookupRoute) {
  const std::vector<std::string> paths = {"kernel", "kernel_ptsz", "ex",    "ex_ptsz",
                                          "coop",   "coop_ptsz",   "graph", "graph_ptsz"};
  const std::map<std::string, std::string> driver_fn = {{"kernel", "cuLaunchKernel"},
                                                        {"ex", "cuLaunchKernelEx"},
                                                        {"coop", "cuLaunchCooperativeKernel"},
                                                        {"graph", "cuGraphLaunch"}};
  for (const std::string& via : kRoutes) {
    SCOPED_TRACE(via);
    fresh_container();
    std::vector<std::string> ops = {"--via=" + via, "init", "ctx:0"};
    for (const std::string& p : paths)
      ops.push_back("launchpath:" + p + ":3");
    const auto r = run(ops, {{"CUDA_DEVICE_SM_LIMIT", "30"}, {"LIBCUDA_LOG_LEVEL", "3"}});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const std::string& p : paths) {
      SCOPED_TRACE(p);
      const Line l = find_op(r.out, "launchpath:" + p + ":3");
      EXPECT_EQ(l.at("rc"), "0");
      // procaddr-ptds answers the base name with the per-thread variant.
      const bool per_thread = p.find("_ptsz") != std::string::npos || via == "procaddr-ptds";
      const std::string fn = driver_fn.at(p.substr(0, p.find('_'))) + (per_thread ? "_ptsz" : "");
      EXPECT_EQ(l.at("lib"), "libvgpu.so") << "the lookup must return our hook";
      EXPECT_EQ(l.at("fn"), fn) << "our hook for the very variant asked for";
      // ...which calls that same variant of the driver.
      EXPECT_EQ(num(l, per_thread ? "ptsz" : "plain"), 3u);
      EXPECT_EQ(num(l, per_thread ? "plain" : "ptsz"), 0u);
      EXPECT_EQ(num(l, "ran"), 3u);
      EXPECT_GT(num(l, "records"), 0u) << "a new launch shape is sampled with events";
    }
    const SmSummary s = sm_summary(r.err, 0);
    ASSERT_TRUE(s.found) << r.err;
    EXPECT_EQ(s.percent, 30u);
    EXPECT_EQ(s.kernel, 6u);
    EXPECT_EQ(s.kernel_ex, 6u);
    EXPECT_EQ(s.cooperative, 6u);
    EXPECT_EQ(s.graph, 6u);
    EXPECT_GT(s.shapes, 0u);
    EXPECT_FALSE(sm_summary(r.err, 1).found && sm_summary(r.err, 1).launches() > 0)
        << "nothing ran on device 1";
  }
}

TEST_F(Preload, PacingHoldsChargedGpuTimeToTheShare) {
  // 2 ms kernels at a 25 % share: once the kernel is measured, every launch
  // is charged ~2 ms and must be spaced ~8 ms apart. (The paced ones go to a
  // stream of their own: samples follow the launch's stream.)
  constexpr double kKernelMs = 2.0;
  constexpr double kShare = 25.0;
  constexpr double kBurstMs = 20.0;  // LimiterOptions::burst_ns: admitted ahead of the share
  const auto r =
      run({"init", "ctx:0", "launchpath:kernel:1", "sync", "stream:nb", "launchpath:kernel:100"},
          {{"CUDA_DEVICE_SM_LIMIT", "25"},
           {"SIMGPU_KERNEL_NS", "2000000"},
           {"LIBCUDA_LOG_LEVEL", "3"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Line paced = find_op(r.out, "launchpath:kernel:100");
  EXPECT_EQ(num(paced, "ran"), 100u);
  EXPECT_GT(num(paced, "records"), 0u);
  const SmSummary s = sm_summary(r.err, 0);
  ASSERT_TRUE(s.found) << r.err;
  ASSERT_EQ(s.kernel, 101u);
  EXPECT_GT(s.samples, 0u);
  // Launches made before the kernel was measured are charged once it is.
  const double expected = static_cast<double>(s.kernel) * kKernelMs;
  EXPECT_GE(s.charged_ms, expected * 0.8) << r.err;
  EXPECT_LE(s.charged_ms, expected * 1.2) << r.err;
  // Lower bounds only: at most one burst runs ahead of the share.
  const double min_wall = s.charged_ms * 100 / kShare - kBurstMs;
  EXPECT_GT(s.waited_ms, 0);
  EXPECT_GE(s.waited_ms, 0.5 * min_wall) << r.err;
  EXPECT_GE(ms(paced), 0.5 * min_wall) << r.out;
}

// A program whose GPU time stays below its share never waits: 2 ms kernels,
// one every 20 ms of host time (10 % of the GPU) at a 30 % share.
TEST_F(Preload, AProgramBelowItsShareNeverWaits) {
  std::vector<std::string> ops = {"init", "ctx:0"};
  for (int i = 0; i < 30; ++i)
    ops.insert(ops.end(), {"launchpath:kernel:1", "sleep:20"});
  const auto r = run(ops, {{"CUDA_DEVICE_SM_LIMIT", "30"},
                           {"SIMGPU_KERNEL_NS", "2000000"},
                           {"LIBCUDA_LOG_LEVEL", "3"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const SmSummary s = sm_summary(r.err, 0);
  ASSERT_TRUE(s.found) << r.err;
  EXPECT_EQ(s.kernel, 30u);
  EXPECT_EQ(s.waited_ms, 0) << r.err;
  EXPECT_GE(s.charged_ms, 30 * 2.0 * 0.8) << r.err;
}

// Each process publishes the GPU time it was charged in its slot of the
// state file, where the node agent and `vgpu top` read it.
TEST_F(Preload, TheChargedGpuTimeIsPublishedInTheProcessSlot) {
  Child client = spawn({"init", "ctx:0", "launchpath:kernel:1", "sync", "launchpath:kernel:20",
                        "sync", "launchpath:kernel:1", "mark", "hold"},
                       {{"CUDA_DEVICE_SM_LIMIT", "50"},
                        {"SIMGPU_KERNEL_NS", "1000000"},
                        {"LIBCUDA_LOG_LEVEL", "3"}});
  ASSERT_TRUE(client.wait_for_line("op=mark")) << client.out();
  uint64_t published = 0;
  {
    const auto snap = region::read_snapshot(state_file());
    ASSERT_TRUE(snap) << snap.error().message;
    ASSERT_EQ(snap->slots.size(), 1u);
    ASSERT_TRUE(snap->slots[0].gpu_time_ns[0].has_value()) << "device 0's counter is not tagged";
    published = *snap->slots[0].gpu_time_ns[0];
    EXPECT_FALSE(snap->slots[0].gpu_time_ns[1].has_value()) << "nothing ran on device 1";
  }
  const auto done = client.finish();
  ASSERT_EQ(done.exit_code, 0) << done.err;
  const SmSummary s = sm_summary(done.err, 0);
  ASSERT_TRUE(s.found) << done.err;
  EXPECT_NEAR(static_cast<double>(published) / 1e6, s.charged_ms, 0.01) << done.err;
  EXPECT_GE(s.charged_ms, 22 * 1.0 * 0.8) << done.err;
}

// The share is the container's: two processes pacing at once share one
// clock (the .pace file beside the state file), so together they are held to
// 25 %, not 25 % each. 100 launches of 2 ms each, in both processes at once:
// about 400 ms charged in all, which takes 1.6 s at 25 % (0.8 s if each
// process paced itself). Lower bounds only: a slow machine only waits longer.
TEST_F(Preload, ProcessesOfAContainerShareOneShare) {
  const PairRun run =
      paced_pair("25", 100, [&] { EXPECT_TRUE(std::filesystem::exists(state_file() + ".pace")); });
  for (const std::string& err : run.errs) {
    EXPECT_NE(err.find("paced with the container's other processes"), std::string::npos) << err;
    EXPECT_EQ(sm_summary(err, 0).kernel, 101u);
  }
  // Each process charged its ~100 kernels (plus its first, measured alone).
  EXPECT_GE(run.charged_ms, 2 * 100 * 2.0 * 0.8);
  // Per process, ~800 ms would do; shared, the later one ends ~1.6 s after
  // the start. 0.75: the two starts differ by up to a poll of the go file.
  EXPECT_GE(run.longest_ms, 0.75 * (run.charged_ms * 100 / 25.0 - 20.0))
      << "charged " << run.charged_ms << " ms in all";
}

// Where no pace clock file can be made (a directory holds its name), each
// process fails closed: it paces itself to the share divided among the
// container's processes, and says so.
TEST_F(Preload, UnusablePaceFileLeavesEachProcessPacingToItsPart) {
  std::filesystem::create_directories(state_file() + ".pace/x");
  const auto r = run({"init", "ctx:0", "launchpath:kernel:1", "sync", "launchpath:kernel:40"},
                     {{"CUDA_DEVICE_SM_LIMIT", "25"},
                      {"SIMGPU_KERNEL_NS", "2000000"},
                      {"LIBCUDA_LOG_LEVEL", "3"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("each process of this container paces itself to the SM share divided "
                       "among the container's processes"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("paced by this process alone at 25%"), std::string::npos) << r.err;
  const SmSummary s = sm_summary(r.err, 0);
  ASSERT_TRUE(s.found) << r.err;
  EXPECT_GT(s.waited_ms, 0) << r.err;
}

// A tenant breaks the pace clock file before its processes start, so that
// each would pace alone and take the whole share: the file is replaced by a
// fresh one and both processes still share one clock (25 % together).
TEST_F(Preload, ABrokenPaceFileIsRepairedAndStillShared) {
  std::ofstream(state_file() + ".pace") << "x";
  const PairRun run = paced_pair(
      "25", 100, [&] { EXPECT_EQ(std::filesystem::file_size(state_file() + ".pace"), 1088u); });
  for (const std::string& err : run.errs)
    EXPECT_NE(err.find("paced with the container's other processes"), std::string::npos) << err;
  EXPECT_GE(run.longest_ms, 0.75 * (run.charged_ms * 100 / 25.0 - 20.0))
      << "charged " << run.charged_ms;
}

// A tenant rewinds the shared clock over and over (it can write the file), or
// puts a fresh file in its place, so its processes' launches go sooner: each
// process notices the clock going back and paces itself to its part of the
// share (25 % each of two), so together they still get 50 %. (The simulated
// GPU gives each process an engine of its own, so had the tenant won, both
// would run at 50 % side by side and finish in half the time.)
TEST_F(Preload, ARewoundOrReplacedPaceClockGainsNothing) {
  for (const bool replace : {false, true}) {
    SCOPED_TRACE(replace ? "replaced" : "rewound");
    fresh_container();
    const std::string pace = state_file() + ".pace";
    std::atomic<bool> stop{false};
    std::thread tenant;
    const PairRun run = paced_pair("50", 250, [&] {
      tenant = std::thread([&] {
        while (!stop) {
          if (replace) {
            std::filesystem::remove(pace);
            std::ofstream(pace) << "";
          } else {
            // Every clock back to zero, as a process of the container could.
            std::fstream f(pace, std::ios::in | std::ios::out | std::ios::binary);
            const std::vector<char> zeros(16 * 64, 0);
            f.seekp(64);
            f.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(replace ? 50 : 1));
        }
      });
    });
    stop = true;
    tenant.join();
    for (const std::string& err : run.errs) {
      EXPECT_NE(err.find(replace ? "was replaced or broken; pacing on the file it names now"
                                 : "paces by itself to 25%"),
                std::string::npos)
          << err;
    }
    // At 50 % together the ~1 s charged take ~2 s (so every process looks
    // at the file at least once); half that had the tenant won.
    EXPECT_GE(run.longest_ms, 0.8 * (run.charged_ms * 100 / 50.0 - 20.0))
        << "charged " << run.charged_ms;
  }
}

// A container on two GPUs gates them in the same windows (the ranks of a
// collective run together: tests/vgpu/limiter/duty_gate_test.cpp); one with
// one GPU has nothing to be in phase with.
TEST_F(Preload, AContainerOnTwoGpusGatesThemInTheSameWindows) {
  const Env env = {{"CUDA_DEVICE_SM_LIMIT", "30"}, {"LIBCUDA_LOG_LEVEL", "3"}};
  auto r = run({"init", "ctx:0", "launchpath:kernel:2", "ctx:1", "launchpath:kernel:2"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("device 1: while the container's 1 other GPU(s) run too, launches go in "
                       "the same windows on all of them (30% of every 100 ms)"),
            std::string::npos)
      << r.err;
  fresh_container();
  r = run({"init", "ctx:0", "launchpath:kernel:2"}, {{"CUDA_DEVICE_SM_LIMIT", "30"},
                                                     {"LIBCUDA_LOG_LEVEL", "3"},
                                                     {"SIMGPU_STATE", dir_.file("one-gpu.state")},
                                                     {"SIMGPU_DEVICES", kGpuA + ":80g"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("same windows"), std::string::npos) << r.err;
}

// On several GPUs the gate counts collectives' kernels, known by name through
// the driver (cuFuncGetName), and nothing else; the count is in the pace file,
// where the device's peers read it.
TEST_F(Preload, OnTwoGpusOnlyCollectivesAreCounted) {
  const Env env = {{"CUDA_DEVICE_SM_LIMIT", "30"}, {"LIBCUDA_LOG_LEVEL", "3"}};
  const auto r =
      run({"init", "ctx:0", "libload:1m", "liblaunch:ncclDevKernel_AllReduce_Sum_f32_RING_LL",
           "liblaunch:_ZN4vllm25cross_device_reduce_1stageIfLi2EEEvv",
           "liblaunch:ampere_sgemm_128x64_tn", "launchpath:kernel:2"},
          env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("with 1 other GPU(s): 2 collectives,"), std::string::npos) << r.err;
  std::ifstream pace(state_file() + ".pace", std::ios::binary);
  int64_t counted = -1;
  pace.seekg(80);  // device 0's `collectives` (docs/state-file.md)
  pace.read(reinterpret_cast<char*>(&counted), sizeof counted);
  EXPECT_EQ(counted, 2);
}

TEST_F(Preload, CapturedLaunchesAreNotCharged) {
  for (const std::string& via : kRoutes) {
    SCOPED_TRACE(via);
    fresh_container();
    // Every way to begin a capture; the second one also launches twice into
    // another (not capturing) stream meanwhile, and those are charged.
    const auto r = run({"--via=" + via, "init", "ctx:0", "capture:20:v1", "capture:20:v2:2",
                        "capture:20:tograph", "launchpath:kernel:3"},
                       {{"CUDA_DEVICE_SM_LIMIT", "30"}, {"LIBCUDA_LOG_LEVEL", "3"}});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const std::string op : {"capture:20:v1", "capture:20:v2:2", "capture:20:tograph"}) {
      SCOPED_TRACE(op);
      const Line l = find_op(r.out, op);
      EXPECT_EQ(l.at("rc"), "0") << r.out;
      EXPECT_EQ(num(l, "captured"), 20u);
      EXPECT_EQ(num(l, "ran"), op == "capture:20:v2:2" ? 2u : 0u);
      EXPECT_EQ(num(l, "records"), 0u) << "no sampling while a capture is in progress";
    }
    EXPECT_EQ(num(find_op(r.out, "launchpath:kernel:3"), "ran"), 3u);
    const SmSummary s = sm_summary(r.err, 0);
    ASSERT_TRUE(s.found) << r.err;
    EXPECT_EQ(s.kernel, 5u) << "the 2 launches beside a capture and the 3 after it";
    EXPECT_EQ(s.launches(), 5u);
  }
}

// During a global-mode capture, cuEventQuery from any thread invalidates the
// capture (the driver's capture-unsafe calls). A launch that has to wait for
// its share while another stream captures must not poll its samples then.
TEST_F(Preload, PacedLaunchBesideACaptureLeavesTheCaptureValid) {
  const auto r = run(
      {"init", "ctx:0", "launchpath:kernel:3", "sync", "launchpath:kernel:12", "capture:2:v2:5"},
      {{"CUDA_DEVICE_SM_LIMIT", "25"},
       {"SIMGPU_KERNEL_NS", "2000000"},
       {"LIBCUDA_LOG_LEVEL", "3"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Line l = find_op(r.out, "capture:2:v2:5");
  // Precondition: 5 launches charged ~2 ms at 25 % had to wait (~8 ms each),
  // the kernel measured by the first three and the burst used by the next 12.
  ASSERT_GE(ms(l), 10.0) << "the launches beside the capture did not wait:\n" << r.out;
  EXPECT_EQ(num(l, "queries"), 0u) << "cuEventQuery while the capture was in progress";
  EXPECT_EQ(l.at("end"), "0") << "the capture was invalidated (901):\n" << r.out;
  EXPECT_EQ(num(l, "ran"), 5u);
  const SmSummary s = sm_summary(r.err, 0);
  EXPECT_EQ(s.kernel, 20u) << "the 5 launches beside the capture are still charged";
}

// A small kernel's launches go light in batches on the legacy stream; a
// batch still open when a blocking stream starts capturing is charged
// without touching the GPU (an event recorded on the legacy stream then
// would join the capture implicitly, which the driver refuses by
// invalidating it).
TEST_F(Preload, ABatchOpenOnTheLegacyStreamLeavesACaptureValid) {
  std::vector<std::string> ops = {"init", "ctx:0"};
  for (int i = 0; i < 4; ++i)
    ops.insert(ops.end(), {"launchpath:kernel:1", "sync", "sleep:2"});
  ops.insert(ops.end(), {"launchpath:kernel:40", "capture:2:v2:1"});
  const auto r = run(
      ops,
      {{"CUDA_DEVICE_SM_LIMIT", "30"}, {"SIMGPU_KERNEL_NS", "5000"}, {"LIBCUDA_LOG_LEVEL", "3"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Line l = find_op(r.out, "capture:2:v2:1");
  EXPECT_EQ(l.at("end"), "0") << "the capture was invalidated (901):\n" << r.out;
  EXPECT_EQ(num(l, "captured"), 2u);
  EXPECT_EQ(num(l, "ran"), 1u);
  const SmSummary s = sm_summary(r.err, 0);
  ASSERT_TRUE(s.found) << r.err;
  EXPECT_EQ(s.kernel, 45u) << "every launch outside the capture is charged, batched ones too";
}

TEST_F(Preload, DisabledPolicyChargesNothing) {
  const auto r = run({"init", "ctx:0", "launchpath:kernel:5", "launchpath:graph:2"},
                     {{"CUDA_DEVICE_SM_LIMIT", "30"},
                      {"GPU_CORE_UTILIZATION_POLICY", "disable"},
                      {"LIBCUDA_LOG_LEVEL", "3"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(rc(r.out, "launchpath:kernel:5"), 0);
  EXPECT_EQ(num(find_op(r.out, "launchpath:kernel:5"), "ran"), 5u);
  EXPECT_EQ(num(find_op(r.out, "launchpath:kernel:5"), "records"), 0u) << "nothing sampled";
  EXPECT_EQ(num(find_op(r.out, "launchpath:graph:2"), "records"), 0u);
  const SmSummary s = sm_summary(r.err, 0);  // no line, or one that charged nothing
  EXPECT_EQ(s.launches(), 0u) << r.err;
  EXPECT_EQ(s.charged_ms, 0) << r.err;
}

// Under `default` the share is enforced while the node agent's switch says
// the GPU is contended; while it is not, launches are still charged (and
// published) but never wait.
TEST_F(Preload, DefaultPolicyFollowsTheUtilizationSwitch) {
  struct Case {
    std::string policy;
    int32_t utilization_switch;  // what the node agent wrote
    bool paced;
  };
  for (const Case& c : std::vector<Case>{{"default", 0, false},
                                         {"default", 1, true},
                                         {"force", 0, true},
                                         {test::kUnset, 0, false}}) {  // unset: default
    SCOPED_TRACE(c.policy + " with utilization_switch " + std::to_string(c.utilization_switch));
    fresh_container();
    std::filesystem::remove(dir_.file("go"));
    // 40 ms of 2 ms kernels at 30 %: paced, they take over 100 ms.
    Child client = spawn({"init", "ctx:0", "mark", "await:" + dir_.file("go"),
                          "launchpath:kernel:20", "sync", "launchpath:kernel:20", "mark", "hold"},
                         {{"CUDA_DEVICE_SM_LIMIT", "30"},
                          {"GPU_CORE_UTILIZATION_POLICY", c.policy},
                          {"SIMGPU_KERNEL_NS", "2000000"},
                          {"LIBCUDA_LOG_LEVEL", "3"}});
    ASSERT_TRUE(client.wait_for_line("op=mark")) << client.out();
    {
      auto region = region::Region::open(state_file(), region::OpenOptions{.create = false});
      ASSERT_TRUE(region);
      EXPECT_EQ(region->utilization_switch(), 1) << "the file starts enforcing";
      region->set_utilization_switch(c.utilization_switch);
    }
    touch("go");
    ASSERT_TRUE(client.wait_for_line("op=mark")) << client.out();
    const auto done = client.finish();
    const Line l = find_op(done.out, "launchpath:kernel:20", 1);
    EXPECT_EQ(l.at("rc"), "0");
    EXPECT_EQ(num(l, "ran"), 20u);
    const SmSummary s = sm_summary(done.err, 0);
    ASSERT_TRUE(s.found) << done.err;
    EXPECT_EQ(s.kernel, 40u) << "charged whether paced or not";
    EXPECT_GT(s.samples, 0u);
    EXPECT_GE(s.charged_ms, 40 * 2.0 * 0.8) << done.err;
    if (c.paced) {
      EXPECT_GT(s.waited_ms, 0) << done.err;
    } else {
      EXPECT_EQ(s.waited_ms, 0) << done.err;
    }
  }
}

TEST_F(Preload, InvalidPolicyIsReportedAndLaunchesStillWork) {
  const auto r =
      run({"init", "ctx:0", "launchpath:kernel:5"}, {{"CUDA_DEVICE_SM_LIMIT", "30"},
                                                     {"GPU_CORE_UTILIZATION_POLICY", "sometimes"},
                                                     {"LIBCUDA_LOG_LEVEL", "3"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  bool reported = false;
  std::istringstream in(r.err);
  for (std::string line; std::getline(in, line);) {
    if (line.find("ERROR:") != std::string::npos &&
        line.find("GPU_CORE_UTILIZATION_POLICY=sometimes") != std::string::npos)
      reported = true;
  }
  EXPECT_TRUE(reported) << r.err;
  EXPECT_EQ(rc(r.out, "launchpath:kernel:5"), 0);
  EXPECT_EQ(num(find_op(r.out, "launchpath:kernel:5"), "ran"), 5u);
  // Falls back to the default policy, which enforces while the file says so.
  EXPECT_EQ(sm_summary(r.err, 0).kernel, 5u) << r.err;
}

TEST_F(Preload, NoSmLimitLaunchesPassThroughAndMarkTheContainerActive) {
  Child client = spawn({"init", "ctx:0", "mark", "await:" + dir_.file("go"), "launchpath:kernel:3",
                        "launchpath:graph:2", "launchpath:ex_ptsz:2", "mark", "hold"},
                       {{"CUDA_DEVICE_MEMORY_LIMIT", "1g"}, {"LIBCUDA_LOG_LEVEL", "3"}});
  ASSERT_TRUE(client.wait_for_line("op=mark")) << client.out();
  auto region = region::Region::open(state_file(), region::OpenOptions{.create = false});
  ASSERT_TRUE(region);
  region->set_recent_kernel(0);  // the node agent: idle for a while
  region->set_last_kernel_time(0);
  touch("go");
  ASSERT_TRUE(client.wait_for_line("op=mark")) << client.out();
  EXPECT_EQ(region->recent_kernel(), 2) << "a launch marks the container active";
  EXPECT_GE(region->last_kernel_time(), static_cast<uint64_t>(::time(nullptr)) - 60)
      << "a launch records when the container last ran a kernel";
  const auto done = client.finish();
  ASSERT_EQ(done.exit_code, 0) << done.err;
  for (const auto& [op, n] : std::vector<std::pair<std::string, uint64_t>>{
           {"launchpath:kernel:3", 3}, {"launchpath:graph:2", 2}, {"launchpath:ex_ptsz:2", 2}}) {
    SCOPED_TRACE(op);
    const Line l = find_op(done.out, op);
    EXPECT_EQ(l.at("rc"), "0");
    EXPECT_EQ(l.at("lib"), "libvgpu.so");
    EXPECT_EQ(num(l, "ran"), n);
    EXPECT_EQ(num(l, "records"), 0u) << "nothing to sample without a share";
  }
  EXPECT_EQ(done.err.find("SM share"), std::string::npos) << done.err;
}

TEST_F(Preload, HighPriorityTaskHoldsLaunchesUntilIdle) {
  for (const Env& limits :
       std::vector<Env>{{{"CUDA_DEVICE_MEMORY_LIMIT", "1g"}}, {{"CUDA_DEVICE_SM_LIMIT", "30"}}}) {
    SCOPED_TRACE(limits[0].first);
    fresh_container();
    std::filesystem::remove(dir_.file("go"));
    Env e = limits;
    e.push_back({"LIBCUDA_LOG_LEVEL", "3"});
    Child client = spawn(
        {"init", "ctx:0", "mark", "await:" + dir_.file("go"), "launchpath:kernel:1", "hold"}, e);
    ASSERT_TRUE(client.wait_for_line("op=mark")) << client.out();
    auto region = region::Region::open(state_file(), region::OpenOptions{.create = false});
    ASSERT_TRUE(region);
    region->set_recent_kernel(-1);  // the node agent: a high-priority task is busy
    touch("go");
    EXPECT_FALSE(client.wait_for_line("op=launchpath", std::chrono::milliseconds(300)))
        << "the launch went ahead while the GPU was taken:\n"
        << client.out();
    region->set_recent_kernel(0);  // idle again
    ASSERT_TRUE(client.wait_for_line("op=launchpath", std::chrono::seconds(10))) << client.out();
    EXPECT_EQ(rc(client.out(), "launchpath:kernel:1"), 0);
    EXPECT_EQ(num(find_op(client.out(), "launchpath:kernel:1"), "ran"), 1u);
    EXPECT_EQ(region->recent_kernel(), 2);
    const auto done = client.finish();
    EXPECT_NE(done.err.find("high-priority"), std::string::npos) << done.err;
  }
}

TEST_F(Preload, FailedLaunchReturnsTheDriversErrorUnchanged) {
  const std::vector<std::string> ops = {"init", "ctx:0", "launchpath:kernel:2",
                                        "launchpath:graph_ptsz:3", "launchpath:ex:2"};
  const Env fail = {{"SIMGPU_FAIL", "cuLaunchKernel:always,cuGraphLaunch_ptsz:2"}};
  auto with = [&](Env e) {
    e.insert(e.end(), fail.begin(), fail.end());
    return e;
  };
  const auto bare = test::run_process(argv(ops), env(with({{"LD_PRELOAD", ""}})));
  ASSERT_EQ(bare.exit_code, 0) << bare.err;
  EXPECT_EQ(rc(bare.out, "launchpath:kernel:2"), 701);  // CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
  for (const Env& limits :
       std::vector<Env>{{{"CUDA_DEVICE_SM_LIMIT", "30"}}, {{"CUDA_DEVICE_MEMORY_LIMIT", "1g"}}}) {
    SCOPED_TRACE(limits[0].first);
    fresh_container();
    const auto r = run(ops, with(limits));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const std::string op : {"launchpath:kernel:2", "launchpath:graph_ptsz:3"}) {
      EXPECT_EQ(rc(r.out, op), rc(bare.out, op)) << op;
      EXPECT_EQ(find_op(r.out, op)["lib"], "libvgpu.so");
    }
    EXPECT_EQ(num(find_op(r.out, "launchpath:kernel:2"), "plain"), 1u) << "stops at the failure";
    EXPECT_EQ(num(find_op(r.out, "launchpath:graph_ptsz:3"), "ptsz"), 2u);
    EXPECT_EQ(rc(r.out, "launchpath:ex:2"), 0) << "the other paths are unaffected";
    EXPECT_EQ(num(find_op(r.out, "launchpath:ex:2"), "ran"), 2u);
  }
}

// ----------------------------------------------------------------- hygiene

TEST_F(Preload, NoSideEffectsOnTheProgram) {
  const auto r = run(
      {"umask", "signals", "init", "ctx:0", "alloc:1m", "meminfo", "nvml:0", "umask", "signals"},
      {{"CUDA_DEVICE_MEMORY_LIMIT", "1g"}});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(find_op(r.out, "umask", 0)["umask"], find_op(r.out, "umask", 1)["umask"]);
  Line before = find_op(r.out, "signals", 0), after = find_op(r.out, "signals", 1);
  before.erase("ms");
  after.erase("ms");
  EXPECT_EQ(before, after);
  // Upstream installs SIGUSR1/SIGUSR2 handlers over the program's; we never do.
  // (Other signals may legitimately be owned by a sanitizer runtime.)
  EXPECT_EQ(after.at("sig" + std::to_string(SIGUSR1)), "default");
  EXPECT_EQ(after.at("sig" + std::to_string(SIGUSR2)), "default");
  EXPECT_EQ(r.err, "");
}

TEST_F(Preload, RtldNextStillMeansNextAfterTheCaller) {
  const auto r = test::run_process({NEXT_PROBE}, env({{"CUDA_DEVICE_MEMORY_LIMIT", "1g"}}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "next=target\n");
}

}  // namespace
}  // namespace hami::vgpu
