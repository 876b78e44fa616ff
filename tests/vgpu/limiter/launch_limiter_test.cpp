// The SM limiter end to end on the simulated GPU: each scenario runs a
// workload limited and, alone and unlimited, over the same simulated time, and
// compares the kernels finished. Deterministic: no threads, no wall clock.
#include "vgpu/limiter/launch_limiter.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "gpu_model/gpu_model.hpp"
#include "gpu_model/tenants.hpp"
#include "model_runs.hpp"

namespace hami::test {
namespace {

using vgpu::limiter::LaunchLimiter;
using vgpu::limiter::LaunchPath;
using vgpu::limiter::LimiterOptions;
using vgpu::limiter::LimiterStats;
using vgpu::limiter::SampleWindow;

// (a) A compute-bound program: 216 us kernels, 10 us of host work per launch.
TEST(LimiterOnModel, ComputeBoundTracksEveryLimitOverTheRunAndEachSecond) {
  const TenantSpec spec = one_kernel(216 * us, 10 * us);
  constexpr int64_t kSpan = 10 * kSecond;
  const Outcome solo = run_alone(spec, 0, kSpan);
  ASSERT_GT(solo.done, 40'000u);
  for (uint32_t limit : {10u, 30u, 50u, 70u, 90u}) {
    const Outcome r = run_alone(spec, limit, kSpan);
    const double achieved = percent_of(r.done, solo.done);
    report("compute-bound 216us/10us, 10 s", limit, achieved);
    EXPECT_NEAR(achieved, limit, 1.5) << "limit " << limit;
    report("  its worst whole second after the first", limit,
           expect_each_second_near(r, solo, limit, 3.0));
    EXPECT_EQ(r.cost, 216 * us);  // the kernel time: the GPU is never back to back here
  }
}

// (b) A launch-bound program: 3 us kernels, 3.3 us of host time per launch.
// Charging the 3 us kernel alone would allow a launch every 10 us at 30 %
// (33 % of the unlimited rate) and every 3.33 us at 90 % (99 %): the
// back-to-back period, 3.3 us, must be charged.
TEST(LimiterOnModel, LaunchBoundIsChargedItsBackToBackPeriod) {
  const TenantSpec spec = one_kernel(3 * us, 3300);
  constexpr int64_t kSpan = 1 * kSecond;
  const Outcome solo = run_alone(spec, 0, kSpan);
  ASSERT_GT(solo.done, 300'000u);
  for (uint32_t limit : {30u, 90u}) {
    const Outcome r = run_alone(spec, limit, kSpan);
    const double achieved = percent_of(r.done, solo.done);
    report("launch-bound 3us/3.3us, 1 s", limit, achieved);
    EXPECT_NEAR(achieved, limit, 3.0) << "limit " << limit;
    EXPECT_NEAR(static_cast<double>(r.cost), 3300.0, 150.0) << "limit " << limit;
  }
}

// (b') The same program, with our hook taking 0.6 us of host time per launch
// when limited (on the H200, paced launches took 0.3 us longer than bare
// ones). The GPU keeps pace with the host, so the back-to-back period it
// measures is 3.9 us; charged that, the program would get 30 * 3.3 / 3.9 =
// 25.4 % at 30 and 59 % at 70. What is charged is the program's own period,
// 3.3 us: the driver's call and the program's time between our hook's calls.
TEST(LimiterOnModel, LaunchBoundIsChargedItsOwnPeriodNotOurHooksTime) {
  TenantSpec spec = one_kernel(3 * us, 3300);
  spec.hook_ns = 600;
  constexpr int64_t kSpan = 1 * kSecond;
  const Outcome solo = run_alone(spec, 0, kSpan);  // unlimited: no hook time
  for (uint32_t limit : {30u, 70u}) {
    const Outcome r = run_alone(spec, limit, kSpan);
    const double achieved = percent_of(r.done, solo.done);
    report("launch-bound 3us/3.3us + 0.6us hook, 1 s", limit, achieved);
    EXPECT_NEAR(achieved, limit, 1.5) << "limit " << limit;
    EXPECT_NEAR(static_cast<double>(r.cost), 3300.0, 100.0) << "limit " << limit;
  }
}

// (b') At a share near 100 %, the program must run nearly flat out: a paced
// launch costs it our hook's time (0.3 us on the H200, a tenth of the period
// of a small kernel), so if most launches were paced it could not reach 90 %
// of its unhooked speed. A small kernel's launches between admissions go
// light (LimiterOptions::batch_ns).
TEST(LimiterOnModel, LaunchBoundReachesANearlyFullShareThoughPacedLaunchesCostOurHooksTime) {
  TenantSpec spec = one_kernel(3 * us, 3100);
  spec.hook_ns = 300;
  constexpr int64_t kSpan = 2 * kSecond;
  const Outcome solo = run_alone(spec, 0, kSpan);
  for (uint32_t limit : {90u, 95u}) {
    const Outcome r = run_alone(spec, limit, kSpan);
    const double achieved = percent_of(r.done, solo.done);
    report("launch-bound 3us/3.1us + 0.3us hook, 2 s", limit, achieved);
    EXPECT_NEAR(achieved, limit, 1.5) << "limit " << limit;
    report("  its worst whole second after the first", limit,
           expect_each_second_near(r, solo, limit, 3.0, Against::kSameSecond));
  }
}

// (b'') The same program on a host that slows down by 35 % for one second in
// every three (the H200 machine's launch rate moves by +-15 % within a
// second). The share is of the program's average speed: a limited program
// with time to spare keeps its rate through a slow second, so every whole
// second is near the share of the unlimited program's average second.
// Charged its period of the last few milliseconds, it got 26.7 % and 41.0 %
// in the slow seconds at 30 and 50. (Charging the mean period, not the mean
// rate, costs about 1.5 points of the total here.)
TEST(LimiterOnModel, LaunchBoundHoldsItsRateThroughTheHostsSlowSeconds) {
  TenantSpec spec = one_kernel(3 * us, 3300);
  spec.slow_every_ns = 3 * kSecond;
  spec.slow_ns = 1 * kSecond;
  spec.slow_percent = 135;
  constexpr int64_t kSpan = 9 * kSecond;
  const Outcome solo = run_alone(spec, 0, kSpan);
  for (uint32_t limit : {30u, 50u}) {
    const Outcome r = run_alone(spec, limit, kSpan);
    report("launch-bound, host 35 % slower 1 s in 3, 9 s", limit, percent_of(r.done, solo.done));
    EXPECT_NEAR(percent_of(r.done, solo.done), limit, 3.0) << "limit " << limit;
    report("  its worst whole second after the first", limit,
           expect_each_second_near(r, solo, limit, 5.0, Against::kAverageSecond));
  }
}

// (b''') The same program on a host that runs it 12 % slower while it is
// throttled (a CPU that idles between the program's runs clocks down; on the
// H200 machine a launch-bound program at 30 % got 26-29 % of its unthrottled
// rate). Its share is of its speed flat out, measured in sustain runs.
TEST(LimiterOnModel, LaunchBoundIsChargedItsFlatOutPeriodOnAHostThatSlowsItWhenThrottled) {
  TenantSpec spec = one_kernel(3 * us, 3300);
  spec.throttled_percent = 112;
  constexpr int64_t kSpan = 4 * kSecond;
  const Outcome solo = run_alone(spec, 0, kSpan);
  for (uint32_t limit : {30u, 50u}) {
    const Outcome r = run_alone(spec, limit, kSpan);
    const double achieved = percent_of(r.done, solo.done);
    report("launch-bound, host 12 % slower when throttled", limit, achieved);
    EXPECT_NEAR(achieved, limit, 1.5) << "limit " << limit;
    EXPECT_NEAR(static_cast<double>(r.cost), 3300.0, 100.0) << "limit " << limit;
    EXPECT_EQ(r.stats.sustain_runs, 1u);
  }
}

// (b'''') A program whose host's speed wobbles both ways: 20 launches at
// 2.7 us, then 20 at 3.3 us, over and over, 3.0 us on average. Its 16-launch
// samples spread evenly around 3.0 us; their median is its period, the second
// lowest of five (what was charged before 2026-11-22) about 2.85 us, which
// let it run 5 % over its share. On the H200 machine the second lowest sat
// below the unthrottled period in the same way.
TEST(LimiterOnModel, LaunchBoundIsChargedTheMiddleOfAHostPeriodThatWobblesBothWays) {
  TenantSpec spec;
  for (int i = 0; i < 40; ++i)
    spec.cycle.push_back({.key = 0x5eed, .gpu_ns = 2500, .host_ns = i < 20 ? 2700 : 3300});
  constexpr int64_t kSpan = 4 * kSecond;
  const Outcome solo = run_alone(spec, 0, kSpan);
  for (uint32_t limit : {30u, 70u}) {
    const Outcome r = run_alone(spec, limit, kSpan);
    const double achieved = percent_of(r.done, solo.done);
    report("launch-bound, host period 2.7/3.3 us by turns, 4 s", limit, achieved);
    EXPECT_NEAR(achieved, limit, 1.0) << "limit " << limit;
    EXPECT_NEAR(static_cast<double>(r.cost), 3000.0, 60.0) << "limit " << limit;
    report("  its worst whole second after the first", limit,
           expect_each_second_near(r, solo, limit, 3.0, Against::kSameSecond));
  }
}

// (b''''') Under the default policy: the same program unthrottled for 5 s
// (no other container busy), then throttled at 70 %, on a host that runs it
// 20 % faster for 600 ms every 5 s, one such spell starting with the
// throttling. The sustain run at the switch meets the spell: charged the
// period it measures there (3.00 us; the program's average is 0.12 * 2.64 +
// 0.88 * 3.3 = 3.22 us), the program got 76.0 % (as a program at 70 % got
// 86.1 % on the H100 when its host ran fast at the switch:
// bench/results/sm-limit-h100-7be66b7-launch.txt). Observed while
// unthrottled, it is charged its period over those seconds.
TEST(LimiterOnModel, LaunchBoundIsChargedItsPeriodFromBeforeEnforcementStarted) {
  TenantSpec spec = one_kernel(3 * us, 3300);
  spec.slow_every_ns = 5 * kSecond;
  spec.slow_ns = 600 * ms;
  spec.slow_percent = 80;
  spec.enforced_from_ns = 5 * kSecond;
  constexpr int64_t kSpan = 15 * kSecond;
  constexpr uint32_t kLimit = 70;
  const Outcome solo = run_alone(spec, 0, kSpan);
  const Outcome r = run_alone(spec, kLimit, kSpan);
  // The throttled seconds after the first, against the unlimited average.
  const double average =
      static_cast<double>(solo.done) / static_cast<double>(solo.per_second.size());
  uint64_t throttled = 0;
  for (size_t s = 6; s < r.per_second.size(); ++s) {
    throttled += r.per_second[s];
    EXPECT_NEAR(100.0 * static_cast<double>(r.per_second[s]) / average, kLimit, 5.0)
        << "second " << s;
  }
  const double achieved = 100.0 * static_cast<double>(throttled) /
                          static_cast<double>(r.per_second.size() - 6) / average;
  report("launch-bound, default policy, enforced from 5 s", kLimit, achieved);
  EXPECT_NEAR(achieved, kLimit, 3.0);
  EXPECT_NEAR(static_cast<double>(r.cost), 3221.0, 60.0);
  EXPECT_GT(r.stats.unpaced_samples, 500u);
  EXPECT_EQ(r.stats.sustain_runs, 1u);
  // Nothing was charged while the share was not enforced: at most the 10 s
  // since, at the share, and the sustain run's loan.
  EXPECT_LE(r.stats.charged_ns, static_cast<uint64_t>(10 * kSecond * kLimit / 100 + 300 * ms));
}

// (c) Two compute-bound tenants on one GPU at 30 % and 60 %: each gets its
// share of what it does alone. Samples stretched by the other's time slice
// are thrown out by the medians; here they are few (a sample is stretched
// only when its kernel is cut by a slice end, i.e. after 2 ms of its own
// work), mostly in the first milliseconds while nothing is known yet.
// MediansRejectSamplesStretchedByAnotherContextsSlice makes them common.
TEST(LimiterOnModel, TwoTenantsAt30And60EachGetTheirShare) {
  const TenantSpec spec = one_kernel(216 * us, 10 * us);
  constexpr int64_t kSpan = 10 * kSecond;
  const Outcome solo = run_alone(spec, 0, kSpan);
  Tenants sim;
  const int a = sim.add(spec);
  const int b = sim.add(spec);
  LaunchLimiter& la = sim.limit(a, at(30));
  LaunchLimiter& lb = sim.limit(b, at(60));
  sim.run_until(kSpan);
  const double achieved_a = percent_of(sim.completed_between(a, 0, kSpan), solo.done);
  const double achieved_b = percent_of(sim.completed_between(b, 0, kSpan), solo.done);
  report("two tenants, tenant at 30", 30, achieved_a);
  report("two tenants, tenant at 60", 60, achieved_b);
  EXPECT_NEAR(achieved_a, 30, 3.0);
  EXPECT_NEAR(achieved_b, 60, 3.0);
  EXPECT_NEAR(static_cast<double>(la.cost_of(0x5eed)), 216e3, 216e2);
  EXPECT_NEAR(static_cast<double>(lb.cost_of(0x5eed)), 216e3, 216e2);
}

// (d) A CUDA graph: one key, 5 ms of GPU per launch, 20 us of host time.
// Launches of a shape not measured yet are let through at the default cost
// (0 before anything is measured): in the 5 ms until the first sample is back,
// the host queues 250 of them, 1.25 s of GPU for free. A correct limiter
// charges them once their cost is known. Fails (42.6 %) until it does: see
// LaunchesAdmittedBeforeTheirCostIsKnownAreChargedOnceItIs.
TEST(LimiterOnModel, GraphLaunchesAt30) {
  TenantSpec spec = one_kernel(5 * ms, 20 * us, 0x6a);
  spec.cycle[0].path = LaunchPath::kGraph;
  constexpr int64_t kSpan = 10 * kSecond;
  const Outcome solo = run_alone(spec, 0, kSpan);
  const Outcome r = run_alone(spec, 30, kSpan);
  const double achieved = percent_of(r.done, solo.done);
  report("graph 5ms/20us, 10 s", 30, achieved);
  EXPECT_NEAR(achieved, 30, 3.0);
  EXPECT_GE(r.stats.launches[static_cast<size_t>(LaunchPath::kGraph)], r.done);
  EXPECT_EQ(r.stats.launches[static_cast<size_t>(LaunchPath::kKernel)], 0u);
  EXPECT_EQ(r.cost, 5 * ms);
}

// (d') The same graph after a warm-up of 200 small kernels: the graph is a new
// shape, charged the default (the small kernels' 5 us) until measured. Shares
// are of GPU time, the two shapes being so unlike. Fails (42.6 %) like (d).
TEST(LimiterOnModel, GraphLaunchesAfterAWarmUpAt30) {
  TenantSpec spec = one_kernel(5 * ms, 20 * us, 0x6a);
  spec.cycle[0].path = LaunchPath::kGraph;
  for (int i = 0; i < 200; ++i)
    spec.prologue.push_back({.key = 7, .gpu_ns = 5 * us, .host_ns = 5 * us});
  constexpr int64_t kSpan = 10 * kSecond;
  int64_t busy[2] = {0, 0};
  for (int limited = 0; limited < 2; ++limited) {
    Tenants sim;
    const int a = sim.add(spec);
    if (limited != 0) sim.limit(a, at(30));
    sim.run_until(kSpan);
    busy[limited] = sim.gpu().busy_ns(sim.context(a));
  }
  const double achieved = 100.0 * static_cast<double>(busy[1]) / static_cast<double>(busy[0]);
  report("warm-up 200x5us, then graph 5ms/20us, 10 s", 30, achieved);
  EXPECT_NEAR(achieved, 30, 3.0);
}

// (e) A heterogeneous program: one 200 us kernel, then ten 5 us ones, 8 us of
// host time per launch.
TEST(LimiterOnModel, HeterogeneousProgramAt50) {
  TenantSpec spec;
  spec.cycle.push_back({.key = 1, .gpu_ns = 200 * us, .host_ns = 8 * us});
  for (int i = 0; i < 10; ++i)
    spec.cycle.push_back({.key = 2, .gpu_ns = 5 * us, .host_ns = 8 * us});
  constexpr int64_t kSpan = 10 * kSecond;
  const Outcome solo = run_alone(spec, 0, kSpan);
  const Outcome r = run_alone(spec, 50, kSpan);
  const double achieved = percent_of(r.done, solo.done);
  report("heterogeneous 200us + 10x5us, host 8us", 50, achieved);
  EXPECT_NEAR(achieved, 50, 3.0);
  EXPECT_EQ(r.stats.shapes, 2u);
}

// (f) A program that leaves the GPU idle most of the time (a 20 us kernel
// every 200 us: 10 % of the GPU) is not slowed by a 30 % limit.
TEST(LimiterOnModel, AMostlyIdleProgramUnderItsLimitIsNotSlowed) {
  const TenantSpec spec = one_kernel(20 * us, 200 * us);
  constexpr int64_t kSpan = 10 * kSecond;
  const Outcome solo = run_alone(spec, 0, kSpan);
  const Outcome r = run_alone(spec, 30, kSpan);
  const double achieved = percent_of(r.done, solo.done);
  report("mostly idle 20us every 200us (uses 10%)", 30, achieved, 100);
  EXPECT_GE(achieved, 99.5);
  EXPECT_EQ(r.stats.waited_ns, 0u);
  EXPECT_EQ(r.cost, 20 * us);  // the gaps are the program's own, not charged
}

// The limiter driven by hand on the model, one launch at a time.
struct Rig {
  explicit Rig(const LimiterOptions& o = at(50)) : lim(o, timer) {}
  // A launch of `key` at `t` by the hooks' protocol, whatever admit says.
  int64_t launch(uint64_t key, int64_t gpu_ns, int64_t t) {
    gpu.advance_to(t);
    const int64_t go = lim.admit(key, LaunchPath::kKernel, t);
    lim.before_launch(w, key, 1, t);
    gpu.launch(ctx, gpu_ns);
    lim.after_launch(w, true);
    lim.harvest(t);
    return go;
  }
  void harvest(int64_t t) {
    gpu.advance_to(t);
    lim.harvest(t);
  }

  GpuModel gpu;
  int ctx = gpu.add_context();
  ModelTimer timer{gpu, ctx};
  LaunchLimiter lim;
  SampleWindow w;
};

TEST(LaunchLimiter, LearnsAKernelFromItsFirstSamples) {
  Rig r;
  EXPECT_EQ(r.lim.cost_of(9), 0);
  for (int i = 0; i < 3; ++i)
    r.launch(9, 216 * us, i * ms);  // learning: each launch is a sample of its own
  // Harvested after the launches at 1 and 2 ms; the third is still running.
  EXPECT_EQ(r.lim.stats().samples, 2u);
  EXPECT_EQ(r.lim.cost_of(9), 216 * us);
  EXPECT_EQ(r.timer.live(), 2u);
  r.harvest(3 * ms);
  EXPECT_EQ(r.lim.cost_of(9), 216 * us);
  EXPECT_EQ(r.lim.default_cost(), 216 * us);
  LimiterStats st = r.lim.stats();
  EXPECT_EQ(st.samples, 3u);
  EXPECT_EQ(st.shapes, 1u);
  EXPECT_EQ(st.launches[0], 3u);
  // The first two were admitted before anything was known; the third after.
  EXPECT_GE(st.charged_ns, static_cast<uint64_t>(216 * us));
  // A shape not seen yet is charged the default.
  const uint64_t before = st.charged_ns;
  r.lim.admit(10, LaunchPath::kKernel, 3 * ms);
  st = r.lim.stats();
  EXPECT_EQ(st.charged_ns - before, static_cast<uint64_t>(216 * us));
  EXPECT_EQ(r.timer.live(), 0u);
  EXPECT_EQ(r.timer.bad_releases(), 0u);
}

TEST(LaunchLimiter, AFailedLaunchMeasuresNothing) {
  Rig r;
  r.gpu.advance_to(0);
  r.lim.admit(9, LaunchPath::kKernel, 0);
  r.lim.before_launch(r.w, 9, 1, 0);
  EXPECT_EQ(r.timer.live(), 1u);  // the window's start
  r.lim.after_launch(r.w, false);
  EXPECT_EQ(r.w.owner, nullptr);
  EXPECT_EQ(r.timer.live(), 0u);
  r.harvest(1 * ms);
  EXPECT_EQ(r.lim.stats().samples, 0u);
  EXPECT_EQ(r.lim.cost_of(9), 0);
}

// A light launch the driver refuses is not charged; those before it are.
TEST(LaunchLimiter, AFailedLightLaunchIsNotCharged) {
  LimiterOptions o = at(50);
  o.sustain_run_ns = 0;
  Rig r(o);
  for (int i = 0; i < 3; ++i)
    r.launch(9, 3 * us, i * ms);  // learnt: 3 us, below stream_worth_ns, so batches open
  r.harvest(2400 * us);
  ASSERT_EQ(r.lim.cost_of(9), 3 * us);
  // A paced launch opens a batch (a sample is not due yet: 1 ms after the last).
  const int64_t t = 2500 * us;
  r.lim.admit(9, LaunchPath::kKernel, t);
  ASSERT_FALSE(r.lim.before_launch(r.w, 9, 1, t, true));
  r.lim.after_launch(r.w, true, t);
  ASSERT_EQ(r.w.owner, &r.lim) << "a batch is open";
  const uint64_t before = r.lim.stats().charged_ns;
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(r.lim.light_launch(r.w, 9, 1));  // 4 light launches went through
  ASSERT_TRUE(r.lim.light_launch(r.w, 9, 1));
  r.lim.light_launch_failed(r.w);  // the fifth failed
  EXPECT_EQ(r.w.owner, nullptr) << "the batch ends";
  EXPECT_EQ(r.lim.stats().charged_ns - before, static_cast<uint64_t>(4 * 3 * us));
}

// The defect behind (d): launches admitted while their shape's cost is
// unknown are never charged it. A correct limiter charges them once the cost
// is known, so that over time every launch is charged what it costs. Fails
// until it does.
TEST(LaunchLimiter, LaunchesAdmittedBeforeTheirCostIsKnownAreChargedOnceItIs) {
  LimiterOptions o = at(50);
  o.sustain_run_ns = 0;  // the burst is the ordinary one
  Rig r(o);
  for (int i = 0; i < 100; ++i)
    r.launch(0x6a, 5 * ms, i * 10 * us);  // all in the first millisecond, all free
  r.harvest(6 * ms);                      // the first is measured
  ASSERT_EQ(r.lim.cost_of(0x6a), 5 * ms);
  const int64_t go = r.lim.admit(0x6a, LaunchPath::kGraph, 6 * ms);
  // 100 launches of 5 ms at 50 % occupy 1 s of wall time, less the 5 ms burst.
  EXPECT_GE(r.lim.stats().charged_ns, static_cast<uint64_t>(101 * 5 * ms));
  EXPECT_GE(go, 995 * ms);
}

// What (c) relies on, made to happen on purpose: two of every five samples
// are stretched by another context's time slice (the sampled kernel is cut by
// the slice end and waits out the other's 2 ms), and the cost stays exact.
TEST(LaunchLimiter, MediansRejectSamplesStretchedByAnotherContextsSlice) {
  Rig r;
  const int other = r.gpu.add_context();
  int stretched = 0;
  for (int i = 0; i < 40; ++i) {
    const int64_t t = i * 10 * ms;
    const bool stretch = i >= 3 && (i % 5 == 1 || i % 5 == 3);
    r.gpu.advance_to(t);
    if (stretch) {
      r.gpu.launch(other, 5 * ms);
      r.gpu.launch(r.ctx, 1900 * us);  // work of ours the limiter does not see
    }
    r.launch(0x5eed, 216 * us, t);
    r.harvest(t + 9 * ms);
    ASSERT_EQ(r.timer.live(), 0u) << i;  // the sample is in
    // Stretched: cut at 2 ms, the other's slice, then the rest (2.266 ms in all).
    const int64_t end = r.gpu.completions(r.ctx).back() - t;
    if (stretch) {
      EXPECT_GT(end, 4 * ms) << i;
      ++stretched;
    } else {
      EXPECT_LE(end, 216 * us + 25 * us) << i;
    }
    EXPECT_EQ(r.lim.cost_of(0x5eed), 216 * us) << "round " << i;
  }
  EXPECT_EQ(stretched, 15);
  EXPECT_EQ(r.lim.stats().samples, 40u);
  EXPECT_EQ(r.gpu.completed(other), 15u);
}

// Back-to-back runs are timed by whichever side held them up. Runs the host
// held up (the GPU kept pace) measure the host's period, whose noise goes
// both ways: the median of five is kept. Runs the GPU held up measure the
// GPU's, whose noise (another context's slice) only adds time: the second
// lowest. Here five runs in turn are 3.0, 3.2, 3.4, 3.6 and 3.8 us a launch,
// on the host's side with 2.5 us kernels, on the GPU's with a 2 us host.
TEST(LaunchLimiter, HostHeldRunsKeepTheirMedianAndGpuHeldRunsTheirSecondLowest) {
  constexpr uint64_t kKey = 0x5eed;
  const int64_t periods[] = {3000, 3200, 3400, 3600, 3800};
  for (const bool host_held : {true, false}) {
    LimiterOptions o = at(50);
    o.sustain_run_ns = 0;  // no flat-out cap: the estimate alone is charged
    o.batch_ns = 0;        // every launch outside a run is paced
    Rig r(o);
    int64_t t = 0;
    for (int i = 0; i < 3; ++i, t += 1 * ms)  // learning: lone samples
      r.launch(kKey, host_held ? 2500 : 3400, t);
    for (int run = 0; run < 40; ++run) {
      const int64_t p = periods[run % 5];
      const int64_t kernel = host_held ? 2500 : p;
      const int64_t step = host_held ? p : 2000;
      t += 2 * ms;  // a sample is due
      r.harvest(t);
      r.lim.admit(kKey, LaunchPath::kKernel, t);
      const bool opened = r.lim.before_launch(r.w, kKey, 1, t, /*warm=*/true);
      if (opened) LaunchLimiter::start_run_clock(r.w, t);
      r.gpu.launch(r.ctx, kernel);
      r.lim.after_launch(r.w, true, t);
      if (!opened) continue;  // a lone sample's turn
      for (int j = 1; j < 16; ++j) {
        t += step;
        r.gpu.advance_to(t);
        ASSERT_TRUE(r.lim.light_launch(r.w, kKey, 1)) << run << " " << j;
        r.gpu.launch(r.ctx, kernel);
      }
      t += step;  // the launch after the run ends it
      r.lim.admit(kKey, LaunchPath::kKernel, t);
      r.gpu.advance_to(t);
      EXPECT_FALSE(r.lim.before_launch(r.w, kKey, 1, t, true));
      r.gpu.launch(r.ctx, kernel);
      r.lim.after_launch(r.w, true, t);
    }
    r.harvest(t + 1 * ms);
    EXPECT_NEAR(static_cast<double>(r.lim.cost_of(kKey)), host_held ? 3400.0 : 3200.0, 20.0)
        << (host_held ? "host-held" : "GPU-held");
  }
}

// (g) forget(): a destroyed graph's handle may come back for another graph,
// which must be measured afresh.
TEST(LaunchLimiter, ForgetResetsAShapesCost) {
  Rig r;
  for (int i = 0; i < 3; ++i)
    r.launch(0x6a, 1 * ms, i * 2 * ms);
  r.harvest(6 * ms);
  ASSERT_EQ(r.lim.cost_of(0x6a), 1 * ms);
  r.lim.forget(0x6a);
  EXPECT_EQ(r.lim.cost_of(0x6a), 0);
  EXPECT_EQ(r.lim.stats().shapes, 1u);  // the entry stays, empty
  for (int i = 0; i < 3; ++i)
    r.launch(0x6a, 3 * ms, 10 * ms + i * 4 * ms);  // learning again: every launch sampled
  r.harvest(30 * ms);
  EXPECT_EQ(r.lim.cost_of(0x6a), 3 * ms);
  r.lim.forget(0x99);  // unknown: nothing happens
  EXPECT_EQ(r.timer.live(), 0u);
}

// forget() while a sample of the old graph is in flight: that sample measures
// the old graph and must not become the new one's cost. Fails until forget()
// makes samples opened before it count for nothing (today the stale sample
// lands in the reset entry).
TEST(LaunchLimiter, ForgetIgnoresSamplesOfTheOldShapeInFlight) {
  Rig r;
  for (int i = 0; i < 3; ++i)
    r.launch(0x6a, 1 * ms, i * 2 * ms);
  r.harvest(6 * ms);
  ASSERT_EQ(r.lim.cost_of(0x6a), 1 * ms);
  r.launch(0x6a, 1 * ms, 20 * ms);  // a known shape, sampled now and then: now
  ASSERT_EQ(r.timer.live(), 2u);    // one sample in flight
  r.lim.forget(0x6a);               // the graph is destroyed (it still runs)
  r.harvest(22 * ms);               // its sample is back
  EXPECT_EQ(r.timer.live(), 0u);
  EXPECT_EQ(r.lim.cost_of(0x6a), 0) << "a sample of the forgotten graph was learned";
  for (int i = 0; i < 3; ++i)
    r.launch(0x6a, 3 * ms, 30 * ms + i * 4 * ms);  // the new graph behind the handle
  r.harvest(50 * ms);
  EXPECT_EQ(r.lim.cost_of(0x6a), 3 * ms);
}

// Runs a compute-bound tenant at 50 % for 2 s, calling `poke` every `every`;
// checks that the limiter still holds the share, still samples at the end,
// and leaves no GPU events behind.
template <class Poke>
void survives(int64_t every, Poke poke, const char* what) {
  const TenantSpec spec = one_kernel(216 * us, 10 * us);
  constexpr int64_t kSpan = 2 * kSecond;
  const Outcome solo = run_alone(spec, 0, kSpan);
  Tenants sim;
  const int a = sim.add(spec);
  LaunchLimiter& lim = sim.limit(a, at(50));
  uint64_t samples_before_last = 0;
  for (int64_t t = every; t <= kSpan; t += every) {
    sim.run_until(t);
    if (t == kSpan - 200 * ms) samples_before_last = lim.stats().samples;
    poke(sim, a, lim);
  }
  const double achieved = percent_of(sim.completed_between(a, 0, kSpan), solo.done);
  report(what, 50, achieved);
  EXPECT_NEAR(achieved, 50, 3.0);
  EXPECT_EQ(lim.cost_of(0x5eed), 216 * us);
  // Samples keep coming in the last 200 ms: nothing stays counted in flight.
  EXPECT_GE(lim.stats().samples - samples_before_last, 20u);
  // In flight at most: 32 samples of two events.
  EXPECT_LE(sim.timer(a).live(), 64u);
  EXPECT_EQ(sim.timer(a).bad_releases(), 0u);
  LaunchLimiter::end_window(sim.window(a));
  sim.run_until(kSpan + 10 * ms);
  sim.gpu().advance_to(kSpan + 20 * ms);
  lim.harvest(kSpan + 20 * ms);
  EXPECT_EQ(sim.timer(a).live(), 0u);
}

// (g) drop_samples() with windows open and samples pending, every 3 ms.
TEST(LimiterOnModel, DropSamplesInFlightLeavesTheLimiterWorking) {
  survives(
      3 * ms, [](Tenants&, int, LaunchLimiter& lim) { lim.drop_samples(); },
      "drop_samples every 3 ms");
}

// (g) The context's events vanish (its context was destroyed), then
// drop_samples(): open windows close on dead events later.
TEST(LimiterOnModel, DeadEventsAndDroppedSamplesLeaveTheLimiterWorking) {
  survives(
      7 * ms,
      [](Tenants& sim, int a, LaunchLimiter& lim) {
        sim.timer(a).invalidate_events();
        lim.drop_samples();
      },
      "events invalidated + drop_samples every 7 ms");
}

// (g) The launching thread exits mid-sample (abandon_window) every 1 ms.
TEST(LimiterOnModel, AbandonedWindowsLeaveTheLimiterWorking) {
  survives(
      1 * ms,
      [](Tenants& sim, int a, LaunchLimiter&) { LaunchLimiter::abandon_window(sim.window(a)); },
      "abandon_window every 1 ms");
}

// (g) GPU timestamps that cannot be made (record fails) for half of each 20 ms.
TEST(LimiterOnModel, FailingTimestampsLeaveTheLimiterWorking) {
  survives(
      10 * ms,
      [n = 0](Tenants& sim, int a, LaunchLimiter&) mutable {
        sim.timer(a).fail_records(++n % 2 == 1);
      },
      "record fails half the time");
}

}  // namespace
}  // namespace hami::test
