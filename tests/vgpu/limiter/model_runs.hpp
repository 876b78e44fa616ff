#pragma once
// Helpers for the limiter's scenarios on the simulated GPU: a workload run
// alone, limited or not, and the achieved share printed and recorded in the
// test's XML. Shared by launch_limiter_test.cpp and sustain_run_test.cpp.
//
//   const Outcome solo = run_alone(one_kernel(216 * us, 10 * us), 0, 10 * kSecond);
//   const Outcome r = run_alone(one_kernel(216 * us, 10 * us), 30, 10 * kSecond);
//   report("compute-bound", 30, percent_of(r.done, solo.done));

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gpu_model/gpu_model.hpp"
#include "gpu_model/tenants.hpp"
#include "vgpu/limiter/launch_limiter.hpp"

namespace hami::test {

inline constexpr int64_t us = kMicrosecond;
inline constexpr int64_t ms = kMillisecond;

inline TenantSpec one_kernel(int64_t gpu_ns, int64_t host_ns, uint64_t key = 0x5eed) {
  return TenantSpec{.cycle = {{.key = key, .gpu_ns = gpu_ns, .host_ns = host_ns}}};
}

inline vgpu::limiter::LimiterOptions at(uint32_t percent) {
  vgpu::limiter::LimiterOptions o;
  o.percent = percent;
  return o;
}

struct Outcome {
  uint64_t done = 0;                 // kernels finished in the span
  std::vector<uint64_t> per_second;  // ... in each whole second
  vgpu::limiter::LimiterStats stats;
  int64_t cost = 0;  // what the limiter charged the first shape at the end
};

// `spec` alone on a GPU modelled with `gpu` for `span`, limited with
// `options` (nullptr: unlimited).
inline Outcome run_alone_with(const TenantSpec& spec, const vgpu::limiter::LimiterOptions* options,
                              int64_t span, const GpuModel::Options& gpu = {}) {
  Tenants sim(gpu);
  const int a = sim.add(spec);
  vgpu::limiter::LaunchLimiter* lim = options != nullptr ? &sim.limit(a, *options) : nullptr;
  sim.run_until(span);
  Outcome r;
  r.done = sim.completed_between(a, 0, span);
  for (int64_t t = 0; t + kSecond <= span; t += kSecond)
    r.per_second.push_back(sim.completed_between(a, t, t + kSecond));
  if (lim != nullptr) {
    r.stats = lim->stats();
    const uint64_t key = spec.cycle.empty() ? 0 : spec.cycle[0].key;
    r.cost = lim->cost_of(key);
  }
  return r;
}

// The same at `percent` with the default options (0: unlimited).
inline Outcome run_alone(const TenantSpec& spec, uint32_t percent, int64_t span,
                         const GpuModel::Options& gpu = {}) {
  const vgpu::limiter::LimiterOptions o = at(percent);
  return run_alone_with(spec, percent != 0 ? &o : nullptr, span, gpu);
}

inline double percent_of(uint64_t part, uint64_t whole) {
  return 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

// What a second of a limited run is compared with: the same second of the
// unlimited run, or its average second (as bench/sm_limit does on a GPU).
enum class Against { kSameSecond, kAverageSecond };

// Expects every whole second of `r` after the first within `tolerance` points
// of `limit`, against `solo`; returns the worst second.
inline double expect_each_second_near(const Outcome& r, const Outcome& solo, uint32_t limit,
                                      double tolerance, Against against = Against::kSameSecond) {
  double worst = limit;
  const uint64_t average = solo.done / solo.per_second.size();
  for (size_t s = 1; s < r.per_second.size(); ++s) {
    const double second =
        percent_of(r.per_second[s], against == Against::kSameSecond ? solo.per_second[s] : average);
    EXPECT_NEAR(second, limit, tolerance) << "limit " << limit << ", second " << s;
    if (std::abs(second - limit) > std::abs(worst - limit)) worst = second;
  }
  return worst;
}

// Prints a measurement, what the limited run achieved in percent of the
// unlimited one against what it should, and records it in the test's XML.
inline void report(const std::string& what, uint32_t limit, double achieved, double target) {
  std::printf("[ limiter  ] %-46s limit %2u%%: %6.2f%% of unlimited, target %3.0f%% (%+.2f)\n",
              what.c_str(), limit, achieved, target, achieved - target);
  char value[32];
  std::snprintf(value, sizeof value, "%.2f", achieved);
  ::testing::Test::RecordProperty(what + " @" + std::to_string(limit), value);
}
inline void report(const std::string& what, uint32_t limit, double achieved) {
  report(what, limit, achieved, limit);
}

}  // namespace hami::test
