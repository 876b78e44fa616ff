#include "vgpu/runtime.hpp"

#include <pthread.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <mutex>
#include <new>

#include "common/bytes.hpp"
#include "common/log.hpp"
#include "common/small_file.hpp"
#include "protocol/container_contract.hpp"
#include "region/process_identity.hpp"
#include "vgpu/real_driver.hpp"

namespace hami::vgpu {

using region::UsageKind;

namespace {

enum State : int {
  kUninit = 0,
  kPassThrough = detail::kRuntimePassThrough,
  kReady = detail::kRuntimeReady
};

std::atomic<int> g_active{-1};
std::mutex g_init_mu;

region::InitialValues initial_values(const Config& cfg) {
  region::InitialValues v;
  for (int d = 0; d < kMaxDevices; ++d) {
    // A refused device is stored as a 1-byte limit, which every reader of the
    // file (HAMi's monitor too) understands as "nothing fits".
    v.memory_limit[d] = cfg.memory_denied[d] ? 1 : cfg.memory_limit[d];
    v.sm_limit[d] = cfg.sm_limit[d];
  }
  v.priority = cfg.priority;
  return v;
}

}  // namespace

namespace detail {
std::atomic<int> g_runtime_state{kUninit};
Runtime* g_runtime = nullptr;
}  // namespace detail
using detail::g_runtime;
using detail::g_runtime_state;

struct RuntimeLifecycle {
  static void fork_child() noexcept { Runtime::on_fork_child(); }
  static void exit() noexcept { Runtime::on_exit(); }
};

const Config& Runtime::config() noexcept {
  static std::once_flag once;
  static const Config* cfg = nullptr;
  std::call_once(once, [] {
    try {
      cfg = new Config(load_config(process_sources()));
    } catch (...) {
      static const Config fallback;
      cfg = &fallback;
    }
  });
  return *cfg;
}

bool Runtime::hooks_active() noexcept {
  int a = g_active.load(std::memory_order_acquire);
  if (a < 0) {
    a = config().accounting_needed() ? 1 : 0;
    g_active.store(a, std::memory_order_release);
  }
  return a == 1;
}

Runtime* Runtime::accounting_slow() noexcept {
  const int s = g_runtime_state.load(std::memory_order_acquire);
  if (s == kReady) return g_runtime;
  if (s == kPassThrough) return nullptr;
  std::lock_guard lock(g_init_mu);
  if (g_runtime_state.load(std::memory_order_relaxed) == kUninit) {
    g_runtime = hooks_active() ? create() : nullptr;
    g_runtime_state.store(g_runtime != nullptr ? kReady : kPassThrough, std::memory_order_release);
  }
  return g_runtime;
}

Runtime::Runtime(region::Region region, int slot)
    : region_(std::move(region)), slot_(slot), devices_(region_) {}

Runtime* Runtime::create() noexcept {
  try {
    const Config& cfg = config();
    for (const std::string& e : cfg.errors)
      log::error("%s", e.c_str());
    for (const std::string& w : cfg.warnings)
      log::warn("%s", w.c_str());

    region::OpenOptions opt;
    opt.initial = initial_values(cfg);
    auto region = region::Region::open(cfg.state_file, opt);
    if (!region) {
      log::error(
          "%s; limits are enforced for this process alone, and the node agent cannot "
          "see it. Check that the directory exists and is writable",
          region.error().message.c_str());
      region = region::Region::create_private(opt.initial);
      if (!region) {
        log::error("%s; memory is not limited in this process", region.error().message.c_str());
        return nullptr;
      }
    }
    auto me = region::self_identity();
    if (!me) {
      log::error("%s; memory is not limited in this process", me.error().message.c_str());
      return nullptr;
    }
    auto slot = region->register_process(*me, region::SweepOptions{.check_untagged_pids = true});
    if (!slot) {
      log::error("%s; memory is not limited in this process", slot.error().message.c_str());
      return nullptr;
    }

    auto* rt = new Runtime(std::move(*region), *slot);
    rt->limits_from_file_ = !cfg.limits_file.empty();
    rt->oversubscribe_ = cfg.oversubscribe;
    for (int d = 0; d < kMaxDevices; ++d) {
      const uint64_t mine = opt.initial.memory_limit[d];
      if (rt->limits_from_file_) {
        // The read-only file governs; the writable state file only mirrors it.
        rt->limits_[d].store(mine, std::memory_order_relaxed);
        if (rt->region_.memory_limit(d) != mine) rt->region_.set_memory_limit(d, mine);
        if (!cfg.mps_client && rt->region_.sm_limit(d) != cfg.sm_limit[d])
          rt->region_.set_sm_limit(d, cfg.sm_limit[d]);
      } else {
        // Upstream semantics: the process that created the file set the limits.
        rt->limits_[d].store(rt->region_.memory_limit(d), std::memory_order_relaxed);
        if (mine != rt->limits_[d].load(std::memory_order_relaxed)) {
          log::warn(
              "%s holds a memory limit of %s for device %d but this process was started "
              "with %s; the file's value applies (delete the file when changing limits)",
              rt->region_.path().c_str(), format_bytes(rt->limit(d)).c_str(), d,
              format_bytes(mine).c_str());
        }
      }
    }
    if (!cfg.device_uuids.empty()) rt->devices_.set_trusted(cfg.device_uuids);
    if (!cfg.control_file.empty()) {
      auto view = region::ControlView::open(cfg.control_file);
      if (view) {
        rt->control_.emplace(std::move(*view));
      } else {
        // Present but unusable: never let that turn a share off.
        log::error("%s; the SM share is enforced at all times until it can be read",
                   view.error().message.c_str());
        rt->control_.emplace(region::ControlView::fixed(region::ControlState{}));
      }
    }
    // The stamp starts empty: the first look reads the file again, in case it
    // was replaced since this process's configuration was read.
    if (rt->limits_from_file_) rt->limits_path_ = cfg.limits_file;
    rt->mps_client_ = cfg.mps_client;
    rt->sm_.init(rt->region_, cfg, rt);
    static std::once_flag atfork;
    std::call_once(atfork,
                   [] { ::pthread_atfork(nullptr, nullptr, &RuntimeLifecycle::fork_child); });
    log::info("%s: slot %d, accounting on", rt->region_.path().c_str(), *slot);
    return rt;
  } catch (...) {
    log::error("out of memory while starting; memory is not limited in this process");
    return nullptr;
  }
}

void Runtime::on_fork_child() noexcept {
  // The child shares the parent's open file description and with it the
  // parent's slot lock: let go of all of it and start afresh on the next call.
  new (&g_init_mu) std::mutex();
  if (Runtime* old = g_runtime) {
    old->region_.abandon();
    old->pointers_.clear();
    old->vmm_.reset();
    old->graph_memory_.reset();
    old->modules_.reset();
    old->arrays_.clear();
    old->contexts_.reset();
    old->pools_.reset();
    old->probe_.reset();
    // Leaked deliberately: nothing else in the child may still point into it.
  }
  g_runtime = nullptr;
  if (g_runtime_state.load() == kReady) g_runtime_state.store(kUninit);
}

void Runtime::on_exit() noexcept {
  if (g_runtime_state.load() != kReady || g_runtime == nullptr) return;
  // Hooks that run later (other threads, late destructors) pass through.
  g_runtime_state.store(kPassThrough);
  g_runtime->sm_.log_summary(g_runtime->region_);
  g_runtime->region_.unregister_process();
}

uint64_t Runtime::change_own(int dev, UsageKind kind, uint64_t bytes, bool add) noexcept {
  const auto d = static_cast<size_t>(dev);
  while (own_lock_.test_and_set(std::memory_order_acquire)) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  std::atomic<uint64_t>& field = kind == UsageKind::kContext ? own_context_[d] : own_data_[d];
  const uint64_t cur = field.load(std::memory_order_relaxed);
  uint64_t next;
  if (add) {
    next = cur > UINT64_MAX - bytes ? UINT64_MAX : cur + bytes;
  } else {
    next = cur > bytes ? cur - bytes : 0;
  }
  field.store(next, std::memory_order_relaxed);
  const uint64_t ctx = own_context_[d].load(std::memory_order_relaxed);
  const uint64_t data = own_data_[d].load(std::memory_order_relaxed);
  region_.slot(slot_).set_usage(dev, ctx, data);
  own_lock_.clear(std::memory_order_release);
  return ctx > UINT64_MAX - data ? UINT64_MAX : ctx + data;
}

uint64_t Runtime::own_usage(int dev) const noexcept {
  if (dev < 0 || dev >= kMaxDevices) return 0;
  const auto d = static_cast<size_t>(dev);
  const uint64_t ctx = own_context_[d].load(std::memory_order_relaxed);
  const uint64_t data = own_data_[d].load(std::memory_order_relaxed);
  return ctx > UINT64_MAX - data ? UINT64_MAX : ctx + data;
}

void Runtime::change_spilled(int dev, uint64_t bytes, bool add) noexcept {
  if (dev < 0 || dev >= kMaxDevices || bytes == 0) return;
  const auto d = static_cast<size_t>(dev);
  while (own_lock_.test_and_set(std::memory_order_acquire)) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  const uint64_t cur = own_spilled_[d].load(std::memory_order_relaxed);
  const uint64_t next =
      add ? (cur > UINT64_MAX - bytes ? UINT64_MAX : cur + bytes) : (cur > bytes ? cur - bytes : 0);
  own_spilled_[d].store(next, std::memory_order_relaxed);
  region_.slot(slot_).set_spilled(dev, next);
  own_lock_.clear(std::memory_order_release);
}

uint64_t Runtime::own_spilled(int dev) const noexcept {
  if (dev < 0 || dev >= kMaxDevices) return 0;
  return own_spilled_[static_cast<size_t>(dev)].load(std::memory_order_relaxed);
}

namespace {
// How often settle() asks NVML, and the difference it lets pass uncharged:
// charges and the driver's figure agree to the page on every hooked path
// (tests/gpu/results/gpu-suite-h200.txt); past it, all of it is charged.
constexpr int64_t kSettleIntervalNs = 100'000'000;
constexpr uint64_t kSettleSlack = 4ull << 20;

int64_t coarse_now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}
}  // namespace

void Runtime::settle(int dev, bool now) noexcept {
  if (dev < 0 || dev >= kMaxDevices) return;
  const auto d = static_cast<size_t>(dev);
  // Without a limit there is nothing to settle, but a resize may give one.
  if (limits_[d].load(std::memory_order_relaxed) == 0 && limits_path_.empty()) return;
  const int64_t t = coarse_now_ns();
  int64_t last = settled_at_ns_[d].load(std::memory_order_relaxed);
  if (!now && t - last < kSettleIntervalNs) return;
  if (!settled_at_ns_[d].compare_exchange_strong(last, t, std::memory_order_relaxed) && !now)
    return;
  if (!now) poll_limits();
  if (limits_[d].load(std::memory_order_relaxed) == 0) return;
  // A measurement in progress (a context, a module) would be counted twice.
  std::unique_lock measuring(probe_.mutex(), std::try_to_lock);
  if (!measuring.owns_lock()) return;
  const ProcessMemoryProbe::Sample s = probe_.sample(*this, dev);
  // NVML lists only processes holding memory: once it has named this one,
  // not listing it means it holds nothing there.
  if (s.process) nvml_names_me_.store(true, std::memory_order_relaxed);
  if (!s.process && !nvml_names_me_.load(std::memory_order_relaxed)) return;
  const uint64_t held = s.process.value_or(0);
  const uint64_t extra = unexplained_[d].load(std::memory_order_relaxed);
  const uint64_t hooked = own_usage(dev) > extra ? own_usage(dev) - extra : 0;
  const uint64_t want = held > hooked + kSettleSlack ? held - hooked : 0;
  if (want == extra) {
    lower_seen_[d].store(0, std::memory_order_relaxed);
    return;
  }
  if (want < extra) {
    // Lower only on a second look that agrees, never below either look.
    const uint64_t seen = lower_seen_[d].exchange(want + 1, std::memory_order_relaxed);
    if (seen == 0 || now) return;
    const uint64_t lower = std::max(want, seen - 1);
    change_own(dev, UsageKind::kContext, extra - lower, false);
    unexplained_[d].store(lower, std::memory_order_relaxed);
    lower_seen_[d].store(0, std::memory_order_relaxed);
    return;
  }
  lower_seen_[d].store(0, std::memory_order_relaxed);
  change_own(dev, UsageKind::kContext, want - extra, true);
  unexplained_[d].store(want, std::memory_order_relaxed);
  if (log::enabled(log::Level::kInfo)) {
    log::info(
        "device %d: the driver holds %s for this process where the hooks charged %s; "
        "the difference is charged",
        dev, format_bytes(held).c_str(), format_bytes(hooked).c_str());
  }
}

bool Runtime::reserve(int dev, UsageKind kind, uint64_t bytes) noexcept {
  if (dev < 0 || dev >= kMaxDevices || bytes == 0) return true;
  change_own(dev, kind, bytes, true);
  const uint64_t lim = limits_[static_cast<size_t>(dev)].load(std::memory_order_relaxed);
  if (lim == 0 || usage(dev) <= lim) return true;
  // What stands in the way may be dead processes' usage, or pool memory the
  // driver has released since we last looked: reclaim both once.
  auto swept = region_.sweep(region::SweepOptions{.check_untagged_pids = true});
  bool reclaimed = swept && !swept->reclaimed.empty();
  if (pools_.shrink_all(*this)) reclaimed = true;
  if (reclaimed && usage(dev) <= lim) return true;
  settle(dev, true);
  if (usage(dev) <= lim) return true;
  change_own(dev, kind, bytes, false);
  if (log::enabled(log::Level::kWarn)) {
    log::warn("device %d (%s): refused %s: the container already uses %s of its %s limit", dev,
              region_.device_uuid(dev).c_str(), format_bytes(bytes).c_str(),
              format_bytes(usage(dev)).c_str(), format_bytes(lim).c_str());
  }
  return false;
}

void Runtime::force_charge(int dev, UsageKind kind, uint64_t bytes) noexcept {
  if (dev < 0 || dev >= kMaxDevices || bytes == 0) return;
  change_own(dev, kind, bytes, true);
}

void Runtime::release(int dev, UsageKind kind, uint64_t bytes) noexcept {
  if (dev < 0 || dev >= kMaxDevices || bytes == 0) return;
  change_own(dev, kind, bytes, false);
}

bool Runtime::adjust(int dev, UsageKind kind, uint64_t from, uint64_t to) noexcept {
  if (to > from) return reserve(dev, kind, to - from);
  release(dev, kind, from - to);
  return true;
}

uint64_t Runtime::limit(int dev) const noexcept {
  return dev >= 0 && dev < kMaxDevices
             ? limits_[static_cast<size_t>(dev)].load(std::memory_order_relaxed)
             : 0;
}

namespace {
constexpr int64_t kLimitsPollNs = 100'000'000;
}  // namespace

void Runtime::poll_limits() noexcept {
  if (limits_path_.empty()) return;
  const int64_t t = coarse_now_ns();
  int64_t last = limits_polled_ns_.load(std::memory_order_relaxed);
  if (t - last < kLimitsPollNs) return;
  if (!limits_polled_ns_.compare_exchange_strong(last, t, std::memory_order_relaxed)) return;
  if (reloading_.test_and_set(std::memory_order_acquire)) return;
  reload_limits();
  reloading_.clear(std::memory_order_release);
}

void Runtime::reload_limits() noexcept {
  try {
    struct stat st {};
    if (::stat(limits_path_.c_str(), &st) != 0) return;  // gone: the limits stay
    const FileStamp stamp{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                          static_cast<uint64_t>(st.st_size),
                          int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec,
                          int64_t{st.st_ctim.tv_sec} * 1'000'000'000 + st.st_ctim.tv_nsec};
    if (stamp == limits_stamp_) return;
    limits_stamp_ = stamp;
    auto text = read_small_file(limits_path_, protocol::kMaxLimitsFileSize);
    if (!text) {
      log::error("%s; the limits stay as they were", text.error().message.c_str());
      return;
    }
    const protocol::ContainerLimits l = protocol::parse_limits_file(*text, limits_path_);
    if (l.corrupt) {
      log::error("%s: corrupt after a change; the limits stay as they were (%s)",
                 limits_path_.c_str(), l.errors.empty() ? "" : l.errors[0].c_str());
      return;
    }
    const int devices = static_cast<int>(std::min<uint64_t>(region_.device_count(), kMaxDevices));
    for (int d = 0; d < kMaxDevices; ++d) {
      const auto i = static_cast<size_t>(d);
      // A refused device is a 1-byte limit, as at start (initial_values).
      const uint64_t mem = l.memory_denied[i] ? 1 : l.memory_limit[i];
      const uint64_t old = limits_[i].exchange(mem, std::memory_order_relaxed);
      if (region_.memory_limit(d) != mem) region_.set_memory_limit(d, mem);
      if (!mps_client_) {
        if (region_.sm_limit(d) != l.sm_limit[i]) region_.set_sm_limit(d, l.sm_limit[i]);
        sm_.set_share(d, l.sm_limit[i], region_);
      }
      if (old == mem || d >= std::max(devices, 1)) continue;
      log::info("device %d: memory limit %s -> %s (the limits file changed)", d,
                old == 0 ? "none" : format_bytes(old).c_str(),
                mem == 0 ? "none" : format_bytes(mem).c_str());
      if (mem != 0 && usage(d) > mem) {
        log::warn(
            "device %d: the container holds %s, over its new %s limit: nothing is taken back; "
            "allocations are refused until it is under",
            d, format_bytes(usage(d)).c_str(), format_bytes(mem).c_str());
      }
    }
    for (const std::string& e : l.errors)
      log::error("%s", e.c_str());
  } catch (...) {
    log::error("out of memory reading %s; the limits stay as they were", limits_path_.c_str());
  }
}

uint64_t Runtime::usage(int dev) const noexcept {
  const uint64_t own = own_usage(dev);
  const uint64_t others = region_.device_usage_excluding(dev, slot_);
  return own > UINT64_MAX - others ? UINT64_MAX : own + others;
}

int Runtime::current_device(cuda::CUdevice* ordinal) noexcept {
  const RealCuda& cu = real_cuda();
  cuda::CUdevice o = -1;
  if (cu.cuCtxGetDevice == nullptr || cu.cuCtxGetDevice(&o) != cuda::CUDA_SUCCESS) return -1;
  if (ordinal != nullptr) *ordinal = o;
  return devices_.index_for_ordinal(o);
}

int32_t Runtime::own_host_pid() noexcept {
  return region_.slot(slot_).host_pid();
}

void Runtime::forget_allocations(int dev) noexcept {
  if (dev < 0) return;
  for (const Allocation& a : pointers_.erase_device(dev))
    release(a);
  for (const Allocation& a : arrays_.erase_device(dev))
    release(a);
}

}  // namespace hami::vgpu

// Runs when the process exits (or the library is unloaded): our slot and its
// usage go back at once instead of waiting for a sweep.
__attribute__((destructor)) static void hami_vgpu_on_exit() {
  hami::vgpu::RuntimeLifecycle::exit();
}
