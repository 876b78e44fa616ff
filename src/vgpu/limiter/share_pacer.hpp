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

// Pacing a container whose devices run collectives together (NCCL's ranks,
// one process per GPU). Paced apart, one rank's kernels spin waiting for the
// other's, the spinning is charged as GPU time, and both fall to a tenth of
// their share (the GPU saw 8.3 of 295 GB/s at a share of 30). In phase they
// hold it (tests/vgpu/limiter/in_phase_test.cpp models both):
//  - a launch waits as long as its busiest peer would for the same launch:
//    until that peer's clock, less this launch's own occupancy, is within
//    the burst (`peer_clock - occupied - burst`);
//  - a launch that waits wakes on a grid of `grid_ns` of CLOCK_MONOTONIC,
//    which every process shares, so the ranks resume together.
inline int64_t in_phase_go(int64_t go, int64_t busiest_peer_clock, int64_t occupied,
                           int64_t burst_ns) noexcept {
  const int64_t peer = busiest_peer_clock - occupied - burst_ns;
  return peer > go ? peer : go;
}
inline int64_t in_phase_wake(int64_t go, int64_t grid_ns) noexcept {
  if (grid_ns <= 0 || go <= 0) return go;
  return (go + grid_ns - 1) / grid_ns * grid_ns;
}

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
    const int64_t floor = floor_.load(std::memory_order_relaxed);
    int64_t* clock = tat_.load(std::memory_order_relaxed);
    int64_t old = std::atomic_ref<int64_t>(*clock).load(std::memory_order_relaxed);
    if (old < floor) [[unlikely]] {
      clock = abandon_clock(floor);
      old = std::atomic_ref<int64_t>(*clock).load(std::memory_order_relaxed);
    }
    std::atomic_ref<int64_t> tat(*clock);
    int64_t start = 0;
    do {
      // An idle spell earns no credit beyond the burst.
      start = old > now_ns ? old : now_ns;
      if (start < floor) start = floor;
    } while (!tat.compare_exchange_weak(old, start + occupied, std::memory_order_relaxed));
    int64_t f = floor;
    while (f < start + occupied &&
           !floor_.compare_exchange_weak(f, start + occupied, std::memory_order_relaxed)) {
    }
    return start - burst_ns;
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
