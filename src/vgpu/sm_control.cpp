#include "vgpu/sm_control.hpp"

#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <new>

#include "common/log.hpp"
#include "vgpu/real_driver.hpp"
#include "vgpu/runtime.hpp"

namespace hami::vgpu {

namespace {

// The device of the context a thread used last, so a launch costs one
// cuCtxGetCurrent rather than a device lookup.
struct ContextCache {
  cuda::CUcontext ctx = nullptr;
  uint32_t generation = 0;
  int device = -1;
};
thread_local ContextCache t_context;

constexpr int64_t kBlockedPollNs = 10'000'000;

}  // namespace

void SmControl::init(region::Region& region, const Config& cfg, Runtime* rt) noexcept {
  runtime_ = rt;
  policy_ = cfg.core_policy;
  // Under `disable` nothing is charged or paced: no limiter at all.
  if (policy_ == limiter::CorePolicy::kDisable) return;
  for (int d = 0; d < kMaxDevices; ++d) {
    // With the limits file the share is the file's: the state file's copy is
    // the tenant's to rewrite.
    const uint64_t pct = cfg.limits_file.empty() ? region.sm_limit(d) : cfg.sm_limit[d];
    if (pct == 0 || pct >= 100) continue;
    if (pct != cfg.sm_limit[d] && cfg.limits_file.empty()) {
      log::warn(
          "%s holds an SM limit of %llu%% for device %d but this process was started with "
          "%llu%%; the file's value applies (delete the file when changing limits)",
          region.path().c_str(), static_cast<unsigned long long>(pct), d,
          static_cast<unsigned long long>(cfg.sm_limit[d]));
    }
    percent_[static_cast<size_t>(d)].store(static_cast<uint32_t>(pct), std::memory_order_relaxed);
    any_limit_.store(true, std::memory_order_relaxed);
  }
  // A limits file can be resized to a share: the clocks are opened now, so
  // they never change under a launch.
  if (any_limit() || !cfg.limits_file.empty()) open_pace_clocks(region);
}

void SmControl::set_share(int dev, uint64_t percent, const region::Region& region) noexcept {
  if (policy_ == limiter::CorePolicy::kDisable || dev < 0 || dev >= kMaxDevices) return;
  const auto d = static_cast<size_t>(dev);
  const uint32_t p = percent == 0 || percent >= 100 ? 0 : static_cast<uint32_t>(percent);
  const uint32_t old = percent_[d].exchange(p, std::memory_order_relaxed);
  if (old == p) return;
  if (p != 0) {
    if (limiter::LaunchLimiter* lim = limiters_[d].load(std::memory_order_acquire)) {
      lim->set_share(p);
      if (clocks_broken_) lim->set_pace_percent(share_alone(dev, region));
    }
    any_limit_.store(true, std::memory_order_relaxed);
  }
  log::info("device %d: SM share %u%% -> %u%% (the limits file changed)", dev, old == 0 ? 100 : old,
            p == 0 ? 100 : p);
}

void SmControl::open_pace_clocks(const region::Region& region) noexcept {
  if (!region.file_backed()) return;  // a private region: this process is the container
  try {
    struct stat st {};
    const mode_t mode = ::fstat(region.fd(), &st) == 0 ? (st.st_mode & 07777) : 0666;
    auto clocks = region::PaceClocks::open(region.path() + ".pace", mode);
    if (!clocks) {
      // Failing closed: a tenant that breaks the file must not get the share
      // once per process.
      clocks_broken_ = true;
      log::error(
          "%s; each process of this container paces itself to the SM share divided among the "
          "container's processes. Check that the directory is writable",
          clocks.error().message.c_str());
      return;
    }
    clocks_.emplace(std::move(*clocks));
  } catch (...) {
    log::warn("out of memory opening the SM pace clocks; each process paces itself");
  }
}

limiter::LaunchLimiter* SmControl::create_limiter(int dev, region::Region& region) noexcept {
  const auto d = static_cast<size_t>(dev);
  std::lock_guard lock(create_mu_);
  if (limiter::LaunchLimiter* lim = limiters_[d].load(std::memory_order_acquire)) return lim;
  limiter::LimiterOptions opt;
  opt.percent = percent_[d].load(std::memory_order_relaxed);
  if (clocks_) {
    opt.shared_clock = clocks_->clock(dev);
    opt.shared_collectives = clocks_->collectives(dev);
    // Nobody paced this GPU for a while: its collectives are counted afresh,
    // as its peers' are once they start (an earlier run's ranks may have
    // been stopped a few collectives apart).
    if (std::atomic_ref<int64_t>(*opt.shared_clock).load(std::memory_order_relaxed) <
        region::pace_clock_now_ns() - limiter::kLivePeerNs) {
      std::atomic_ref<int64_t>(*opt.shared_collectives).store(0, std::memory_order_relaxed);
    }
  }
  const uint32_t alone = clocks_broken_ ? share_alone(dev, region) : 0;
  // The node agent and `vgpu top` read the container's SM utilisation there.
  if (const auto slot = region.own_slot())
    opt.published_ns = region.slot(*slot).publish_gpu_time(dev);
  auto* timer = new (std::nothrow) CudaEventTimer();
  auto* lim = timer != nullptr ? new (std::nothrow) limiter::LaunchLimiter(opt, *timer) : nullptr;
  if (lim == nullptr) {
    log::error("out of memory setting up the SM limit of device %d; it is not enforced", dev);
    delete timer;
    percent_[d].store(0, std::memory_order_relaxed);
    return nullptr;
  }
  if (alone != 0) lim->set_pace_percent(alone);
  lim->set_alone_percent(share_alone(dev, region));
  set_peers(*lim, dev, region);
  timers_[d].store(timer, std::memory_order_release);
  limiters_[d].store(lim, std::memory_order_release);
  if (alone != 0) {
    log::info("device %d: SM share %u%%, policy %s, paced by this process alone at %u%%", dev,
              opt.percent, limiter::to_string(policy_), alone);
  } else {
    log::info("device %d: SM share %u%%, policy %s, paced %s", dev, opt.percent,
              limiter::to_string(policy_),
              clocks_ ? "with the container's other processes" : "by this process alone");
  }
  return lim;
}

limiter::LaunchLimiter* SmControl::limiter_with_share(Runtime& rt) noexcept {
  const RealCuda& cu = real_cuda();
  cuda::CUcontext ctx = nullptr;
  if (cu.cuCtxGetCurrent == nullptr || cu.cuCtxGetCurrent(&ctx) != cuda::CUDA_SUCCESS ||
      ctx == nullptr) {
    return nullptr;
  }
  ContextCache& c = t_context;
  const uint32_t gen = generation_.load(std::memory_order_acquire);
  if (c.ctx != ctx || c.generation != gen) {
    c = ContextCache{ctx, gen, rt.current_device(nullptr)};
  }
  if (c.device < 0 || percent_[static_cast<size_t>(c.device)].load(std::memory_order_relaxed) == 0)
    return nullptr;
  limiter::LaunchLimiter* lim =
      limiters_[static_cast<size_t>(c.device)].load(std::memory_order_acquire);
  return lim != nullptr ? lim : create_limiter(c.device, rt.region());
}

void SmControl::set_peers(limiter::LaunchLimiter& lim, int dev,
                          const region::Region& region) noexcept {
  if (!clocks_) return;
  const int devices = static_cast<int>(std::min<uint64_t>(region.device_count(), kMaxDevices));
  std::array<const int64_t*, kMaxDevices> peers{};
  std::array<const int64_t*, kMaxDevices> collectives{};
  int n = 0;
  for (int e = 0; e < devices; ++e) {
    if (e == dev) continue;
    peers[static_cast<size_t>(n)] = clocks_->clock(e);
    collectives[static_cast<size_t>(n++)] = clocks_->collectives(e);
  }
  if (n > lim.peer_count()) {
    log::info(
        "device %d: while the container's %d other GPU(s) run too, launches go in the same "
        "windows on all of them (%d%% of every %lld ms)",
        dev, n, static_cast<int>(lim.percent()),
        static_cast<long long>(limiter::kGatePeriodNs / 1'000'000));
  }
  lim.set_peer_clocks(peers.data(), collectives.data(), n);
}

uint32_t SmControl::share_alone(int dev, const region::Region& region) const noexcept {
  const uint32_t share = percent_[static_cast<size_t>(dev)].load(std::memory_order_relaxed);
  const int32_t n = std::max<int32_t>(1, region.proc_num());
  return std::max<uint32_t>(1, share / static_cast<uint32_t>(n));
}

void SmControl::each_second(region::Region& region, int64_t second) noexcept {
  region.set_last_kernel_time(static_cast<uint64_t>(second));
  if (runtime_ != nullptr) runtime_->poll_limits();
  // Without the container's clock (the file unusable, or its clock found
  // rewound), this process paces to its part of the share; how many
  // processes share it may have changed.
  for (size_t d = 0; d < limiters_.size(); ++d) {
    limiter::LaunchLimiter* lim = limiters_[d].load(std::memory_order_acquire);
    if (lim == nullptr) continue;
    const uint32_t alone = share_alone(static_cast<int>(d), region);
    if (clocks_broken_) lim->set_pace_percent(alone);
    lim->set_alone_percent(alone);
    set_peers(*lim, static_cast<int>(d), region);
    if (lim->clock_abandoned() && !abandon_logged_[d].exchange(true)) {
      log::error(
          "device %zu: the container's SM pace clock was set back (%s was rewritten or "
          "replaced); this process paces by itself to %u%%, its part of the share",
          d, clocks_ ? clocks_->path().c_str() : "the pace file", alone);
    }
  }
  if (clocks_) {
    // A tenant may replace the file to split its processes onto two clocks.
    auto refreshed = clocks_->refresh();
    if (!refreshed) {
      log::error("%s; the SM pace clock stays on the file mapped before",
                 refreshed.error().message.c_str());
    } else if (*refreshed) {
      log::warn("%s was replaced or broken; pacing on the file it names now",
                clocks_->path().c_str());
    }
  }
}

void SmControl::context_gone(cuda::CUcontext ctx) noexcept {
  generation_.fetch_add(1, std::memory_order_acq_rel);
  for (size_t d = 0; d < limiters_.size(); ++d) {
    limiter::LaunchLimiter* lim = limiters_[d].load(std::memory_order_acquire);
    if (lim == nullptr) continue;
    lim->drop_samples();
    timers_[d].load(std::memory_order_acquire)->forget_context(ctx);
  }
}

void SmControl::forget(uint64_t key) noexcept {
  for (auto& slot : limiters_) {
    if (limiter::LaunchLimiter* lim = slot.load(std::memory_order_acquire)) lim->forget(key);
  }
}

void SmControl::wait_while_blocked(region::Region& region,
                                   const region::ControlView* control) noexcept {
  static std::atomic<bool> logged{false};
  if (!logged.exchange(true)) {
    log::info(
        "a high-priority task is busy on this GPU (the node agent says so in %s); launches wait "
        "until it is idle",
        control != nullptr ? control->path().c_str() : region.path().c_str());
  }
  const timespec step{0, kBlockedPollNs};
  if (control != nullptr) {
    while (control->blocked())
      ::nanosleep(&step, nullptr);
    return;
  }
  while (region.recent_kernel() < 0)
    ::nanosleep(&step, nullptr);
  region.exchange_recent_kernel(0, 2);
}

void SmControl::log_summary(region::Region& region) const noexcept {
  if (!log::enabled(log::Level::kInfo)) return;
  for (size_t d = 0; d < limiters_.size(); ++d) {
    const limiter::LaunchLimiter* lim = limiters_[d].load(std::memory_order_acquire);
    if (lim == nullptr) continue;
    const limiter::LimiterStats s = lim->stats();
    log::info(
        "device %zu (%s): SM share %u%%: launches kernel=%llu kernel_ex=%llu cooperative=%llu "
        "graph=%llu; charged %.3f ms, waited %.3f ms, %llu samples (%llu on an idle stream), %llu "
        "shapes, marks %.2f us, idle lag %.2f us; with %d other GPU(s): %llu collectives, %llu "
        "launches held to the next window, %llu collectives caught up",
        d, region.device_uuid(static_cast<int>(d)).c_str(), lim->percent(),
        static_cast<unsigned long long>(s.launches[0]),
        static_cast<unsigned long long>(s.launches[1]),
        static_cast<unsigned long long>(s.launches[2]),
        static_cast<unsigned long long>(s.launches[3]), static_cast<double>(s.charged_ns) / 1e6,
        static_cast<double>(s.waited_ns) / 1e6, static_cast<unsigned long long>(s.samples),
        static_cast<unsigned long long>(s.idle_samples), static_cast<unsigned long long>(s.shapes),
        static_cast<double>(s.mark_ns) / 1e3, static_cast<double>(s.idle_lag_ns) / 1e3,
        lim->peer_count(), static_cast<unsigned long long>(s.collectives),
        static_cast<unsigned long long>(s.gate_waits),
        static_cast<unsigned long long>(s.gate_catch_ups));
  }
}

}  // namespace hami::vgpu
