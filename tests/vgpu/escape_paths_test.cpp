// Device memory that used to escape every count (issue: hostile tenants,
// round 2), each tried by a tenant under a 2 GiB limit from the device
// plugin's limits file: VMM memory released while still mapped, handles
// imported from another process, cuCtxSetLimit's stack and malloc heap,
// module globals, and graph allocation nodes. Each attack held far more than
// the limit before; now the memory is charged when the driver commits it
// and what does not fit is refused with CUDA_ERROR_OUT_OF_MEMORY. The
// simulated driver commits memory where driver 580 does
// (tests/gpu/results/driver-facts-h100.txt).
#include <gtest/gtest.h>

#include <fstream>

#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"
#include "vgpu/client_env.hpp"
#include "vgpu/client_output.hpp"

namespace hami::vgpu {
namespace {

using test::Env;
using test::find_op;
using test::num;
using test::rc_of;

constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t kLimit = 2048 * MiB;
constexpr int kOutOfMemory = 2;  // CUDA_ERROR_OUT_OF_MEMORY
const std::string kGpuA = "GPU-5a3e0000-0000-4000-8000-000000000000";

class EscapePaths : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.file("limits"))
        << "CUDA_DEVICE_MEMORY_LIMIT_0=2g\n"
        << "CUDA_DEVICE_MEMORY_SHARED_CACHE=" << dir_.file("vgpu.cache") << "\n"
        << "VGPU_DEVICE_UUID_0=" << kGpuA << "\n";
  }
  Env env(const Env& extra = {}) const {
    return test::with_overrides(test::client_env(dir_, {{"VGPU_LIMITS_FILE", dir_.file("limits")}}),
                                extra);
  }
  std::string run(std::vector<std::string> ops, const Env& extra = {}) const {
    ops.insert(ops.begin(), CUDA_CLIENT);
    auto r = test::run_process(ops, env(extra));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  }
  // What the (simulated) driver says this process holds on GPU 0, as the last
  // "procmem:0" line reports it.
  static uint64_t held(const std::string& out) {
    uint64_t last = 0;
    for (const auto& l : test::parse_lines(out))
      if (l.count("op") && l.at("op") == "procmem:0") last = num(l, "used");
    return last;
  }

  test::TempDir dir_;
};

// cuMemCreate, map, cuMemRelease: the driver frees at the last unmap, so the
// charge must stay until then. Eight rounds of 768 MiB held 6 GiB before.
TEST_F(EscapePaths, VmmMemoryReleasedWhileMappedStaysCharged) {
  const std::string out =
      run({"init", "ctx:0", "vmmmap:0:768m", "free:0", "vmmmap:0:768m", "free:1", "vmmmap:0:768m",
           "procmem:0", "unmap:0", "vmmmap:0:768m", "procmem:0"});
  EXPECT_EQ(rc_of(out, "vmmmap:0:768m", 1), 0);
  EXPECT_EQ(rc_of(out, "vmmmap:0:768m", 2), kOutOfMemory);
  EXPECT_EQ(num(find_op(out, "procmem:0", 0), "used"), 2 * 768 * MiB);
  EXPECT_EQ(rc_of(out, "vmmmap:0:768m", 3), 0) << "the last unmap gives the charge back";
  EXPECT_LE(held(out), kLimit);
}

// A handle imported from another process keeps its memory alive after the
// creator lets go: the importer is charged at its mapping, so the creator
// cannot hand memory to a sibling and allocate again. The descriptor goes
// from one process to the other over a unix socket, as NCCL's does.
TEST_F(EscapePaths, ImportedVmmMemoryIsChargedToTheImporter) {
  const std::string sock = dir_.file("fd.sock");
  test::Child creator = test::Child::spawn(
      {CUDA_CLIENT, "init", "ctx:0", "vmmmap:0:1536m", "export", "sendfd:" + sock, "mark", "hold"},
      env());
  const std::string out = run({"init", "ctx:0", "recvfd:" + sock, "importmap:1536m", "procmem:0"});
  EXPECT_EQ(rc_of(out, "recvfd:" + sock), 0) << out;
  EXPECT_EQ(rc_of(out, "importmap:1536m"), kOutOfMemory)
      << "1.5 GiB held by the creator, 1.5 GiB more does not fit";
  EXPECT_TRUE(creator.wait_for_line("op=mark")) << creator.out();
  creator.close_stdin();
  EXPECT_EQ(creator.finish().exit_code, 0);
}

// The stack limit commits (size - 1 KiB) per resident thread at once: 32 KiB
// took 8 GiB on an H100.
TEST_F(EscapePaths, AStackLimitBeyondTheLimitIsRefused) {
  const std::string out =
      run({"init", "ctx:0", "setlimit:stack:32768", "procmem:0", "setlimit:stack:4096", "charged:0",
           "procmem:0", "setlimit:stack:1024", "charged:0"});
  EXPECT_EQ(rc_of(out, "setlimit:stack:32768"), kOutOfMemory);
  EXPECT_EQ(num(find_op(out, "procmem:0", 0), "used"), 0u);
  EXPECT_EQ(rc_of(out, "setlimit:stack:4096"), 0);
  const uint64_t stack = (4096 - 1024) * 132ull * 2048;
  EXPECT_EQ(num(find_op(out, "charged:0", 0), "total"), stack);
  EXPECT_EQ(num(find_op(out, "procmem:0", 1), "used"), stack);
  EXPECT_EQ(num(find_op(out, "charged:0", 1), "total"), 0u) << "a smaller stack gives back";
}

// The malloc heap is made at the next launch: it is charged when set.
TEST_F(EscapePaths, AMallocHeapBeyondTheLimitIsRefused) {
  const std::string out = run({"init", "ctx:0", "setlimit:heap:6g", "launch", "procmem:0",
                               "setlimit:heap:1g", "launch", "procmem:0", "charged:0"});
  EXPECT_EQ(rc_of(out, "setlimit:heap:6g"), kOutOfMemory);
  EXPECT_EQ(num(find_op(out, "procmem:0", 0), "used"), 0u);
  EXPECT_EQ(rc_of(out, "setlimit:heap:1g"), 0);
  EXPECT_EQ(num(find_op(out, "charged:0"), "total"), num(find_op(out, "procmem:0", 1), "used"));
  EXPECT_LE(held(out), kLimit);
}

// Module globals are committed at load: 4 modules of 1.5 GiB held 6 GiB.
TEST_F(EscapePaths, ModuleGlobalsAreChargedAtLoad) {
  const std::string out = run({"init", "ctx:0", "modload:1536m", "modload:1536m", "modload:1536m",
                               "modload:1536m", "procmem:0", "modunload", "charged:0"});
  EXPECT_EQ(rc_of(out, "modload:1536m", 0), 0);
  EXPECT_EQ(rc_of(out, "modload:1536m", 1), kOutOfMemory);
  EXPECT_LE(held(out), kLimit);
  EXPECT_EQ(num(find_op(out, "charged:0"), "total"), 0u);
}

// A library (lazy loading, the CUDA runtime's way) commits its globals at
// first use in a context; eagerly loaded, at load.
TEST_F(EscapePaths, LibraryGlobalsAreChargedWhenTheDriverCommitsThem) {
  std::string out = run({"init", "ctx:0", "libload:1536m", "charged:0", "libkernel:k", "charged:0",
                         "libkernel:k2", "libload:1536m", "libkernel:k", "procmem:0", "alloc:2m",
                         "libunload", "charged:0", "alloc:2m"});
  EXPECT_EQ(num(find_op(out, "charged:0", 0), "total"), 0u) << "nothing loaded yet";
  EXPECT_EQ(rc_of(out, "libkernel:k", 0), 0);
  EXPECT_EQ(num(find_op(out, "charged:0", 1), "total"), 1536 * MiB);
  EXPECT_EQ(rc_of(out, "libkernel:k", 1), kOutOfMemory) << "the second library does not fit";
  EXPECT_EQ(rc_of(out, "alloc:2m", 0), kOutOfMemory) << "over the limit until it is unloaded";
  EXPECT_EQ(num(find_op(out, "charged:0", 2), "total"), 1536 * MiB);
  EXPECT_EQ(rc_of(out, "alloc:2m", 1), 0);

  out = run({"init", "ctx:0", "libload:1536m", "libload:1536m", "procmem:0"},
            {{"CUDA_MODULE_LOADING", "EAGER"}});
  EXPECT_EQ(rc_of(out, "libload:1536m", 1), kOutOfMemory);
  EXPECT_LE(held(out), kLimit);
}

// Memory no hook sees being committed (here a library the CUDA runtime's
// lazy loading loads inside cuLaunchKernel) is charged from what NVML says
// the driver holds for the process, at the next allocation; when it is given
// back, the charge follows once two looks agree.
TEST_F(EscapePaths, MemoryNoHookSeesIsChargedFromWhatTheDriverHolds) {
  const std::string out =
      run({"init", "ctx:0", "libload:1536m", "liblaunch:k", "procmem:0", "alloc:768m", "libunload",
           "sleep:120", "meminfo", "sleep:120", "meminfo", "alloc:768m", "procmem:0"});
  EXPECT_EQ(num(find_op(out, "procmem:0", 0), "used"), 1536 * MiB) << "loaded in the launch";
  EXPECT_EQ(rc_of(out, "alloc:768m", 0), kOutOfMemory);
  EXPECT_EQ(rc_of(out, "alloc:768m", 1), 0) << "given back once the library is gone";
  EXPECT_LE(held(out), kLimit);
}

// A 6 GiB graph allocation node: refused before the graph makes it real.
TEST_F(EscapePaths, AGraphAllocationNodeBeyondTheLimitIsRefused) {
  const std::string out =
      run({"init", "ctx:0", "gnode:0:6g", "ginst", "glaunch", "gupload", "procmem:0"});
  EXPECT_EQ(rc_of(out, "glaunch"), kOutOfMemory);
  EXPECT_EQ(rc_of(out, "gupload"), kOutOfMemory);
  EXPECT_EQ(held(out), 0u);
}

}  // namespace
}  // namespace hami::vgpu
