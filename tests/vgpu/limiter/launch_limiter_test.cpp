// The SM limiter end to end on the simulated GPU: each scenario runs a
// workload limited (and, where it matters, unlimited) over simulated time and
// judges the GPU time of its kernels, what NVML and CUPTI show on a real GPU.
// Deterministic: no threads, no wall clock.
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
TEST(LimiterOnModel, ComputeBoundGetsItsShareOfGpuTimeOverTheRunAndEachSecond) {
  const TenantSpec spec = one_kernel(216 * us, 10 * us);
  constexpr int64_t kSpan = 10 * kSecond;
  for (uint32_t limit : {10u, 30u, 50u, 70u, 90u}) {
    const Outcome r = run_alone(spec, limit, kSpan);
    report("compute-bound 216us/10us, 10 s", limit, r.gpu_percent());
    EXPECT_NEAR(r.gpu_percent(), limit, 1.0) << "limit " << limit;
    report("  its worst whole second after the first", limit,
           expect_each_second_near(r, limit, 2.0));
    EXPECT_EQ(r.cost, 216 * us);
  }
}

// (b) A GPU with power to spare clocks up: throttled, the kernel runs up to
// 1.15 times faster than flat out. The share is of GPU time, so the kernel is
// charged the time it takes now; a limiter that charged its flat-out time
// would hold the program to 26 % of the GPU's time at 30.
TEST(LimiterOnModel, AKernelThatRunsFasterWhenThrottledIsChargedTheTimeItTakesNow) {
  GpuModel::Options gpu;
  gpu.boost = 1.15;
  const TenantSpec spec = one_kernel(216 * us, 10 * us);
  for (uint32_t limit : {30u, 70u}) {
    const Outcome r = run_alone(spec, limit, 10 * kSecond, gpu);
    report("compute-bound on a boosting GPU", limit, r.gpu_percent());
    EXPECT_NEAR(r.gpu_percent(), limit, 1.5) << "limit " << limit;
    EXPECT_LT(r.cost, 216 * us * 95 / 100) << "charged the flat-out time";
  }
}

// (c) A launch-bound program: 3 us kernels, 3.3 us of host time per launch,
// busy 91 % of the time unlimited. Its kernels' time is charged, not the
// host's launch period.
TEST(LimiterOnModel, LaunchBoundIsChargedItsKernelTimeNotItsLaunchPeriod) {
  const TenantSpec spec = one_kernel(3 * us, 3300);
  const Outcome solo = run_alone(spec, 0, 1 * kSecond);
  EXPECT_NEAR(solo.gpu_percent(), 90.9, 0.5);
  for (uint32_t limit : {30u, 60u}) {
    const Outcome r = run_alone(spec, limit, 2 * kSecond);
    report("launch-bound 3us/3.3us, 2 s", limit, r.gpu_percent());
    EXPECT_NEAR(r.gpu_percent(), limit, 1.5) << "limit " << limit;
    EXPECT_EQ(r.cost, 3 * us);
  }
}

// (d) Programs whose GPU time stays below their share are not slowed at all:
// nothing waits, and exactly as many kernels finish as unlimited.
TEST(LimiterOnModel, AProgramBelowItsShareIsNeverDelayed) {
  struct Case {
    const char* what;
    TenantSpec spec;
    uint32_t limit;
  };
  std::vector<Case> cases;
  // A 20 us kernel every 200 us: 10 % of the GPU.
  cases.push_back({"mostly idle, 20us every 200us (10%)", one_kernel(20 * us, 200 * us), 30});
  // A host-bound service: bursts of 40 kernels of 100 us launched 20 us apart
  // (the GPU falls behind the host), then 45 ms of host work: 8.7 %.
  TenantSpec bursty;
  bursty.cycle.push_back({.key = 1, .gpu_ns = 100 * us, .host_ns = 45 * ms});
  for (int i = 0; i < 39; ++i)
    bursty.cycle.push_back({.key = 1, .gpu_ns = 100 * us, .host_ns = 20 * us});
  cases.push_back({"bursts of 4 ms of GPU work every 46 ms (8.7%)", bursty, 30});
  // A training step: 12 ms of kernels launched in 6 ms, then 19 ms of host
  // work (data loading, the optimiser on the host): 48 %.
  TenantSpec step;
  step.cycle.push_back({.key = 2, .gpu_ns = 120 * us, .host_ns = 19 * ms});
  for (int i = 0; i < 99; ++i)
    step.cycle.push_back({.key = 3, .gpu_ns = 120 * us, .host_ns = 60 * us});
  cases.push_back({"training steps, 12 of every 25 ms busy (48%)", step, 60});
  for (const Case& c : cases) {
    const Outcome solo = run_alone(c.spec, 0, 10 * kSecond);
    const Outcome r = run_alone(c.spec, c.limit, 10 * kSecond);
    report(c.what, c.limit, r.gpu_percent(), solo.gpu_percent());
    EXPECT_LT(solo.gpu_percent(), c.limit) << c.what;
    EXPECT_EQ(r.stats.waited_ns, 0u) << c.what;
    // All but the host time of the samples' timestamps (about 2 us a
    // millisecond here).
    EXPECT_GE(r.done * 1000, solo.done * 995) << c.what;
  }
}

// (e) Two containers time-sliced on one GPU, each pacing itself.
TEST(LimiterOnModel, TwoTenantsAt30And60EachGetTheirShareOfGpuTime) {
  constexpr int64_t kSpan = 10 * kSecond;
  Tenants sim;
  const TenantSpec spec = one_kernel(216 * us, 10 * us);
  const int a = sim.add(spec);
  const int b = sim.add(spec);
  sim.limit(a, at(30));
  sim.limit(b, at(60));
  sim.run_until(kSpan);
  const double ga = 100.0 * static_cast<double>(sim.gpu().busy_ns(sim.context(a))) / kSpan;
  const double gb = 100.0 * static_cast<double>(sim.gpu().busy_ns(sim.context(b))) / kSpan;
  report("two tenants, first", 30, ga);
  report("two tenants, second", 60, gb);
  EXPECT_NEAR(ga, 30, 1.5);
  EXPECT_NEAR(gb, 60, 1.5);
}

// (f) CUDA graphs: a 1.7 ms graph replayed with 20 us of host work.
TEST(LimiterOnModel, GraphLaunchesAt30) {
  TenantSpec spec = one_kernel(1700 * us, 20 * us);
  spec.cycle[0].path = LaunchPath::kGraph;
  const Outcome r = run_alone(spec, 30, 10 * kSecond);
  report("graph 1.7ms/20us", 30, r.gpu_percent());
  EXPECT_NEAR(r.gpu_percent(), 30, 1.0);
  expect_each_second_near(r, 30, 2.0);
  EXPECT_EQ(r.stats.launches[static_cast<int>(LaunchPath::kGraph)],
            r.stats.launches[0] + r.stats.launches[1] + r.stats.launches[2] + r.stats.launches[3]);
}

// (g) A program of one large kernel and ten small ones, host-bound between.
TEST(LimiterOnModel, HeterogeneousProgramAt50) {
  TenantSpec spec;
  spec.cycle.push_back({.key = 1, .gpu_ns = 200 * us, .host_ns = 8 * us});
  for (int i = 0; i < 10; ++i)
    spec.cycle.push_back({.key = 2, .gpu_ns = 5 * us, .host_ns = 8 * us});
  const Outcome r = run_alone(spec, 50, 10 * kSecond);
  report("heterogeneous 200us + 10x5us, host 8us", 50, r.gpu_percent());
  EXPECT_NEAR(r.gpu_percent(), 50, 2.0);
  EXPECT_EQ(r.stats.shapes, 2u);
}

// (h) Under the default policy the share is enforced only while the node
// agent says the GPU is contended; until then launches are charged and
// published (what `vgpu top` shows) but never wait.
TEST(LimiterOnModel, ChargedAndPublishedWhileNotEnforcedButNeverPacedUntilItIs) {
  TenantSpec spec = one_kernel(216 * us, 10 * us);
  spec.enforced_from_ns = 5 * kSecond;
  alignas(8) uint64_t published = 0;
  LimiterOptions o = at(50);
  o.published_ns = &published;
  const Outcome r = run_alone_with(spec, &o, 10 * kSecond);
  for (size_t s = 0; s < 5; ++s)
    EXPECT_GT(r.busy_percent[s], 95.0) << "second " << s << " is not enforced";
  for (size_t s = 6; s < 10; ++s)
    EXPECT_NEAR(r.busy_percent[s], 50.0, 2.0) << "second " << s;
  EXPECT_EQ(published, r.stats.charged_ns);
  // Charged at launch: at most the queue (1024 launches) ahead of the GPU.
  EXPECT_NEAR(static_cast<double>(published), static_cast<double>(r.busy_ns),
              1024.0 * 216 * us + 216 * us);
}

// (i) On an idle stream the start mark is reached at once, and the launch
// reaches the GPU only when the host's launch call returns (6 us here): that
// time is taken off. Kept, the 20 us kernel would be charged 26 us.
TEST(LimiterOnModel, SamplesOnAnIdleStreamTakeTheHostsLaunchTimeOff) {
  TenantSpec spec = one_kernel(20 * us, 200 * us);
  spec.launch_ns = 6 * us;
  spec.record_cost_ns = 0;
  const Outcome r = run_alone(spec, 30, 1 * kSecond);
  EXPECT_EQ(r.cost, 20 * us);
  EXPECT_EQ(r.stats.idle_samples, r.stats.samples);
  EXPECT_GT(r.stats.samples, 30u);
}

// (j) Timestamps take the GPU time too (1.5 us each here): on a busy stream
// a sample holds the end mark's, which pairs of marks with nothing between
// measure and which is taken off.
TEST(LimiterOnModel, TheMarksOwnTimeIsTakenOffSamplesOnABusyStream) {
  GpuModel::Options gpu;
  gpu.event_ns = 1500;
  const Outcome r = run_alone(one_kernel(216 * us, 10 * us), 50, 2 * kSecond, gpu);
  EXPECT_EQ(r.stats.mark_ns, 1500);
  EXPECT_NEAR(static_cast<double>(r.cost), 216.0 * us, 10.0);
  EXPECT_EQ(r.stats.idle_samples, 0u);
  EXPECT_NEAR(r.gpu_percent(), 50, 1.0);
}

// The limiter driven by hand on the model, one launch at a time.
struct Rig {
  // Samples due at the first launch after their interval, for tests that
  // count them.
  static LimiterOptions at_once(LimiterOptions o) {
    o.sample_spread = 1;
    return o;
  }
  explicit Rig(const LimiterOptions& o = at(50)) : lim(at_once(o), timer) {}
  // A launch of `key` at `t` by the hooks' protocol, whatever admit says.
  int64_t launch(uint64_t key, int64_t gpu_ns, int64_t t) {
    gpu.advance_to(t);
    const int64_t go = lim.admit(key, LaunchPath::kKernel, t);
    if (lim.before_launch(w, key, 1, t)) LaunchLimiter::start_clock(w, t);
    gpu.launch(ctx, gpu_ns);
    lim.after_launch(w, true, t);
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

// A container on several GPUs: while a peer GPU's clock shows it running,
// launches go through the DutyGate (duty_gate.hpp): at once in the on-phase,
// to the next window in the off-phase, early when a collective meets a peer
// that launched more collectives; through the pacer again once the peer
// stops. Collectives are counted whether gated or not; other kernels never.
TEST(LaunchLimiter, GatesLaunchesWhileAPeerGpuRuns) {
  using vgpu::limiter::kGatePeriodNs;
  alignas(8) int64_t clock = 0;
  alignas(8) int64_t collectives = 0;
  alignas(8) int64_t peer_clock = 0;
  alignas(8) int64_t peer_collectives = 0;
  LimiterOptions o = at(30);
  o.shared_clock = &clock;
  o.shared_collectives = &collectives;
  Rig r(o);
  for (int i = 0; i < 3; ++i)
    r.launch(9, 216 * us, i * ms);
  r.harvest(3 * ms);
  ASSERT_EQ(r.lim.cost_of(9), 216 * us);
  EXPECT_EQ(collectives, 0);
  r.lim.admit(9, LaunchPath::kKernel, 3 * ms, 1, true, true);
  EXPECT_EQ(collectives, 1);  // no peer yet: paced alone, counted all the same
  const int64_t* pc[] = {&peer_clock};
  const int64_t* pn[] = {&peer_collectives};
  r.lim.set_peer_clocks(pc, pn, 1);
  const int64_t base = 50 * kGatePeriodNs;
  peer_clock = base;
  EXPECT_TRUE(r.lim.gated(base));
  EXPECT_EQ(r.lim.admit(9, LaunchPath::kKernel, base + 10 * ms, 1, true, true), base + 10 * ms);
  EXPECT_EQ(collectives, 2);
  EXPECT_EQ(r.lim.admit(9, LaunchPath::kKernel, base + 11 * ms), base + 11 * ms);
  EXPECT_EQ(collectives, 2);           // not a collective
  const int64_t off = base + 33 * ms;  // past the on-phase's 30 ms, within the slack
  EXPECT_EQ(r.lim.admit(9, LaunchPath::kKernel, off, 1, true, true), base + kGatePeriodNs);
  EXPECT_EQ(collectives, 2);  // counted when it goes
  EXPECT_FALSE(r.lim.may_go_early(off));
  peer_collectives = 3;  // the peer launched this one already
  EXPECT_TRUE(r.lim.may_go_early(off + 200 * us));
  r.lim.went(off + 200 * us);
  EXPECT_EQ(collectives, 3);
  LimiterStats st = r.lim.stats();
  EXPECT_EQ(st.gate_waits, 1u);
  EXPECT_EQ(st.gate_catch_ups, 1u);
  r.lim.went(off + 300 * us);  // no launch held: nothing
  EXPECT_EQ(collectives, 3);
  // Another kernel held to the next window never goes early: it pairs with
  // nothing of the peer's.
  EXPECT_EQ(r.lim.admit(9, LaunchPath::kKernel, off + 1 * ms), base + kGatePeriodNs);
  peer_collectives = 10;
  EXPECT_FALSE(r.lim.may_go_early(off + 2 * ms));
  r.lim.went(base + kGatePeriodNs);
  EXPECT_EQ(collectives, 3);
  st = r.lim.stats();
  EXPECT_EQ(st.gate_waits, 2u);
  EXPECT_EQ(st.gate_catch_ups, 1u);
  // The peer has not launched for over a second: paced alone again.
  EXPECT_FALSE(r.lim.gated(base + 2 * kSecond));
}

TEST(LaunchLimiter, LearnsAKernelFromItsFirstSamples) {
  Rig r;
  EXPECT_EQ(r.lim.cost_of(9), 0);
  for (int i = 0; i < 3; ++i)
    r.launch(9, 216 * us, i * ms);  // learning: each launch is a sample of its own
  // Harvested after the launches at 1 and 2 ms; the third is still running,
  // and a shape's cost is known from its third sample.
  EXPECT_EQ(r.lim.stats().samples, 2u);
  EXPECT_EQ(r.lim.cost_of(9), 0);
  r.harvest(3 * ms);
  EXPECT_EQ(r.lim.cost_of(9), 216 * us);
  EXPECT_EQ(r.lim.default_cost(), 216 * us);
  LimiterStats st = r.lim.stats();
  EXPECT_EQ(st.samples, 3u);
  EXPECT_EQ(st.shapes, 1u);
  EXPECT_EQ(st.launches[0], 3u);
  // The first was admitted before anything was known, and settled since.
  EXPECT_EQ(st.charged_ns, static_cast<uint64_t>(3 * 216 * us));
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
  ASSERT_TRUE(r.lim.before_launch(r.w, 9, 1, 0));
  EXPECT_GE(r.timer.live(), 1u);  // the window's start (and a pair of marks)
  r.lim.after_launch(r.w, false, 0);
  EXPECT_EQ(r.w.owner, nullptr);
  r.harvest(1 * ms);
  EXPECT_EQ(r.timer.live(), 0u);
  EXPECT_EQ(r.lim.stats().samples, 0u);
  EXPECT_EQ(r.lim.cost_of(9), 0);
}

// A light launch the driver refuses is not charged; those before it are.
TEST(LaunchLimiter, AFailedLightLaunchIsNotCharged) {
  Rig r;
  for (int i = 0; i < 3; ++i)
    r.launch(9, 3 * us, i * ms);  // learnt: 3 us, below batch_below_ns, so batches open
  r.harvest(2400 * us);
  ASSERT_EQ(r.lim.cost_of(9), 3 * us);
  // A paced launch opens a batch (a sample is not due yet: 1 ms after the last).
  const int64_t t = 2500 * us;
  r.lim.admit(9, LaunchPath::kKernel, t);
  ASSERT_FALSE(r.lim.before_launch(r.w, 9, 1, t));
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

// Launches admitted while their shape's cost is unknown are charged it once
// it is known, so that over time every launch is charged what it costs.
TEST(LaunchLimiter, LaunchesAdmittedBeforeTheirCostIsKnownAreChargedOnceItIs) {
  Rig r;
  for (int i = 0; i < 100; ++i)
    r.launch(0x6a, 5 * ms, i * 10 * us);  // all in the first millisecond, all free
  r.harvest(16 * ms);                     // the first three are measured
  ASSERT_EQ(r.lim.cost_of(0x6a), 5 * ms);
  const int64_t go = r.lim.admit(0x6a, LaunchPath::kGraph, 16 * ms);
  // The first 100 launches of 5 ms at 50 % occupy 1 s of wall time from
  // 16 ms on: the next may start then, less the burst.
  EXPECT_EQ(r.lim.stats().charged_ns, static_cast<uint64_t>(101 * 5 * ms));
  EXPECT_EQ(go, 1016 * ms - LimiterOptions{}.burst_ns);
}

// Two of every five samples are stretched by another context's time slice
// (the sampled kernel is cut by the slice end and waits out the other's
// 2 ms), and the cost stays exact.
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
    if (i >= 2) {
      EXPECT_EQ(r.lim.cost_of(0x5eed), 216 * us) << "round " << i;
    }
  }
  EXPECT_EQ(stretched, 15);
  EXPECT_EQ(r.lim.stats().samples, 40u);
  EXPECT_EQ(r.gpu.completed(other), 15u);
}

// forget(): a destroyed graph's handle may come back for another graph,
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
// the old graph and must not become the new one's cost.
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
  Tenants sim;
  const int a = sim.add(spec);
  LaunchLimiter& lim = sim.limit(a, at(50));
  uint64_t samples_before_last = 0;
  for (int64_t t = every; t <= kSpan; t += every) {
    sim.run_until(t);
    if (t == kSpan - 200 * ms) samples_before_last = lim.stats().samples;
    poke(sim, a, lim);
  }
  const double achieved =
      100.0 * static_cast<double>(sim.gpu().busy_ns(sim.context(a))) / static_cast<double>(kSpan);
  report(what, 50, achieved);
  EXPECT_NEAR(achieved, 50, 3.0);
  EXPECT_EQ(lim.cost_of(0x5eed), 216 * us);
  // Samples keep coming in the last 200 ms: nothing stays counted in flight.
  EXPECT_GE(lim.stats().samples - samples_before_last, 10u);
  // In flight at most: 32 samples and pairs of two events.
  EXPECT_LE(sim.timer(a).live(), 64u);
  EXPECT_EQ(sim.timer(a).bad_releases(), 0u);
  LaunchLimiter::end_window(sim.window(a));
  sim.run_until(kSpan + 10 * ms);
  sim.gpu().advance_to(kSpan + 20 * ms);
  lim.harvest(kSpan + 20 * ms);
  EXPECT_EQ(sim.timer(a).live(), 0u);
}

TEST(LimiterOnModel, DropSamplesInFlightLeavesTheLimiterWorking) {
  survives(
      3 * ms, [](Tenants&, int, LaunchLimiter& lim) { lim.drop_samples(); },
      "drop_samples every 3 ms");
}

// The context's events vanish (its context was destroyed), then
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

// The launching thread exits mid-sample (abandon_window) every 1 ms.
TEST(LimiterOnModel, AbandonedWindowsLeaveTheLimiterWorking) {
  survives(
      1 * ms,
      [](Tenants& sim, int a, LaunchLimiter&) { LaunchLimiter::abandon_window(sim.window(a)); },
      "abandon_window every 1 ms");
}

// GPU timestamps that cannot be made (record fails) for half of each 20 ms.
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
