#include "vgpu/limiter/duty_gate.hpp"

#include <algorithm>

namespace hami::vgpu::limiter {

void DutyGate::set_peers(const int64_t* const* counters, int n) noexcept {
  n = std::clamp(n, 0, kMaxPeers);
  for (int i = 0; i < n; ++i)
    peers_[i].store(counters[i], std::memory_order_relaxed);
  npeers_.store(n, std::memory_order_release);
}

DutyGate::Decision DutyGate::decide(int64_t tail, int64_t cost, uint32_t percent, int64_t now,
                                    bool collective) const noexcept {
  const int64_t w = window_of(now);
  const int64_t end = on_end(w, percent);
  const int64_t start = std::max(tail, now);
  if (now < end && (tail <= now || start + cost <= end)) return {now, false};
  if (collective && may_catch_up(tail, percent, now)) return {now, true};
  // The next on-phase; or, when the queue reaches into a later window, that
  // window's if the queue ends in its on-phase (a window is never skipped
  // for a little spill; the launch queues behind it, as its peers' do),
  // else the window after.
  const int64_t wt = window_of(start);
  int64_t go = start_of(w + 1);
  if (wt > w) go = start_of(start < on_end(wt, percent) ? wt : wt + 1);
  return {go, false};
}

bool DutyGate::may_catch_up(int64_t tail, uint32_t percent, int64_t now) const noexcept {
  if (npeers_.load(std::memory_order_relaxed) == 0) return false;
  const int64_t start = std::max(tail, now);
  return start <= on_end(window_of(now), percent) + catch_up_slack(percent) &&
         collectives() < peers_collectives();
}

void DutyGate::launched_collectives(int64_t n) noexcept {
  std::atomic_ref<int64_t>(*own_).fetch_add(n, std::memory_order_relaxed);
}

int64_t DutyGate::collectives() const noexcept {
  return std::atomic_ref<const int64_t>(*own_).load(std::memory_order_relaxed);
}

int64_t DutyGate::peers_collectives() const noexcept {
  const int n = npeers_.load(std::memory_order_acquire);
  int64_t most = 0;
  for (int i = 0; i < n; ++i) {
    if (const int64_t* p = peers_[i].load(std::memory_order_relaxed))
      most = std::max(most, std::atomic_ref<const int64_t>(*p).load(std::memory_order_relaxed));
  }
  return most;
}

}  // namespace hami::vgpu::limiter
