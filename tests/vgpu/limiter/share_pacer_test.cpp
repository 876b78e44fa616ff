#include "vgpu/limiter/share_pacer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace hami::vgpu::limiter {
namespace {

constexpr int64_t us = 1'000;
constexpr int64_t ms = 1'000'000;
constexpr int64_t s = 1'000'000'000;

// A caller that launches whenever the pacer lets it, sleeping until the time
// it is given: how many launches it makes in `span`.
int64_t greedy_launches(uint32_t percent, int64_t cost, int64_t span, int64_t burst) {
  SharePacer pacer;
  int64_t now = 0, n = 0;
  for (;;) {
    const int64_t go = pacer.admit(cost, percent, now, burst);
    now = std::max(now, go);
    if (now >= span) return n;
    ++n;
  }
}

TEST(SharePacer, LongRunRateIsThePercentOfWallTime) {
  constexpr int64_t kSpan = 2 * s, kBurst = 5 * ms;
  for (uint32_t p : {1u, 10u, 30u, 50u, 70u, 90u, 99u}) {
    for (int64_t cost : {3 * us, 216 * us, 5 * ms}) {
      const int64_t n = greedy_launches(p, cost, kSpan, kBurst);
      // The wall time the launches occupy is the span, plus the burst and at
      // most one launch.
      const int64_t occupied = cost * 100 / p;
      EXPECT_GE(n * occupied, kSpan) << p << "% of " << cost;
      EXPECT_LE(n * occupied, kSpan + kBurst + occupied) << p << "% of " << cost;
      // So the GPU time charged is p % of wall time (+ the burst: 0.25 % of 2 s).
      const double share = 100.0 * static_cast<double>(n * cost) / static_cast<double>(kSpan);
      EXPECT_NEAR(share, p, 0.05 + p * 0.0025 + 100.0 * static_cast<double>(cost) / kSpan)
          << p << "% of " << cost;
    }
  }
}

// A tenant rewinds the container's shared clock (it can write the file) to
// let its launches through sooner. A clock never runs backwards by itself, so
// each pacer that finds it earlier than the time it set last leaves it for a
// clock of its own, from that time; its owner then paces it to its part of
// the share (SmControl: the share over the container's processes).
TEST(SharePacer, ARewoundSharedClockGainsNothing) {
  constexpr int64_t kSpan = 2 * s, kBurst = 20 * ms, kCost = 100 * us;
  alignas(8) int64_t shared = 0;
  SharePacer a(&shared), b(&shared);
  int64_t now = 0, n = 0;
  for (int i = 0; now < kSpan; ++i) {
    SharePacer& p = i % 2 == 0 ? a : b;
    const uint32_t percent = p.clock_abandoned() ? 5 : 10;  // two processes
    now = std::max(now, p.admit(kCost, percent, now, kBurst));
    ++n;
    if (i % 3 == 0) std::atomic_ref<int64_t>(shared).store(0);
  }
  EXPECT_TRUE(a.clock_abandoned());
  EXPECT_TRUE(b.clock_abandoned());
  const double share = 100.0 * static_cast<double>(n * kCost) / static_cast<double>(kSpan);
  EXPECT_LE(share, 10.0 + 100.0 * kBurst / kSpan + 0.2);
  EXPECT_GE(share, 9.0);
}

// An honest clock is never left: two pacers sharing it, in any order.
TEST(SharePacer, AnHonestSharedClockIsKept) {
  alignas(8) int64_t shared = 0;
  SharePacer a(&shared), b(&shared);
  int64_t now = 0;
  for (int i = 0; i < 10000; ++i) {
    SharePacer& p = (i * 7919) % 3 == 0 ? a : b;
    now = std::max(now + 10 * us, p.admit(200 * us, 30, now, 20 * ms));
  }
  EXPECT_FALSE(a.clock_abandoned());
  EXPECT_FALSE(b.clock_abandoned());
}

TEST(SharePacer, LetsABurstThroughAtOnce) {
  SharePacer pacer;
  // 100 us at 50 % occupies 200 us; work reaching up to 5 ms ahead starts at once.
  int at_once = 0;
  while (pacer.admit(100 * us, 50, 0, 5 * ms) <= 0)
    ++at_once;
  EXPECT_EQ(at_once, 26);  // starts 0, 200 us, ..., 5 ms
  EXPECT_EQ(pacer.backlog_ns(0), 27 * 200 * us);
  EXPECT_EQ(pacer.admit(100 * us, 50, 0, 5 * ms), 5400 * us - 5 * ms);  // the 28th: 400 us wait
  EXPECT_EQ(pacer.backlog_ns(1 * s), 0);
}

TEST(SharePacer, IdleEarnsNoCreditBeyondTheBurst) {
  SharePacer pacer;
  for (int i = 0; i < 10; ++i)
    pacer.admit(100 * us, 50, 0, 5 * ms);
  // A second of idling later, the same burst as a fresh pacer, no more.
  int at_once = 0;
  while (pacer.admit(100 * us, 50, 1 * s, 5 * ms) <= 1 * s)
    ++at_once;
  EXPECT_EQ(at_once, 26);
}

TEST(SharePacer, WithoutBurstEachLaunchWaitsItsOccupancy) {
  SharePacer pacer;
  EXPECT_EQ(pacer.admit(30 * us, 30, 0, 0), 0);
  EXPECT_EQ(pacer.admit(30 * us, 30, 0, 0), 100 * us);
  EXPECT_EQ(pacer.admit(30 * us, 30, 50 * us, 0), 200 * us);
  EXPECT_EQ(pacer.admit(0, 30, 250 * us, 0), 300 * us);  // free, but still behind the rest
}

// Two pacers on one clock (two processes of a container, the clock in the
// .pace file) share one share: turn about, each gets half of it.
TEST(SharePacer, PacersOnOneClockShareTheShare) {
  alignas(8) int64_t clock = 0;
  SharePacer a(&clock), b(&clock);
  int64_t now_a = 0, now_b = 0, n_a = 0, n_b = 0;
  while (now_a < 2 * s || now_b < 2 * s) {
    if (now_a <= now_b) {
      now_a = std::max(now_a, a.admit(100 * us, 30, now_a, 5 * ms));
      n_a += now_a < 2 * s;
    } else {
      now_b = std::max(now_b, b.admit(100 * us, 30, now_b, 5 * ms));
      n_b += now_b < 2 * s;
    }
  }
  // 30 % of 2 s at 100 us a launch: 6000 launches in all, plus one burst.
  EXPECT_NEAR(n_a + n_b, 6000, 51);
  EXPECT_NEAR(n_a, n_b, 16);  // the first takes the burst (15 launches) while the other waits
  EXPECT_EQ(a.backlog_ns(0), clock);  // both read the shared clock
  EXPECT_EQ(b.backlog_ns(0), clock);
  // A pacer of its own does not see them.
  SharePacer c;
  EXPECT_EQ(c.admit(100 * us, 30, 0, 5 * ms), -5 * ms);
}

}  // namespace
}  // namespace hami::vgpu::limiter
