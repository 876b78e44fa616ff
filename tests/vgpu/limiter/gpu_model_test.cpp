// The GPU model and the tenant driver the limiter's tests stand on.
#include "gpu_model/gpu_model.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "gpu_model/tenants.hpp"

namespace hami::test {
namespace {

using Poll = vgpu::limiter::GpuTimer::Poll;

constexpr int64_t us = kMicrosecond;
constexpr int64_t ms = kMillisecond;

TEST(GpuModel, OneContextRunsBackToBack) {
  GpuModel gpu;
  const int a = gpu.add_context();
  for (int i = 0; i < 3; ++i)
    gpu.launch(a, 100 * us);
  EXPECT_EQ(gpu.queued(a), 3u);
  gpu.advance_to(150 * us);
  EXPECT_EQ(gpu.completions(a), (std::vector<int64_t>{100 * us}));
  EXPECT_EQ(gpu.queued(a), 2u);  // the running kernel counts
  gpu.launch(a, 50 * us);        // queued behind, at 150 us
  gpu.advance_to(10 * ms);
  EXPECT_EQ(gpu.completions(a), (std::vector<int64_t>{100 * us, 200 * us, 300 * us, 350 * us}));
  EXPECT_EQ(gpu.busy_ns(a), 350 * us);
  EXPECT_EQ(gpu.switches(), 0u);
  EXPECT_EQ(gpu.now(), 10 * ms);
}

TEST(GpuModel, TwoContextsTimeSliceWithTheSwitchCost) {
  GpuModel gpu;  // 2 ms slices, 25 us switches
  const int a = gpu.add_context(), b = gpu.add_context();
  for (int i = 0; i < 4; ++i) {
    gpu.launch(a, 1 * ms);
    gpu.launch(b, 1 * ms);
  }
  gpu.advance_to(20 * ms);
  // a: [0, 2 ms], b: [2.025, 4.025], a: [4.05, 6.05], b: [6.075, 8.075].
  EXPECT_EQ(gpu.completions(a), (std::vector<int64_t>{1 * ms, 2 * ms, 5050 * us, 6050 * us}));
  EXPECT_EQ(gpu.completions(b), (std::vector<int64_t>{3025 * us, 4025 * us, 7075 * us, 8075 * us}));
  EXPECT_EQ(gpu.switches(), 3u);
  EXPECT_EQ(gpu.switch_time_ns(), 75 * us);
  EXPECT_EQ(gpu.completed_between(a, 0, 5050 * us), 2u);
  EXPECT_EQ(gpu.completed_between(a, 0, 5050 * us + 1), 3u);
}

TEST(GpuModel, ASliceEndPreemptsAKernelWhichResumesWithItsRemainder) {
  GpuModel gpu;
  const int a = gpu.add_context(), b = gpu.add_context();
  gpu.launch(a, 5 * ms);
  gpu.launch(b, 1 * ms);
  gpu.advance_to(3 * ms);
  EXPECT_EQ(gpu.busy_ns(a), 2 * ms);  // preempted at its slice end
  EXPECT_EQ(gpu.busy_ns(b), 975 * us);
  gpu.advance_to(20 * ms);
  EXPECT_EQ(gpu.completions(b), (std::vector<int64_t>{3025 * us}));
  EXPECT_EQ(gpu.completions(a), (std::vector<int64_t>{6050 * us}));  // 3 ms left from 3.05 ms
  EXPECT_EQ(gpu.busy_ns(a), 5 * ms);
}

TEST(GpuModel, ALoneContextKeepsTheEngineUntilAnotherHasWork) {
  GpuModel gpu;
  const int a = gpu.add_context(), b = gpu.add_context();
  gpu.launch(a, 10 * ms);
  gpu.advance_to(3 * ms);  // slices renewed at 2 ms (and 4 ms next)
  gpu.launch(b, 1 * ms);
  gpu.advance_to(30 * ms);
  EXPECT_EQ(gpu.completions(b), (std::vector<int64_t>{5025 * us}));   // from the 4 ms slice end
  EXPECT_EQ(gpu.completions(a), (std::vector<int64_t>{11050 * us}));  // 6 ms left from 5.05 ms
  EXPECT_EQ(gpu.switches(), 2u);
}

TEST(GpuModel, AnIdleEngineSwitchesOnlyForAnotherContext) {
  GpuModel gpu;
  const int a = gpu.add_context(), b = gpu.add_context();
  gpu.launch(a, 100 * us);  // the first context to run pays no switch
  gpu.advance_to(1 * ms);
  gpu.launch(a, 100 * us);  // still a's engine
  gpu.advance_to(2 * ms);
  gpu.launch(b, 100 * us);
  gpu.advance_to(3 * ms);
  EXPECT_EQ(gpu.completions(a), (std::vector<int64_t>{100 * us, 1100 * us}));
  EXPECT_EQ(gpu.completions(b), (std::vector<int64_t>{2125 * us}));
  EXPECT_EQ(gpu.switches(), 1u);
}

TEST(GpuModel, EventsAreStampedWhenTheEngineReachesThem) {
  GpuModel gpu;
  const int a = gpu.add_context(), b = gpu.add_context();
  const uint64_t at_once = gpu.record_event(a);
  EXPECT_NE(at_once, 0u);
  gpu.launch(a, 3 * ms);
  const uint64_t after_kernel = gpu.record_event(a);
  EXPECT_FALSE(gpu.event_time(at_once));  // not processed until advance_to
  gpu.advance_to(0);
  EXPECT_EQ(gpu.event_time(at_once), 0);
  const uint64_t on_b = gpu.record_event(b);  // b waits for a's slice, then a switch
  gpu.advance_to(2 * ms);
  EXPECT_FALSE(gpu.event_time(after_kernel));
  EXPECT_FALSE(gpu.event_time(on_b));
  gpu.advance_to(2025 * us);
  EXPECT_EQ(gpu.event_time(on_b), 2025 * us);  // the switch ends exactly at t: stamped
  gpu.advance_to(10 * ms);
  EXPECT_EQ(gpu.event_time(after_kernel), 3050 * us);
  EXPECT_EQ(gpu.live_events(), 3u);
  gpu.release_event(on_b);
  EXPECT_FALSE(gpu.event_known(on_b));
  EXPECT_FALSE(gpu.event_time(on_b));
  const uint64_t reused = gpu.record_event(b);  // same slot, new id
  EXPECT_NE(reused, on_b);
  EXPECT_FALSE(gpu.event_known(on_b));
  EXPECT_EQ(gpu.live_events(), 3u);
}

TEST(GpuModel, AdvancingInSmallStepsChangesNothing) {
  // The same workload, advanced in one go or in 7 us steps, ends identically:
  // advance_to never runs past t, and carries a kernel or a switch over exactly.
  auto run = [](int64_t step) {
    GpuModel gpu;
    const int a = gpu.add_context(), b = gpu.add_context(), c = gpu.add_context();
    uint64_t seed = 12345;
    for (int i = 0; i < 200; ++i) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      const int ctx = static_cast<int>(seed >> 62) % 3;
      gpu.launch(ctx == 0 ? a : ctx == 1 ? b : c, static_cast<int64_t>((seed >> 20) % 700) * us);
      if (i % 17 == 0) gpu.record_event(a);
    }
    for (int64_t t = 0; t < 100 * ms; t += step)
      gpu.advance_to(t);
    gpu.advance_to(100 * ms);
    std::vector<int64_t> all;
    for (int x : {a, b, c})
      all.insert(all.end(), gpu.completions(x).begin(), gpu.completions(x).end());
    all.push_back(gpu.switch_time_ns());
    return all;
  };
  const std::vector<int64_t> whole = run(100 * ms);
  EXPECT_EQ(whole.size(), 201u);
  EXPECT_EQ(run(7 * us), whole);
  EXPECT_EQ(run(1 * ms + 3), whole);
}

TEST(GpuModel, WatchStopsWhenAQueueFindsRoom) {
  GpuModel gpu;
  const int a = gpu.add_context();
  for (int i = 0; i < 4; ++i)
    gpu.launch(a, 100 * us);
  gpu.watch(a, 2);  // stop once fewer than 2 are queued
  EXPECT_EQ(gpu.advance_until_watch(1 * ms), 300 * us);
  EXPECT_EQ(gpu.queued(a), 1u);
  EXPECT_EQ(gpu.advance_until_watch(1 * ms), 300 * us);  // still below: stays put
  gpu.watch(a, 0);
  EXPECT_EQ(gpu.advance_until_watch(1 * ms), 1 * ms);
}

TEST(ModelTimer, MeasuresTheStreamOfItsContext) {
  GpuModel gpu;
  const int b = gpu.add_context(), a = gpu.add_context();
  ModelTimer timer(gpu, a, 1 * us);
  gpu.launch(b, 5 * ms);  // b has the engine first
  const auto start = timer.record(0);
  gpu.launch(a, 216 * us);
  const auto end = timer.record(0);
  EXPECT_NE(start, 0u);
  EXPECT_NE(end, 0u);
  EXPECT_EQ(timer.take_host_cost(), 2 * us);
  EXPECT_EQ(timer.take_host_cost(), 0);
  int64_t ns = -1;
  gpu.advance_to(1 * ms);
  EXPECT_EQ(timer.elapsed(start, end, &ns), Poll::kPending);
  gpu.advance_to(2 * ms + 25 * us + 215 * us);
  EXPECT_EQ(timer.elapsed(start, end, &ns), Poll::kPending);
  gpu.advance_to(2 * ms + 25 * us + 216 * us);
  ASSERT_EQ(timer.elapsed(start, end, &ns), Poll::kReady);
  EXPECT_EQ(ns, 216 * us);
  EXPECT_EQ(timer.live(), 2u);
  timer.release(start);
  timer.release(end);
  EXPECT_EQ(timer.live(), 0u);
  EXPECT_EQ(gpu.live_events(), 0u);
  EXPECT_EQ(timer.elapsed(start, end, &ns), Poll::kFailed);  // released
  timer.release(end);
  EXPECT_EQ(timer.bad_releases(), 1u);
}

TEST(ModelTimer, FailuresAndAGoneContext) {
  GpuModel gpu;
  const int a = gpu.add_context();
  ModelTimer timer(gpu, a);
  timer.fail_records(true);
  EXPECT_EQ(timer.record(0), 0u);
  timer.fail_records(false);
  const auto x = timer.record(0);
  const auto y = timer.record(0);
  gpu.advance_to(0);
  timer.invalidate_events();
  int64_t ns = 0;
  EXPECT_EQ(timer.elapsed(x, y, &ns), Poll::kFailed);
  EXPECT_EQ(gpu.live_events(), 0u);
  timer.release(x);  // harmless
  timer.release(y);
  EXPECT_EQ(timer.bad_releases(), 0u);
}

TEST(Tenants, UnlimitedComputeBoundKeepsTheGpuBusy) {
  Tenants sim;
  const int a = sim.add({.cycle = {{.key = 1, .gpu_ns = 216 * us, .host_ns = 10 * us}}});
  sim.run_until(1 * kSecond);
  // The GPU starts at 10 us and never idles: the host runs ahead until the
  // queue is full, then each completion lets one more launch in.
  EXPECT_EQ(sim.completed(a), static_cast<uint64_t>((kSecond - 10 * us) / (216 * us)));
  EXPECT_EQ(sim.gpu().queued(sim.context(a)), 1024u);
  EXPECT_EQ(sim.launches(a), sim.completed(a) + 1024);
}

TEST(Tenants, UnlimitedLaunchBoundIsHeldByItsHost) {
  Tenants sim;
  const int a = sim.add({.cycle = {{.key = 1, .gpu_ns = 3 * us, .host_ns = 3300}}});
  sim.run_until(100 * ms);
  EXPECT_EQ(sim.launches(a), static_cast<uint64_t>(100 * ms / 3300));
  EXPECT_GE(sim.completed(a) + 1, sim.launches(a));
  // Busy 3 of every 3.3 us (the last kernel may be part-way).
  const int64_t busy = sim.gpu().busy_ns(sim.context(a));
  EXPECT_GE(busy, 3 * us * static_cast<int64_t>(sim.completed(a)));
  EXPECT_LT(busy, 3 * us * static_cast<int64_t>(sim.completed(a) + 1));
}

TEST(Tenants, TwoUnlimitedTenantsShareTheGpuBySlices) {
  Tenants sim;
  const TenantSpec spec{.cycle = {{.key = 1, .gpu_ns = 216 * us, .host_ns = 10 * us}}};
  const int a = sim.add(spec), b = sim.add(spec);
  sim.run_until(1 * kSecond);
  const int64_t busy = sim.gpu().busy_ns(sim.context(a)) + sim.gpu().busy_ns(sim.context(b));
  EXPECT_EQ(busy + sim.gpu().switch_time_ns(), kSecond - 10 * us);  // never idle
  EXPECT_NEAR(static_cast<double>(sim.completed(a)), static_cast<double>(sim.completed(b)), 10.0);
}

}  // namespace
}  // namespace hami::test
