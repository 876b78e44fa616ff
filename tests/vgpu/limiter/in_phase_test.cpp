// Two ranks of a collective (NCCL's all-reduce, one process per GPU) paced to
// the same share, on a simulated clock: a step's kernel on either GPU ends
// only once both have started it (each spins until its peer arrives), and
// each rank charges what its kernels measure, spinning included, as the
// library does (the median of recent samples). Paced apart, one rank's
// kernels spin for the other's and the pair falls to a tenth of its share
// (the GPU saw 8.3 of 295 GB/s at a share of 30); paced in phase
// (in_phase_go, in_phase_wake: share_pacer.hpp), they hold it, and neither
// GPU is busy, spinning included, more than the share.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <deque>
#include <vector>

#include "vgpu/limiter/share_pacer.hpp"

namespace hami::vgpu::limiter {
namespace {

constexpr int64_t us = 1'000;
constexpr int64_t ms = 1'000'000;
constexpr int64_t kBurst = 20 * ms;  // LimiterOptions::burst_ns
constexpr int64_t kBatch = 2 * ms;   // how far past its time a lone waiter wakes
constexpr int64_t kSpan = 4'000 * ms;

struct PairResult {
  double throughput;           // steps per second, as a fraction of bare
  std::array<double, 2> busy;  // each GPU's time spent in kernels, fraction of the span
};

// `in_phase`: as the library paces a container on several GPUs; else each
// rank on its own, waking at go + kBatch.
PairResult run_pair(uint32_t percent, int64_t work, int64_t offset, bool in_phase) {
  alignas(8) static int64_t clocks[2];
  clocks[0] = clocks[1] = 0;
  SharePacer p0(&clocks[0]), p1(&clocks[1]);
  std::array<SharePacer*, 2> pacer{&p0, &p1};
  std::array<int64_t, 2> host{0, offset}, cost{work, work}, gpu_free{0, 0};
  std::array<double, 2> busy{0, 0};
  std::array<std::deque<int64_t>, 2> measured;
  int64_t steps = 0;
  for (;;) {
    std::array<int64_t, 2> start{};
    for (int d = 0; d < 2; ++d) {
      int64_t now = host[static_cast<size_t>(d)];
      const int64_t c = cost[static_cast<size_t>(d)];
      int64_t go = pacer[static_cast<size_t>(d)]->admit(c, percent, now, kBurst);
      if (in_phase) go = in_phase_go(go, clocks[1 - d], occupancy_ns(c, percent), kBurst);
      if (go - now >= 50 * us) now = in_phase ? in_phase_wake(go, kBurst) : go + kBatch;
      host[static_cast<size_t>(d)] = now + 5 * us;  // the launch's own host time
      start[static_cast<size_t>(d)] = std::max(now, gpu_free[static_cast<size_t>(d)]);
    }
    const int64_t end = std::max(start[0], start[1]) + work;
    if (end > kSpan) break;
    ++steps;
    for (size_t d = 0; d < 2; ++d) {
      gpu_free[d] = end;
      busy[d] += static_cast<double>(end - start[d]);
      measured[d].push_back(end - start[d]);
      // The cost is the median of the last samples, which come back a few
      // launches late.
      if (measured[d].size() > 24) measured[d].pop_front();
      if (measured[d].size() > 8) {
        std::vector<int64_t> v(measured[d].begin(), measured[d].end() - 8);
        std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
        cost[d] = v[v.size() / 2];
      }
    }
  }
  const double bare = static_cast<double>(kSpan) / static_cast<double>(work);
  return {static_cast<double>(steps) / bare,
          {busy[0] / static_cast<double>(kSpan), busy[1] / static_cast<double>(kSpan)}};
}

// Kernels of 0.05 to 5 ms, the ranks starting up to 3 ms apart.
TEST(InPhase, CollectivesHoldTheirShare) {
  for (uint32_t percent : {30u, 50u, 70u, 90u}) {
    for (int64_t work : {50 * us, 400 * us, 900 * us, 1800 * us, 3 * ms, 5 * ms}) {
      for (int64_t offset : {0 * ms, 1 * ms, 3 * ms}) {
        SCOPED_TRACE(testing::Message() << percent << "% of " << work / us << " us kernels, ranks "
                                        << offset / us << " us apart");
        const PairResult r = run_pair(percent, work, offset, true);
        EXPECT_GE(r.throughput, 0.9 * percent / 100.0);
        // Never more than the share: each GPU's kernel time, spinning too.
        for (double b : r.busy)
          EXPECT_LE(b, percent / 100.0 + 0.03);
      }
    }
  }
}

// What the library did before: each rank woke on its own, and the pair got a
// fraction of its share (the model's figure is close to the GPU's: 0.03).
TEST(InPhase, PacedApartTheyFallFarShort) {
  const PairResult apart = run_pair(30, 900 * us, 7 * us, false);
  EXPECT_LT(apart.throughput, 0.5 * 0.30);
  const PairResult together = run_pair(30, 900 * us, 7 * us, true);
  EXPECT_GE(together.throughput, 0.9 * 0.30);
}

TEST(InPhase, WaitsAsLongAsThePeerAndWakesOnTheSharedGrid) {
  EXPECT_EQ(in_phase_wake(41 * ms, 20 * ms), 60 * ms);
  EXPECT_EQ(in_phase_wake(60 * ms, 20 * ms), 60 * ms);
  // The peer's clock already holds its own launch of this step: 3 ms.
  EXPECT_EQ(in_phase_go(10 * ms, 40 * ms, 3 * ms, 20 * ms), 17 * ms);
  EXPECT_EQ(in_phase_go(30 * ms, 40 * ms, 3 * ms, 20 * ms), 30 * ms);
}

}  // namespace
}  // namespace hami::vgpu::limiter
