#pragma once
// SharePacer: holds the GPU time a container is charged to a share of wall
// time. Each launch is charged its estimated GPU time `cost`; at a share of p %
// it "occupies" cost * 100 / p of wall time on a virtual clock (the theoretical
// arrival time of the generic cell-rate algorithm). A launch may start once the
// work admitted ahead of it is at most `burst` of wall time in the future, so
// over any interval the charged time is at most p % of it plus one burst.
// Lock-free: one compare-and-swap per launch, shared by every thread, and by
// every process of the container when the clock lives in shared memory
// (region::PaceClocks).
//
// A shared clock is writable by every process of the container, a hostile one
// included, and it never runs backwards on its own (every change is a
// compare-and-swap to a later time). So each pacer remembers the latest time
// it set; a clock found earlier than that was rewound (or its file replaced),
// and the pacer leaves it for a clock of its own, starting from that time:
// clock_abandoned() then tells its owner to pace this process to its part of
// the share (SmControl). A rewind wins no launch any earlier.
//
//   SharePacer pacer;                        // or SharePacer pacer(clocks.clock(dev));
//   int64_t go = pacer.admit(cost_ns, 30, now_ns, 5'000'000);
//   if (go > now_ns) sleep_until(go);

#include <atomic>
#include <cstdint>

namespace hami::vgpu::limiter {

// The wall time a launch costing `cost_ns` of GPU time occupies at `percent`;
// rounded up: truncation would favour the tenant by a nanosecond a launch.
inline int64_t occupancy_ns(int64_t cost_ns, uint32_t percent) noexcept {
  return (cost_ns * 100 + percent - 1) / static_cast<int64_t>(percent);
}

class SharePacer {
 public:
  SharePacer() noexcept = default;
  // Paces against `shared_clock` (8-byte aligned, zero or a clock of the same
  // boot's CLOCK_MONOTONIC) instead of a clock of its own.
  explicit SharePacer(int64_t* shared_clock) noexcept
      : tat_(shared_clock != nullptr ? shared_clock : &own_) {}
  SharePacer(const SharePacer&) = delete;
  SharePacer& operator=(const SharePacer&) = delete;

  // Charges one launch and returns the earliest time it may start (at or
  // before `now`: at once). `percent` is in [1, 99].
  int64_t admit(int64_t cost_ns, uint32_t percent, int64_t now_ns, int64_t burst_ns) noexcept {
    const int64_t occupied = occupancy_ns(cost_ns, percent);
    return advance(now_ns, [occupied](int64_t start) { return start + occupied; }) - burst_ns;
  }

  // Moves the clock from `start`, its time or `now` when behind (an idle
  // spell earns no credit), to next(start), a later time; returns `start`.
  // (DutyGate keeps the device's queue tail here.)
  template <class Next>
  int64_t advance(int64_t now_ns, Next&& next) noexcept {
    const int64_t floor = floor_.load(std::memory_order_relaxed);
    int64_t* clock = tat_.load(std::memory_order_relaxed);
    int64_t old = std::atomic_ref<int64_t>(*clock).load(std::memory_order_relaxed);
    if (old < floor) [[unlikely]] {
      clock = abandon_clock(floor);
      old = std::atomic_ref<int64_t>(*clock).load(std::memory_order_relaxed);
    }
    std::atomic_ref<int64_t> tat(*clock);
    int64_t start = 0;
    int64_t to = 0;
    do {
      start = old > now_ns ? old : now_ns;
      if (start < floor) start = floor;
      to = next(start);
    } while (!tat.compare_exchange_weak(old, to, std::memory_order_relaxed));
    int64_t f = floor;
    while (f < to && !floor_.compare_exchange_weak(f, to, std::memory_order_relaxed)) {
    }
    return start;
  }

  // The clock as it stands (never under the latest time this pacer set).
  int64_t clock_now() const noexcept {
    const int64_t t = std::atomic_ref<int64_t>(*tat_.load(std::memory_order_relaxed))
                          .load(std::memory_order_relaxed);
    const int64_t f = floor_.load(std::memory_order_relaxed);
    return t > f ? t : f;
  }

  // How far the admitted work reaches past `now` (0 when idle).
  int64_t backlog_ns(int64_t now_ns) const noexcept {
    const int64_t t = std::atomic_ref<int64_t>(*tat_.load(std::memory_order_relaxed))
                          .load(std::memory_order_relaxed);
    return t > now_ns ? t - now_ns : 0;
  }

  // Whether the shared clock was found rewound and left (see above).
  bool clock_abandoned() const noexcept { return tat_.load(std::memory_order_relaxed) == &own_; }

 private:
  static_assert(std::atomic_ref<int64_t>::is_always_lock_free,
                "a clock shared between processes needs a lock-free 8-byte CAS");
  int64_t* abandon_clock(int64_t from) noexcept {
    std::atomic_ref<int64_t> own(own_);
    int64_t cur = own.load(std::memory_order_relaxed);
    while (cur < from && !own.compare_exchange_weak(cur, from, std::memory_order_relaxed)) {
    }
    tat_.store(&own_, std::memory_order_relaxed);
    return &own_;
  }

  alignas(std::atomic_ref<int64_t>::required_alignment) int64_t own_ = 0;
  std::atomic<int64_t*> tat_{&own_};
  std::atomic<int64_t> floor_{0};  // the latest time this pacer set
};

}  // namespace hami::vgpu::limiter
