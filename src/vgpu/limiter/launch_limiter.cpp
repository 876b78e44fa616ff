#include "vgpu/limiter/launch_limiter.hpp"

#include <algorithm>

#include "common/log.hpp"

namespace hami::vgpu::limiter {

const char* to_string(LaunchPath p) {
  switch (p) {
    case LaunchPath::kKernel:
      return "kernel";
    case LaunchPath::kKernelEx:
      return "kernel_ex";
    case LaunchPath::kCooperative:
      return "cooperative";
    case LaunchPath::kGraph:
      return "graph";
  }
  return "?";
}

namespace {

// A sample is never taken for less than this: the marks' own time, taken off,
// can exceed what is left of a tiny kernel's.
constexpr int64_t kMinSampleNs = 100;
// A launch waiting for its shape's samples asks again this soon.
constexpr int64_t kLearnPollNs = 1'000'000;
// The idle lag is kept this much above its value (the estimate takes only
// positive samples, and the lag may be negative).
constexpr int64_t kLagOffsetNs = 1'000'000;
// A launch's lag is the GPU's launch latency, 1-2 us on an H200 (learnt
// 1.27 and 1.84 us under PyTorch training steps). With another context on
// the GPU an idle-stream sample also waits out its time slice (the lag came
// out 573 us for a GEMM container beside another): more than this is
// contention, not lag.
constexpr int64_t kMaxIdleLagNs = 10'000;
// It is learnt from kernels at least this long: a shorter one on an idle
// stream may be done before the end mark reaches the GPU, and its sample
// then holds the host's time to make that mark instead.
constexpr int64_t kLagFromNs = 20'000;

// The launch the calling thread's DutyGate sent to a later window: booked
// when it goes (LaunchLimiter::went), early if it catches up with a peer.
struct GateTicket {
  const LaunchLimiter* owner = nullptr;
  int64_t cost = 0;
  int64_t go = 0;
  uint32_t count = 0;
  bool collective = false;
};
thread_local GateTicket t_gate_ticket;

}  // namespace

LaunchLimiter::LaunchLimiter(const LimiterOptions& options, GpuTimer& timer)
    : options_(options),
      timer_(timer),
      pacer_(options.shared_clock),
      share_(options.percent),
      pace_percent_(options.percent),
      gate_(options.gate_period_ns),
      table_(options.table_capacity) {
  if (options.shared_collectives != nullptr) gate_.set_collectives(options.shared_collectives);
}

void LaunchLimiter::charge(int64_t ns) noexcept {
  if (ns <= 0) return;
  const auto n = static_cast<uint64_t>(ns);
  charged_ns_.fetch_add(n, std::memory_order_relaxed);
  if (options_.published_ns != nullptr)
    std::atomic_ref<uint64_t>(*options_.published_ns).fetch_add(n, std::memory_order_relaxed);
}

int64_t LaunchLimiter::admit(uint64_t key, LaunchPath path, int64_t now_ns, uint32_t count,
                             bool enforced, bool collective) noexcept {
  return charge_launches(key, path, now_ns, count, enforced, false, collective);
}

int64_t LaunchLimiter::charge_launches(uint64_t key, LaunchPath path, int64_t now_ns,
                                       uint32_t count, bool enforced, bool ran,
                                       bool collective) noexcept {
  CostEntry* e = table_.insert(key);
  int64_t cost = e != nullptr ? e->cost_ns.load(std::memory_order_relaxed) : 0;
  int64_t learning_until = 0;
  if (cost == 0) {
    // A shape not measured yet is charged what launches here cost on average
    // for now, and the difference once its own cost is known.
    cost = default_cost_.load(std::memory_order_relaxed);
    if (e != nullptr) {
      const int64_t before = e->provisional.fetch_add(count, std::memory_order_relaxed);
      e->provisional_ns.fetch_add(cost * count, std::memory_order_relaxed);
      if (before == 0) e->provisional_from_ns.store(now_ns, std::memory_order_relaxed);
      // Past a few launches, a new shape waits for its samples (they come
      // back within a kernel's time, and at most for a while): else a
      // program could queue seconds of GPU work before it is charged any.
      if (before + count > options_.learn_ahead)
        learning_until =
            e->provisional_from_ns.load(std::memory_order_relaxed) + options_.learn_wait_ns;
    }
  }
  cost *= count;
  launches_[static_cast<int>(path)].fetch_add(count, std::memory_order_relaxed);
  charge(cost);
  if (!enforced) {
    // Counted whether paced or not: the ranks' counts must agree whenever
    // the gate starts to read them.
    if (collective) count_collectives(count);
    return now_ns;
  }
  const int64_t go = pace(cost, count, now_ns, ran, collective);
  return learning_until > now_ns ? std::max(go, std::min(learning_until, now_ns + kLearnPollNs))
                                 : go;
}

int64_t LaunchLimiter::pace(int64_t cost, uint32_t count, int64_t now_ns, bool ran,
                            bool collective) noexcept {
  const uint32_t percent = pace_percent();
  if (!gated(now_ns)) [[likely]] {
    if (collective) count_collectives(count);
    return pacer_.admit(cost, percent, now_ns, options_.burst_ns);
  }
  if (ran) {  // a batch opened before the gate closed over this device
    book_gated(cost, now_ns, percent);
    return now_ns;
  }
  const DutyGate::Decision d = gate_.decide(pacer_.clock_now(), cost, percent, now_ns, collective);
  if (d.go <= now_ns) {
    if (collective) count_collectives(count);
    if (d.catch_up) gate_catch_ups_.fetch_add(1, std::memory_order_relaxed);
    book_gated(cost, now_ns, percent, d.catch_up);
    return now_ns;
  }
  gate_waits_.fetch_add(1, std::memory_order_relaxed);
  t_gate_ticket = GateTicket{this, cost, d.go, count, collective};
  return d.go;
}

void LaunchLimiter::count_collectives(uint32_t n) noexcept {
  gate_.launched_collectives(n);
  collectives_.fetch_add(n, std::memory_order_relaxed);
}

void LaunchLimiter::book_gated(int64_t cost, int64_t now_ns, uint32_t percent,
                               bool catch_up) noexcept {
  pacer_.advance(now_ns, [&](int64_t start) {
    return catch_up ? start + cost
                    : DutyGate::tail_after(start, cost,
                                           gate_.on_end(gate_.window_of(start), percent), percent);
  });
}

bool LaunchLimiter::gated(int64_t now_ns) const noexcept {
  return npeers_.load(std::memory_order_relaxed) != 0 && !pacer_.clock_abandoned() &&
         busiest_peer_clock() >= now_ns - kLivePeerNs;
}

bool LaunchLimiter::may_go_early(int64_t now_ns) noexcept {
  const GateTicket& t = t_gate_ticket;
  if (t.owner != this || !t.collective) return false;
  return gate_.may_catch_up(pacer_.clock_now(), pace_percent(), now_ns);
}

void LaunchLimiter::went(int64_t now_ns) noexcept {
  if (t_gate_ticket.owner != this) return;
  const GateTicket t = t_gate_ticket;
  t_gate_ticket = GateTicket{};
  const uint32_t percent = pace_percent();
  // Woken before its window to meet a peer's kernel: no idle time after it.
  const bool catch_up =
      t.collective && now_ns < t.go && gate_.may_catch_up(pacer_.clock_now(), percent, now_ns);
  if (catch_up) gate_catch_ups_.fetch_add(1, std::memory_order_relaxed);
  if (t.collective) count_collectives(t.count);
  book_gated(t.cost, now_ns, percent, catch_up);
}

void LaunchLimiter::set_peer_clocks(const int64_t* const* clocks, const int64_t* const* collectives,
                                    int n) noexcept {
  n = std::min(n, kMaxPeers);
  for (int i = 0; i < n; ++i)
    peers_[static_cast<size_t>(i)].store(clocks[i], std::memory_order_relaxed);
  gate_.set_peers(collectives, n);
  npeers_.store(n, std::memory_order_release);
}

int64_t LaunchLimiter::busiest_peer_clock() const noexcept {
  const int n = npeers_.load(std::memory_order_acquire);
  int64_t busiest = INT64_MIN;
  for (int i = 0; i < n; ++i) {
    const int64_t* c = peers_[static_cast<size_t>(i)].load(std::memory_order_relaxed);
    const int64_t t = std::atomic_ref<const int64_t>(*c).load(std::memory_order_relaxed);
    busiest = std::max(busiest, t);
  }
  return busiest;
}

void LaunchLimiter::note_wait(int64_t ns) noexcept {
  if (ns > 0) waited_ns_.fetch_add(static_cast<uint64_t>(ns), std::memory_order_relaxed);
}

bool LaunchLimiter::before_launch(SampleWindow& w, uint64_t key, uintptr_t stream, int64_t now_ns,
                                  LaunchPath path, bool enforced, bool collective) noexcept {
  if (w.owner != nullptr) end_window(w, now_ns);
  const CostEntry* e = table_.find(key);
  const bool learning =
      e == nullptr || e->single_count.load(std::memory_order_relaxed) < options_.learn_samples;
  if (learning ||
      (now_ns - last_open_ns_.load(std::memory_order_relaxed) >= options_.sample_interval_ns &&
       countdown_.fetch_sub(1, std::memory_order_relaxed) <= 0)) {
    if (open_sample(w, key, stream, now_ns, path)) return true;
  }
  // A collective's launches are each counted as they go (DutyGate).
  if (!learning && !collective) open_batch(w, *e, key, stream, now_ns, path, enforced);
  return false;
}

void LaunchLimiter::open_batch(SampleWindow& w, const CostEntry& e, uint64_t key, uintptr_t stream,
                               int64_t now_ns, LaunchPath path, bool enforced) noexcept {
  // Under the gate every launch is decided on its own: a light one would
  // slip past the window's end, and a collective must be counted as it goes.
  if (options_.batch_ns <= 0 || gated(now_ns)) return;
  const int64_t cost = e.cost_ns.load(std::memory_order_relaxed);
  if (cost <= 0 || cost >= options_.batch_below_ns) return;
  constexpr int64_t kMaxBatch = 4096;
  const int64_t n = std::min(options_.batch_ns / cost, kMaxBatch);
  if (n < 2) return;
  w = SampleWindow{.owner = this,
                   .stream = stream,
                   .key = key,
                   .target = static_cast<int>(n),
                   .opened_ns = now_ns,
                   .path = path,
                   .enforced = enforced};
}

bool LaunchLimiter::open_sample(SampleWindow& w, uint64_t key, uintptr_t stream, int64_t now_ns,
                                LaunchPath path) noexcept {
  if (in_flight_.load(std::memory_order_relaxed) >= kMaxInFlight) return false;
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return false;  // another thread is sampling: skip, never wait
  if (in_flight_.load(std::memory_order_relaxed) >= kMaxInFlight) return false;
  CostEntry* entry = table_.insert(key);
  if (entry == nullptr) return false;
  if (sample_seq_ % static_cast<unsigned>(std::max(options_.calibrate_every, 1)) == 0 &&
      in_flight_.load(std::memory_order_relaxed) + 2 <= kMaxInFlight &&
      npending_ + 2 <= kMaxInFlight) {
    calibrate(stream);
  }
  const GpuTimer::Event start = timer_.record(stream);
  if (start == 0) return false;
  ++sample_seq_;
  // The next sample comes a few launches after its interval is up, not always
  // at the first: that is the first launch after a wait, on a stream the wait
  // let drain, whose kernel may also run slower than those after it.
  rng_ ^= rng_ << 13;
  rng_ ^= rng_ >> 7;
  rng_ ^= rng_ << 17;
  countdown_.store(static_cast<int>(rng_ % std::max<uint64_t>(options_.sample_spread, 1)),
                   std::memory_order_relaxed);
  in_flight_.fetch_add(1, std::memory_order_relaxed);
  last_open_ns_.store(now_ns, std::memory_order_relaxed);
  w = SampleWindow{.owner = this,
                   .stream = stream,
                   .key = key,
                   .start = start,
                   .target = 1,
                   .opened_ns = now_ns,
                   .path = path,
                   .epoch = entry->epoch.load(std::memory_order_relaxed)};
  return true;
}

void LaunchLimiter::calibrate(uintptr_t stream) noexcept {
  const GpuTimer::Event a = timer_.record(stream);
  if (a == 0) return;
  const GpuTimer::Event b = timer_.record(stream);
  if (b == 0) {
    timer_.release(a);
    return;
  }
  // Only a pair the GPU reached after both were made times the marks alone;
  // on an idle stream it holds the host's time between them.
  const bool idle = timer_.reached(a);
  in_flight_.fetch_add(1, std::memory_order_relaxed);
  pending_[npending_++] = Pending{.start = a, .end = b, .idle = idle, .pair = true};
  pending_hint_.store(npending_, std::memory_order_relaxed);
}

void LaunchLimiter::after_launch(SampleWindow& w, bool launched, int64_t now_ns) noexcept {
  if (w.owner != this) return;
  if (w.start == 0) {  // a batch opened by this launch: its light launches come next
    if (!launched) close_window(w, now_ns);
    return;
  }
  const SampleWindow taken = w;
  w = SampleWindow{};
  std::lock_guard lock(mu_);
  GpuTimer::Event end = 0;
  bool idle = false;
  if (launched && npending_ < kMaxInFlight) {
    // The end mark first: on an idle stream a short kernel is done before
    // it, which is then reached when the host makes it (made after a query,
    // an 8 us floor under every such sample on an H200; now 2-3 us). Then
    // the start mark: reached already, it was reached before the launch
    // arrived, and the sample holds the host's time to the launch too.
    end = timer_.record(taken.stream);
    if (end != 0) idle = timer_.reached(taken.start);
  }
  if (end == 0) {  // nothing reached the GPU, or no mark: it measures nothing
    timer_.release(taken.start);
    in_flight_.fetch_sub(1, std::memory_order_relaxed);
    return;
  }
  const int64_t host = now_ns > 0 && taken.opened_ns > 0 ? now_ns - taken.opened_ns : 0;
  pending_[npending_++] = Pending{.start = taken.start,
                                  .end = end,
                                  .key = taken.key,
                                  .host_ns = host,
                                  .epoch = taken.epoch,
                                  .idle = idle};
  pending_hint_.store(npending_, std::memory_order_relaxed);
}

void LaunchLimiter::end_window(SampleWindow& w, int64_t now_ns) noexcept {
  if (w.owner != nullptr) w.owner->close_window(w, now_ns);
}

void LaunchLimiter::abandon_window(SampleWindow& w) noexcept {
  if (w.owner != nullptr) w.owner->close_window(w, w.opened_ns);
}

void LaunchLimiter::close_window(SampleWindow& w, int64_t now_ns) noexcept {
  const SampleWindow taken = w;
  w = SampleWindow{};
  if (taken.start == 0) {
    // A batch: its light launches are charged now, paced as it was opened.
    if (taken.launches > 0)
      charge_launches(taken.key, taken.path, now_ns > 0 ? now_ns : taken.opened_ns,
                      static_cast<uint32_t>(taken.launches), taken.enforced, true);
    return;
  }
  // A sample whose launch never came.
  std::lock_guard lock(mu_);
  timer_.release(taken.start);
  in_flight_.fetch_sub(1, std::memory_order_relaxed);
}

void LaunchLimiter::harvest(int64_t now_ns) noexcept {
  if (pending_hint_.load(std::memory_order_relaxed) == 0) return;
  if (now_ns - last_harvest_ns_.load(std::memory_order_relaxed) < options_.harvest_interval_ns)
    return;
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  last_harvest_ns_.store(now_ns, std::memory_order_relaxed);
  int kept = 0;
  for (int i = 0; i < npending_; ++i) {
    const Pending p = pending_[i];
    int64_t ns = 0;
    const GpuTimer::Poll r = timer_.elapsed(p.start, p.end, &ns);
    if (r == GpuTimer::Poll::kPending) {
      pending_[kept++] = p;
      continue;
    }
    if (r == GpuTimer::Poll::kReady) learn(p, ns, now_ns);
    timer_.release(p.start);
    timer_.release(p.end);
    in_flight_.fetch_sub(1, std::memory_order_relaxed);
  }
  npending_ = kept;
  pending_hint_.store(kept, std::memory_order_relaxed);
}

void LaunchLimiter::learn(const Pending& p, int64_t ns, int64_t now_ns) noexcept {
  if (p.pair) {
    if (!p.idle && ns >= 0) {
      mark_.add(ns + 1);  // the estimate takes no zero: 1 ns more, taken off again
      mark_ns_.store(mark_.value() - 1, std::memory_order_relaxed);
    }
    return;
  }
  CostEntry* e = table_.insert(p.key);
  if (e == nullptr || ns <= 0) return;
  if (p.epoch != e->epoch.load(std::memory_order_relaxed)) return;  // forgotten since
  // On a busy stream the start mark is reached as the work before it ends,
  // and the end mark's own time is taken off. On an idle stream the start
  // mark was reached when it was made, and the launch only once the host had
  // made it: the host's time is taken off (what more the launch took to
  // reach the GPU is learnt by comparing the two kinds, in update_cost).
  const int64_t kernel = std::max(
      p.idle ? ns - p.host_ns : ns - mark_ns_.load(std::memory_order_relaxed), kMinSampleNs);
  RobustEstimate& est = p.idle ? e->idle : e->busy;
  est.add(kernel);
  e->single_count.store(e->busy.count() + e->idle.count(), std::memory_order_relaxed);
  if (log::enabled(log::Level::kDebug)) {
    log::debug(
        "shape %016llx: %.2f us on the GPU (%s stream, %.2f us marked, %.2f us host); "
        "estimate %.2f us",
        static_cast<unsigned long long>(p.key), static_cast<double>(kernel) / 1e3,
        p.idle ? "idle" : "busy", static_cast<double>(ns) / 1e3,
        static_cast<double>(p.host_ns) / 1e3, static_cast<double>(est.value()) / 1e3);
  }
  update_cost(*e, now_ns);
  samples_.fetch_add(1, std::memory_order_relaxed);
  if (p.idle) idle_samples_.fetch_add(1, std::memory_order_relaxed);
}

void LaunchLimiter::update_cost(CostEntry& e, int64_t now_ns) noexcept {
  const int need = options_.learn_samples;
  // Shapes sampled both ways tell how much later a launch reaches an idle
  // stream's GPU than a mark made just before it does.
  if (e.busy.count() >= need && e.idle.count() >= need && e.busy.value() >= kLagFromNs) {
    idle_lag_.add(e.idle.value() - e.busy.value() + kLagOffsetNs);
    idle_lag_ns_.store(std::clamp(idle_lag_.value() - kLagOffsetNs, int64_t{0}, kMaxIdleLagNs),
                       std::memory_order_relaxed);
  }
  // A shape is charged its own cost once it has its first few samples (their
  // median: one stretched by another context's time slice would be charged
  // to every launch made meanwhile), from a busy stream where it has them;
  // until then the default.
  const int nb = e.busy.count();
  const int ni = e.idle.count();
  if (nb + ni < need) return;
  const bool from_busy = nb >= need || (ni < need && nb >= ni);
  const int64_t cost =
      from_busy
          ? e.busy.value()
          : std::max(e.idle.value() - idle_lag_ns_.load(std::memory_order_relaxed), kMinSampleNs);
  const bool first = e.cost_ns.load(std::memory_order_relaxed) == 0;
  e.cost_ns.store(cost, std::memory_order_relaxed);
  const int64_t d = default_cost_.load(std::memory_order_relaxed);
  default_cost_.store(d == 0 ? cost : d + (cost - d) / 8, std::memory_order_relaxed);
  if (first && cost > 0) {
    // What the launches let through before this shape was measured still owe.
    const int64_t n = e.provisional.exchange(0, std::memory_order_relaxed);
    const int64_t debt = n * cost - e.provisional_ns.exchange(0, std::memory_order_relaxed);
    if (debt > 0) {
      pace(debt, 0, now_ns, true, false);
      charge(debt);
    }
  }
}

void LaunchLimiter::forget(uint64_t key) noexcept {
  std::lock_guard lock(mu_);
  CostEntry* e = table_.find(key);
  if (e == nullptr) return;
  e->epoch.fetch_add(1, std::memory_order_relaxed);
  e->provisional.store(0, std::memory_order_relaxed);
  e->provisional_ns.store(0, std::memory_order_relaxed);
  e->busy.reset();
  e->idle.reset();
  e->single_count.store(0, std::memory_order_relaxed);
  e->cost_ns.store(0, std::memory_order_relaxed);
}

void LaunchLimiter::drop_samples() noexcept {
  std::lock_guard lock(mu_);
  for (int i = 0; i < npending_; ++i) {
    timer_.release(pending_[i].start);
    timer_.release(pending_[i].end);
    in_flight_.fetch_sub(1, std::memory_order_relaxed);
  }
  npending_ = 0;
  pending_hint_.store(0, std::memory_order_relaxed);
}

int64_t LaunchLimiter::cost_of(uint64_t key) const noexcept {
  const CostEntry* e = table_.find(key);
  return e != nullptr ? e->cost_ns.load(std::memory_order_relaxed) : 0;
}

LimiterStats LaunchLimiter::stats() const noexcept {
  LimiterStats s;
  for (int i = 0; i < kLaunchPaths; ++i)
    s.launches[static_cast<size_t>(i)] = launches_[static_cast<size_t>(i)].load();
  s.charged_ns = charged_ns_.load();
  s.waited_ns = waited_ns_.load();
  s.samples = samples_.load();
  s.idle_samples = idle_samples_.load();
  s.shapes = table_.size();
  s.mark_ns = mark_ns_.load();
  s.idle_lag_ns = idle_lag_ns_.load();
  s.gate_waits = gate_waits_.load();
  s.gate_catch_ups = gate_catch_ups_.load();
  s.collectives = collectives_.load();
  return s;
}

}  // namespace hami::vgpu::limiter
