#include "vgpu/limiter/duty_gate.hpp"

#include <algorithm>

namespace hami::vgpu::limiter {

void DutyGate::set_peers(const int64_t* const* slots, int n) noexcept {
  n = std::clamp(n, 0, kMaxPeers);
  for (int i = 0; i < n; ++i)
    peers_[i].store(slots[i], std::memory_order_relaxed);
  npeers_.store(n, std::memory_order_release);
}

DutyGate::Decision DutyGate::decide(int64_t tail, int64_t cost, uint32_t percent,
                                    int64_t now) const noexcept {
  const int64_t w = window_of(now);
  // Behind a peer in the last window: this launch pairs with the peer's
  // kernel of that window, which spins for it.
  if (const int64_t v = behind_in(tail, percent, now, w); v >= 0) return {now, v, true};
  const int64_t end = on_end(w, percent);
  const int64_t start = std::max(tail, now);
  if (now < end && (tail <= now || start + cost <= end)) return {now, w, false};
  if (const int64_t v = behind_in(tail, percent, now, w + 1); v >= 0) return {now, v, true};
  // The next on-phase; or, when the queue reaches into a later window, that
  // window's if the queue ends in its on-phase (a window is never skipped
  // for a little spill; the launch queues behind it, as its peers' do),
  // else the window after.
  const int64_t wt = window_of(start);
  int64_t go = start_of(w + 1);
  if (wt > w) go = start_of(start < on_end(wt, percent) ? wt : wt + 1);
  return {go, window_of(go), false};
}

int64_t DutyGate::behind_in(int64_t tail, uint32_t percent, int64_t now,
                            int64_t before) const noexcept {
  if (npeers_.load(std::memory_order_relaxed) == 0) return -1;
  const int64_t w = window_of(now);
  const int64_t start = std::max(tail, now);
  for (int64_t v = w - 1; v <= w && v < before; ++v) {
    if (v >= 0 && start <= on_end(v, percent) + catch_up_slack(percent) &&
        counted(v) < peers_counted(v))
      return v;
  }
  return -1;
}

void DutyGate::count(int64_t window, int64_t n) noexcept {
  std::atomic_ref<int64_t> slot(own_[window % kSlots]);
  int64_t old = slot.load(std::memory_order_relaxed);
  int64_t next = 0;
  do {
    const int64_t held = old >> kCountBits;
    if (held > window) return;  // a later window has the slot: this count is stale
    const int64_t base = held == window ? (old & kCountMask) : 0;
    next = window << kCountBits | std::clamp(base + n, int64_t{0}, kCountMask);
  } while (!slot.compare_exchange_weak(old, next, std::memory_order_relaxed));
}

int64_t DutyGate::read(const int64_t* slots, int64_t window) noexcept {
  const int64_t word =
      std::atomic_ref<const int64_t>(slots[window % kSlots]).load(std::memory_order_relaxed);
  return (word >> kCountBits) == window ? (word & kCountMask) : 0;
}

int64_t DutyGate::counted(int64_t window) const noexcept {
  return read(own_, window);
}

int64_t DutyGate::peers_counted(int64_t window) const noexcept {
  const int n = npeers_.load(std::memory_order_acquire);
  int64_t most = 0;
  for (int i = 0; i < n; ++i) {
    if (const int64_t* p = peers_[i].load(std::memory_order_relaxed))
      most = std::max(most, read(p, window));
  }
  return most;
}

}  // namespace hami::vgpu::limiter
