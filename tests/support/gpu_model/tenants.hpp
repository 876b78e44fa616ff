#pragma once
// Tenants: simulated processes sharing one GpuModel, each launching kernels
// through the same per-launch protocol as libvgpu.so's launch hooks
// (src/vgpu/launch_hooks.cpp, paced()): admit (charged always, paced only
// while the share is enforced, from TenantSpec::enforced_from_ns); a wait of
// 50 us or more ends the thread's window and sleeps until 2 ms past the
// pacer's time, harvesting at least every 2 ms; before_launch; the launch
// call, which takes TenantSpec::launch_ns of host time and reaches the GPU as
// it returns, and blocks while the context has 1024 ops queued, as CUDA does;
// after_launch; harvest. A sample's start mark is made before the call and
// its end mark after it, each costing TenantSpec::record_cost_ns of host
// time. Inside a batch, launches of the batched shape go light: only the
// call. The hook's own time (TenantSpec::hook_ns) comes after the call. A
// tenant without a limiter launches straight away. Everything runs on the
// model's simulated clock, in time order, one action at a time:
// deterministic and fast.
//
//   Tenants sim;
//   int a = sim.add({.cycle = {{.key = 1, .gpu_ns = 216'000, .host_ns = 10'000}}});
//   sim.limit(a, {.percent = 30});
//   sim.run_until(10 * kSecond);
//   sim.gpu().busy_ns(sim.context(a));   // GPU time of `a`'s kernels in 10 s

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "gpu_model/gpu_model.hpp"
#include "vgpu/limiter/launch_limiter.hpp"

namespace hami::test {

inline constexpr int64_t kMicrosecond = 1'000;
inline constexpr int64_t kMillisecond = 1'000'000;
inline constexpr int64_t kSecond = 1'000'000'000;

// One launch of a tenant's repeating cycle.
struct Shape {
  uint64_t key = 1;
  int64_t gpu_ns = 0;   // the kernel's (or graph's) time on the GPU when it runs alone
  int64_t host_ns = 0;  // host time before the launch: the program's CPU work and the call
  vgpu::limiter::LaunchPath path = vgpu::limiter::LaunchPath::kKernel;
};

struct TenantSpec {
  std::vector<Shape> prologue;  // launched once, in order, first
  std::vector<Shape> cycle;     // then these, in order, over and over
  int64_t start_ns = 0;
  size_t queue_limit = 1024;       // launches block while this many ops are queued
  int64_t record_cost_ns = 1'000;  // host time of one GPU timestamp
  int64_t launch_ns = 0;           // host time of the driver's launch call
  uintptr_t stream = 1;            // what before_launch is told
  int64_t hook_ns = 0;             // host time libvgpu.so's hook takes per launch that is not light
  // Until then the tenant's share is not enforced (charged, not paced; 0:
  // always enforced).
  int64_t enforced_from_ns = 0;
};

class Tenants {
 public:
  // As in launch_hooks.cpp.
  static constexpr int64_t kMinWaitNs = 50'000;
  static constexpr int64_t kWaitSliceNs = 2'000'000;
  static constexpr int64_t kBatchNs = 2'000'000;

  Tenants() : Tenants(GpuModel::Options{}) {}
  explicit Tenants(const GpuModel::Options& gpu) : gpu_(gpu) {}

  // A process with its own context on the GPU; returns its number.
  int add(const TenantSpec& spec);
  // Paces tenant `i` with `lim` (nullptr: unlimited), which should time the
  // GPU with timer(i).
  void attach(int i, vgpu::limiter::LaunchLimiter* lim) { t(i).lim = lim; }
  // Paces tenant `i` with a limiter of its own, over timer(i).
  vgpu::limiter::LaunchLimiter& limit(int i, const vgpu::limiter::LimiterOptions& options);

  // Runs every tenant up to time `end`; may be called again to go on.
  void run_until(int64_t end);

  GpuModel& gpu() { return gpu_; }
  ModelTimer& timer(int i) { return t(i).timer; }
  vgpu::limiter::SampleWindow& window(int i) { return t(i).w; }
  int context(int i) const { return tenants_[static_cast<size_t>(i)]->ctx; }
  uint64_t launches(int i) const { return tenants_[static_cast<size_t>(i)]->launches; }
  int64_t waited_ns(int i) const { return tenants_[static_cast<size_t>(i)]->waited_ns; }
  uint64_t completed(int i) const { return gpu_.completed(context(i)); }
  uint64_t completed_between(int i, int64_t t0, int64_t t1) const {
    return gpu_.completed_between(context(i), t0, t1);
  }

 private:
  enum class Phase { kHost, kWaiting, kCalling, kBlocked, kUnblocked };
  struct Tenant {
    Tenant(GpuModel& gpu, const TenantSpec& s)
        : spec(s), ctx(gpu.add_context()), timer(gpu, ctx, s.record_cost_ns) {}
    TenantSpec spec;
    int ctx;
    ModelTimer timer;
    vgpu::limiter::LaunchLimiter* lim = nullptr;
    std::unique_ptr<vgpu::limiter::LaunchLimiter> owned;
    vgpu::limiter::SampleWindow w;
    Phase phase = Phase::kHost;
    int64_t next = 0;      // time of the tenant's next action
    int64_t call_ns = 0;   // paced()'s `now`
    bool light = false;    // the launch under way went light (LaunchLimiter::light_launch)
    bool sampled = false;  // the launch under way is sampled
    int64_t go_ns = 0;     // the pacer's answer, while waiting
    size_t shape = 0;      // in the prologue, then (from prologue.size()) the cycle
    uint64_t launches = 0;
    int64_t waited_ns = 0;
  };

  Tenant& t(int i) { return *tenants_[static_cast<size_t>(i)]; }
  static const Shape& shape(const Tenant& x);
  void step(Tenant& x);
  bool enforced(const Tenant& x, int64_t now) const { return now >= x.spec.enforced_from_ns; }
  void launch(Tenant& x, int64_t now);
  // The driver's launch call returns at `at` (its host time), or at once.
  void call_after(Tenant& x, int64_t now, int64_t at);
  void call(Tenant& x, int64_t now);  // the driver's launch call, as it returns
  void enqueue(Tenant& x, int64_t at);

  GpuModel gpu_;
  std::vector<std::unique_ptr<Tenant>> tenants_;
};

}  // namespace hami::test
