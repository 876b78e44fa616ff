#pragma once
// DutyGate: paces a container that runs on several GPUs, whose processes run
// collectives together (NCCL's ranks, one process per GPU). A collective's
// kernel runs only while every rank has launched it: a rank held back leaves
// its peers' kernels spinning, busy on the GPU and charged, for nothing. A
// pacer per GPU cannot keep ranks together, so here every GPU of the
// container opens to launches in the same windows of CLOCK_MONOTONIC, which
// all processes share: each period of `period_ns`, the first `percent` % is
// on, the rest off. The GPU then runs the container's work in the same spells
// on every device, and is idle, not spinning, in between.
//
//  - A launch in the on-phase goes at once when the work queued ahead of it
//    (the device's tail: when the GPU would be done with what was admitted,
//    by the launches' measured costs) ends by the on-phase's end, or when the
//    GPU is idle. Work that still runs past the end adds idle time after it
//    so the device keeps its share (tail_after).
//  - Any other launch waits for the next on-phase.
//  - The ranks' costs are estimates, and each rank may fit a collective more
//    or less into a window than its peers. So every device counts the
//    collectives it launched (kernels of NCCL and of custom all-reduces,
//    known by name: collective_kernels.hpp), and a collective launch on a
//    device whose count is behind a peer's goes at once, in the off-phase
//    too, within a slack (catch_up_slack): the peer launched that collective
//    already, and its kernel is spinning for this one. A sleeping rank checks
//    this as it waits. The counts are totals, not per window, so a rank that
//    could not catch up in time (a stall past the slack) is back in step at
//    the next window's end; and other kernels are not counted, so work that
//    only one rank does (rank 0's logging, sampling) moves nothing.
//
//   DutyGate gate(period_ns);
//   gate.set_collectives(&own);  gate.set_peers(peer_counters, n);
//   const DutyGate::Decision d = gate.decide(tail, cost, pct, now, collective);
//   if (d.go == now && collective) gate.launched_collectives(1);
#include <atomic>
#include <cstdint>

namespace hami::vgpu::limiter {

// The length of a window: 100 ms keeps the share's error from the last
// launch of a window (a 1 ms all-reduce on an H200) to a few percent; the
// cost is that a launch waits up to the off-phase (70 ms at a share of 30).
inline constexpr int64_t kGatePeriodNs = 100'000'000;

class DutyGate {
 public:
  static constexpr int kMaxPeers = 16;

  explicit DutyGate(int64_t period_ns = kGatePeriodNs) noexcept : period_(period_ns) {}

  int64_t window_of(int64_t t) const noexcept { return t / period_; }
  int64_t start_of(int64_t window) const noexcept { return window * period_; }
  int64_t on_ns(uint32_t percent) const noexcept { return period_ * percent / 100; }
  // The end of `window`'s on-phase.
  int64_t on_end(int64_t window, uint32_t percent) const noexcept {
    return start_of(window) + on_ns(percent);
  }

  // The device's count of collective launches (this process's own when the
  // container has no shared file) and the peers'; they stay valid while the
  // gate lives.
  void set_collectives(int64_t* own) noexcept { own_ = own; }
  void set_peers(const int64_t* const* counters, int n) noexcept;

  // The tail after a launch costing `cost` starts on the GPU at `start` in a
  // window whose on-phase ends at `end`: what runs past the end is followed
  // by the idle time that keeps `percent`.
  static int64_t tail_after(int64_t start, int64_t cost, int64_t end, uint32_t percent) noexcept {
    const int64_t done = start + cost;
    if (done <= end || percent >= 100) return done;
    const int64_t over = done - (start > end ? start : end);
    return done + over * (100 - percent) / percent;
  }

  // How far past the on-phase's end a rank behind its peers may still catch
  // up: its queue may reach a fifth of the on-phase further. That covers
  // ranks whose cost estimates differ by several percent; and it is all a
  // tenant that forges its peers' counts gains: a fifth of its share. A
  // launch that catches up adds no idle time after it (tail_after): it is
  // the work its peer's kernel already holds that GPU for, and idle time
  // would start the rank late in the next window, behind again.
  int64_t catch_up_slack(uint32_t percent) const noexcept { return on_ns(percent) / 5; }

  struct Decision {
    int64_t go;     // == now: at once; else when to launch
    bool catch_up;  // at once because a peer launched this collective already
  };
  // Where a launch costing `cost` goes, with the device's work queued up to
  // `tail` (the pacer clock, at most now when idle); `collective`: the launch
  // is of a collective's kernel.
  Decision decide(int64_t tail, int64_t cost, uint32_t percent, int64_t now,
                  bool collective) const noexcept;
  // Whether a collective launch may go at `now` to meet a peer that launched
  // it already, with the device's queue at `tail`.
  bool may_catch_up(int64_t tail, uint32_t percent, int64_t now) const noexcept;

  void launched_collectives(int64_t n) noexcept;
  // This device's collective launches, and the most of any peer's.
  int64_t collectives() const noexcept;
  int64_t peers_collectives() const noexcept;

 private:
  const int64_t period_;
  alignas(8) int64_t local_ = 0;
  int64_t* own_ = &local_;
  std::atomic<const int64_t*> peers_[kMaxPeers] = {};
  std::atomic<int> npeers_{0};
};

}  // namespace hami::vgpu::limiter
