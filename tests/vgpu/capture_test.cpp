// Stream capture and graph memory under libvgpu.so, against the simulated
// driver, which follows driver 580's capture rules and graph memory
// (tests/gpu/results/driver-facts-h100.txt). The library must never make a
// call that invalidates a program's capture, must not hide the program's own
// illegal calls, and must charge what a graph allocates when the driver makes
// it real.
#include <gtest/gtest.h>

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
constexpr int kOutOfMemory = 2;              // CUDA_ERROR_OUT_OF_MEMORY
constexpr int kCaptureUnsupported = 900;     // CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
constexpr uint64_t kCaptureActive = 1;       // CU_STREAM_CAPTURE_STATUS_ACTIVE
constexpr uint64_t kCaptureInvalidated = 2;  // CU_STREAM_CAPTURE_STATUS_INVALIDATED

class Capture : public ::testing::Test {
 protected:
  Env env(const Env& extra = {}) const {
    return test::with_overrides(test::client_env(dir_, {{"CUDA_DEVICE_MEMORY_LIMIT", "4g"}}),
                                extra);
  }
  std::string run(std::vector<std::string> ops, const Env& extra = {}) const {
    ops.insert(ops.begin(), CUDA_CLIENT);
    auto r = test::run_process(ops, env(extra));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  }

  test::TempDir dir_;
};

// PyTorch's cudaMallocAsync backend capturing a step that allocates and
// frees: the pool is already charged (an allocation before the capture), so
// the library used to re-read its reservation inside the capture, which the
// driver counts as unsafe: the capture was invalidated and PyTorch aborted.
TEST_F(Capture, StreamOrderedAllocationsInACaptureLeaveItValid) {
  for (const char* via : {"--via=link", "--via=procaddr"}) {
    for (const char* limit : {"4g", ""}) {  // with a limit, and with only a state file
      SCOPED_TRACE(std::string(via) + " limit=" + limit);
      const std::string out =
          run({via, "init", "ctx:0", "async:64m", "gbegin", "galloc:512m", "meminfo", "nvml:0",
               "gstatus", "gfree", "gend", "ginst", "glaunch:2"},
              {{"CUDA_DEVICE_MEMORY_LIMIT", *limit ? limit : test::kUnset}});
      EXPECT_EQ(num(find_op(out, "gstatus"), "status"), kCaptureActive) << out;
      EXPECT_EQ(rc_of(out, "galloc:512m"), 0);
      EXPECT_EQ(rc_of(out, "gfree"), 0);
      EXPECT_EQ(rc_of(out, "gend"), 0);
      EXPECT_EQ(rc_of(out, "glaunch:2"), 0);
    }
  }
}

// In every capture mode the library's own queries are legal; the program's
// thread may be in any interaction mode too.
TEST_F(Capture, EveryModeAndThreadModeKeepsTheCaptureValid) {
  for (const char* mode : {"gbegin:global", "gbegin:thread", "gbegin:relaxed"}) {
    for (const char* thread : {"threadmode:global", "threadmode:thread"}) {
      SCOPED_TRACE(std::string(mode) + " " + thread);
      const std::string out = run({"init", "ctx:0", "async:64m", "pool:0:8m", thread, mode,
                                   "galloc:256m", "meminfo", "gfree", "gstatus", "gend"});
      EXPECT_EQ(num(find_op(out, "gstatus"), "status"), kCaptureActive) << out;
      EXPECT_EQ(rc_of(out, "gend"), 0);
    }
  }
}

// The library does not hide the program's own illegal calls: cuMemAlloc
// during a global capture is refused and breaks it, as without the library;
// in relaxed thread mode it is allowed (PyTorch's native allocator does so).
TEST_F(Capture, TheProgramsOwnUnsafeCallsAreTheDriversToJudge) {
  std::string out = run({"init", "ctx:0", "gbegin", "alloc:2m", "gstatus", "gend"});
  EXPECT_EQ(rc_of(out, "alloc:2m"), kCaptureUnsupported);
  EXPECT_EQ(num(find_op(out, "gstatus"), "status"), kCaptureInvalidated);

  out = run({"init", "ctx:0", "gbegin", "threadmode:relaxed", "alloc:2m", "gstatus",
             "threadmode:global", "gend", "charged:0"});
  EXPECT_EQ(rc_of(out, "alloc:2m"), 0);
  EXPECT_EQ(num(find_op(out, "gstatus"), "status"), kCaptureActive);
  EXPECT_EQ(rc_of(out, "gend"), 0);
  EXPECT_EQ(num(find_op(out, "charged:0"), "total"), 2 * MiB);
}

// Graph memory is real from the first launch, held across launches and after
// the graph is gone, and handed back by a trim: the charge follows the graph
// pool's reservation exactly.
TEST_F(Capture, GraphMemoryIsChargedFromFirstLaunchUntilTrim) {
  const std::string out =
      run({"init", "ctx:0", "gbegin", "galloc:512m", "gfree", "gend", "ginst", "charged:0",
           "glaunch", "charged:0", "graphmem:0", "glaunch:3", "charged:0", "gexecdestroy",
           "charged:0", "gtrim:0", "charged:0", "graphmem:0"});
  EXPECT_EQ(num(find_op(out, "charged:0", 0), "total"), 0u) << "nothing is real at instantiation";
  EXPECT_EQ(num(find_op(out, "charged:0", 1), "total"), 512 * MiB);
  EXPECT_EQ(num(find_op(out, "graphmem:0", 0), "reserved"), 512 * MiB);
  EXPECT_EQ(num(find_op(out, "charged:0", 2), "total"), 512 * MiB) << "charged once";
  EXPECT_EQ(num(find_op(out, "charged:0", 3), "total"), 512 * MiB) << "held until a trim";
  EXPECT_EQ(num(find_op(out, "charged:0", 4), "total"), 0u);
  EXPECT_EQ(num(find_op(out, "graphmem:0", 1), "reserved"), 0u);
}

// A graph whose allocations do not fit is refused before it runs: a clean
// out-of-memory from the launch (or the uploading instantiation), nothing
// made real, and the program carries on.
TEST_F(Capture, AGraphThatDoesNotFitIsRefusedBeforeItRuns) {
  std::string out = run({"init", "ctx:0", "gbegin", "galloc:3g", "gend", "ginst", "glaunch",
                         "graphmem:0", "charged:0", "alloc:256m"},
                        {{"CUDA_DEVICE_MEMORY_LIMIT", "2g"}});
  EXPECT_EQ(rc_of(out, "glaunch"), kOutOfMemory);
  EXPECT_EQ(num(find_op(out, "graphmem:0"), "reserved"), 0u);
  EXPECT_EQ(num(find_op(out, "charged:0"), "total"), 0u);
  EXPECT_EQ(rc_of(out, "alloc:256m"), 0);

  out = run({"init", "ctx:0", "gnode:0:3g", "ginst:upload", "graphmem:0"},
            {{"CUDA_DEVICE_MEMORY_LIMIT", "2g"}});
  EXPECT_EQ(rc_of(out, "ginst:upload"), kOutOfMemory);
  EXPECT_EQ(num(find_op(out, "graphmem:0"), "reserved"), 0u);

  out = run({"init", "ctx:0", "gnode:0:1g", "ginst:upload", "charged:0"},
            {{"CUDA_DEVICE_MEMORY_LIMIT", "2g"}});
  EXPECT_EQ(rc_of(out, "ginst:upload"), 0);
  EXPECT_EQ(num(find_op(out, "charged:0"), "total"), 1024 * MiB);
}

}  // namespace
}  // namespace hami::vgpu
