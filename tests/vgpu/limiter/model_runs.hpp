#pragma once
// Helpers for the limiter's scenarios on the simulated GPU: a workload run
// alone, limited or not, its GPU time (the model's kernel time, what CUPTI
// and NVML see on a real GPU) over the run and in each second, and the
// result printed and recorded in the test's XML.
//
//   const Outcome r = run_alone(one_kernel(216 * us, 10 * us), 30, 10 * kSecond);
//   report("compute-bound", 30, r.gpu_percent());

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
  int64_t busy_ns = 0;               // GPU time of the tenant's kernels in the span
  std::vector<double> busy_percent;  // ... in each whole second, in % of it
  int64_t span_ns = 0;
  vgpu::limiter::LimiterStats stats;
  int64_t cost = 0;  // what the limiter charged the first shape at the end
  double gpu_percent() const {
    return 100.0 * static_cast<double>(busy_ns) / static_cast<double>(span_ns);
  }
};

// `spec` alone on a GPU modelled with `gpu` for `span`, limited with
// `options` (nullptr: unlimited).
inline Outcome run_alone_with(const TenantSpec& spec, const vgpu::limiter::LimiterOptions* options,
                              int64_t span, const GpuModel::Options& gpu = {}) {
  Tenants sim(gpu);
  const int a = sim.add(spec);
  vgpu::limiter::LaunchLimiter* lim = options != nullptr ? &sim.limit(a, *options) : nullptr;
  Outcome r;
  r.span_ns = span;
  int64_t busy = 0;
  for (int64_t t = 0; t < span; t += kSecond) {
    const int64_t end = t + kSecond < span ? t + kSecond : span;
    sim.run_until(end);
    const int64_t now_busy = sim.gpu().busy_ns(sim.context(a));
    if (end - t == kSecond)
      r.busy_percent.push_back(100.0 * static_cast<double>(now_busy - busy) / kSecond);
    busy = now_busy;
  }
  r.busy_ns = busy;
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

// Expects the GPU time of every whole second of `r` after the first within
// `tolerance` points of `limit`; returns the worst second.
inline double expect_each_second_near(const Outcome& r, uint32_t limit, double tolerance) {
  double worst = limit;
  for (size_t s = 1; s < r.busy_percent.size(); ++s) {
    EXPECT_NEAR(r.busy_percent[s], limit, tolerance) << "limit " << limit << ", second " << s;
    if (std::abs(r.busy_percent[s] - limit) > std::abs(worst - limit)) worst = r.busy_percent[s];
  }
  return worst;
}

// Prints a measurement (by default the GPU time in percent of wall time)
// against what it should be, and records it in the test's XML.
inline void report(const std::string& what, uint32_t limit, double achieved, double target) {
  std::printf("[ limiter  ] %-50s share %2u%%: %6.2f%%, target %3.0f%% (%+.2f)\n", what.c_str(),
              limit, achieved, target, achieved - target);
  char value[32];
  std::snprintf(value, sizeof value, "%.2f", achieved);
  ::testing::Test::RecordProperty(what + " @" + std::to_string(limit), value);
}
inline void report(const std::string& what, uint32_t limit, double achieved) {
  report(what, limit, achieved, limit);
}

}  // namespace hami::test
