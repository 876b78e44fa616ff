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

// A sustain run's estimate of a kernel counts once it has this many samples,
// and only if it then stayed within this many percent; the lowest it went
// is what counts (a transient slowdown only ever raises it).
constexpr int kSteadySamples = 5;
constexpr int64_t kSteadyPercent = 10;

// GPU time lent in one sustain run: capped at the share of a second, so that
// the run and the wait that repays it take about a second.
int64_t sustain_run(const LimiterOptions& o) {
  const int64_t p = o.percent;
  if (o.sustain_run_ns <= 0 || p <= 0 || p >= 100) return 0;
  return std::min(o.sustain_run_ns, p * 10'000'000);
}

// Adds a sample taken late in sustain run `run` to `estimate`, which holds
// run `of_run`'s; a newer run replaces what an older one measured (true).
bool add_run_sample(RobustEstimate& estimate, uint32_t& of_run, uint32_t run, int64_t ns) {
  const bool newer = of_run != run;
  if (newer) {
    estimate.reset();
    of_run = run;
  }
  estimate.add(ns);
  return newer;
}

// The period of back-to-back launches: held up by the host or by the GPU,
// whichever the last run was.
int64_t stream_period(const CostEntry& e) {
  const int64_t host = e.stream.value();
  const int64_t gpu = e.stream_gpu.value();
  if (host == 0 || gpu == 0) return host + gpu;
  return e.stream_by_host ? host : gpu;
}

// The program's back-to-back period flat out: over its last spell without
// enforcement when that ended within `fresh_ns`, else from its last sustain
// run (0: neither).
int64_t flat_out_period(const CostEntry& e, int64_t now_ns, int64_t fresh_ns) {
  if (e.stream_unpaced.count() >= kSteadySamples && now_ns - e.stream_unpaced_ns <= fresh_ns)
    return e.stream_unpaced.value();
  return e.stream_flat_out;
}

}  // namespace

LaunchLimiter::LaunchLimiter(const LimiterOptions& options, GpuTimer& timer)
    : options_(options),
      sustain_run_ns_(sustain_run(options)),
      // Enough that no launch of the run waits, even when the program queues
      // the whole run at once: the run's work at the share, on top of a burst.
      sustain_burst_ns_(
          sustain_run_ns_ > 0 ? sustain_run_ns_ * 100 / options.percent + options.burst_ns : 0),
      timer_(timer),
      pacer_(options.shared_clock),
      table_(options.table_capacity) {}

int64_t LaunchLimiter::admit(uint64_t key, LaunchPath path, int64_t now_ns,
                             uint32_t count) noexcept {
  CostEntry* e = table_.insert(key);
  int64_t cost = e != nullptr ? e->cost_ns.load(std::memory_order_relaxed) : 0;
  if (cost == 0) {
    // A shape not measured yet is charged what launches here cost on average
    // for now, and the difference once its own cost is known.
    cost = default_cost_.load(std::memory_order_relaxed);
    if (e != nullptr) {
      e->provisional.fetch_add(count, std::memory_order_relaxed);
      e->provisional_ns.fetch_add(cost * count, std::memory_order_relaxed);
    }
  }
  cost *= count;
  launches_[static_cast<int>(path)].fetch_add(count, std::memory_order_relaxed);
  charged_ns_.fetch_add(static_cast<uint64_t>(cost), std::memory_order_relaxed);
  if (sustain_run_ns_ == 0 || now_ns < next_sustain_ns_.load(std::memory_order_relaxed))
    return pacer_.admit(cost, options_.percent, now_ns, options_.burst_ns);
  // A sustain run is due. It is under way while the program keeps ahead of
  // its share, and counts the GPU time admitted meanwhile.
  const bool ahead = pacer_.backlog_ns(now_ns) > options_.burst_ns;
  if (ahead && !hold_run(now_ns))
    return pacer_.admit(cost, options_.percent, now_ns, options_.burst_ns);
  const int64_t go = pacer_.admit(cost, options_.percent, now_ns, sustain_burst_ns_);
  track_sustain_run(ahead ? cost : -1, now_ns);
  return go;
}

bool LaunchLimiter::hold_run(int64_t now_ns) noexcept {
  if (options_.shared_run_until == nullptr) return true;
  std::atomic_ref<int64_t> until(*options_.shared_run_until);
  int64_t cur = until.load(std::memory_order_relaxed);
  int64_t mine = run_claim_.load(std::memory_order_relaxed);
  if (mine != 0 && cur == mine) return true;
  // Claims are rare (one a run); the lock keeps this process's threads from
  // taking a claim one of them is making for another process's.
  std::lock_guard lock(run_mu_);
  cur = until.load(std::memory_order_relaxed);
  mine = run_claim_.load(std::memory_order_relaxed);
  if (mine != 0 && cur == mine) return true;
  if (cur > now_ns) {
    // Another process of the container is in its run, and its loan holds our
    // launches back: ours comes after it, with the GPU to itself.
    next_sustain_ns_.store(std::max(next_sustain_ns_.load(std::memory_order_relaxed), cur),
                           std::memory_order_relaxed);
    return false;
  }
  // Held at most this long, so that a process that dies in its run does not
  // keep the others from theirs: a run alone takes about its GPU time.
  const int64_t claim = now_ns + 2 * sustain_run_ns_ + options_.burst_ns;
  if (!until.compare_exchange_strong(cur, claim, std::memory_order_relaxed)) return false;
  run_claim_.store(claim, std::memory_order_relaxed);
  return true;
}

void LaunchLimiter::release_run() noexcept {
  std::lock_guard lock(run_mu_);
  int64_t mine = run_claim_.exchange(0, std::memory_order_relaxed);
  if (mine == 0 || options_.shared_run_until == nullptr) return;
  std::atomic_ref<int64_t>(*options_.shared_run_until)
      .compare_exchange_strong(mine, 0, std::memory_order_relaxed);
}

void LaunchLimiter::track_sustain_run(int64_t cost_ns, int64_t now_ns) noexcept {
  if (cost_ns < 0) {  // the program is not ahead of its share: no run, or it broke off
    if (run_claim_.load(std::memory_order_relaxed) != 0) release_run();
    if (sustain_charged_ns_.load(std::memory_order_relaxed) != 0)
      sustain_charged_ns_.store(0, std::memory_order_relaxed);
    if (sustain_late_.load(std::memory_order_relaxed))
      sustain_late_.store(false, std::memory_order_relaxed);
    if (sustain_shared_.load(std::memory_order_relaxed))
      sustain_shared_.store(false, std::memory_order_relaxed);
    return;
  }
  const int64_t before = sustain_charged_ns_.fetch_add(cost_ns, std::memory_order_relaxed);
  const int64_t charged = before + cost_ns;
  if (before == 0) sustain_start_ns_.store(now_ns, std::memory_order_relaxed);
  // The GPU runs the run's launches in the order they were admitted: those in
  // its second half run after half its work, whatever the queue. (On an H200
  // a GEMM's time rose from 180 to 212 us over the first 50-100 ms.)
  if (charged * 4 >= sustain_run_ns_ && !sustain_late_.load(std::memory_order_relaxed)) {
    // Alone, the run so far took about its own GPU time. Much longer, and
    // another context had the GPU too: its time slices then stretch many
    // samples (on the H200 they put 240 us on a 213 us GEMM), and the GPU,
    // busy with both, is at its flat-out speed anyway. Such a run measures
    // nothing, and its loan is the other context's time (on the H200 the
    // tenant beside a 30 % one's run got 53 % for a second at a 60 % share):
    // it ends a quarter in, and the launches after it wait off what it took.
    const int64_t took = now_ns - sustain_start_ns_.load(std::memory_order_relaxed);
    if (took * 10 > charged * 13) {
      sustain_shared_.store(true, std::memory_order_relaxed);
      end_sustain_run(now_ns);
      return;
    }
    if (charged * 2 >= sustain_run_ns_) sustain_late_.store(true, std::memory_order_relaxed);
  }
  if (charged >= sustain_run_ns_) end_sustain_run(now_ns);  // the loan is spent
}

void LaunchLimiter::end_sustain_run(int64_t now_ns) noexcept {
  // The launches after this one wait the loan off. One thread ends the run.
  int64_t due = next_sustain_ns_.load(std::memory_order_relaxed);
  if (due > now_ns || !next_sustain_ns_.compare_exchange_strong(
                          due, now_ns + options_.sustain_every_ns, std::memory_order_relaxed)) {
    return;
  }
  if (sustain_shared_.exchange(false, std::memory_order_relaxed))
    sustain_runs_shared_.fetch_add(1, std::memory_order_relaxed);
  sustain_charged_ns_.store(0, std::memory_order_relaxed);
  sustain_late_.store(false, std::memory_order_relaxed);
  sustain_run_.fetch_add(1, std::memory_order_relaxed);
  sustain_runs_.fetch_add(1, std::memory_order_relaxed);
  release_run();
}

void LaunchLimiter::note_wait(int64_t ns) noexcept {
  if (ns > 0) waited_ns_.fetch_add(static_cast<uint64_t>(ns), std::memory_order_relaxed);
}

bool LaunchLimiter::before_launch(SampleWindow& w, uint64_t key, uintptr_t stream, int64_t now_ns,
                                  bool warm, LaunchPath path) noexcept {
  if (w.owner != nullptr) {
    if (w.owner == this && w.stream == stream && w.key == key && w.launches < w.target) {
      return false;  // the run goes on
    }
    end_window(w, now_ns);
  }
  const CostEntry* e = table_.find(key);
  const bool learning =
      e == nullptr || e->single_count.load(std::memory_order_relaxed) < options_.learn_samples;
  if (open_sample(w, learning, key, stream, now_ns, warm, path)) return w.target > 1;
  if (!learning) open_batch(w, *e, key, stream, now_ns, path);
  return false;
}

bool LaunchLimiter::observe(SampleWindow& w, uint64_t key, uintptr_t stream, int64_t now_ns,
                            LaunchPath path) noexcept {
  if (w.owner != nullptr) end_window(w, now_ns);
  const CostEntry* e = table_.find(key);
  const bool learning =
      e == nullptr || e->single_count.load(std::memory_order_relaxed) < options_.learn_samples;
  // Never waiting, the thread is always at its steady pace.
  return open_sample(w, learning, key, stream, now_ns, true, path, true) && w.target > 1;
}

void LaunchLimiter::open_batch(SampleWindow& w, const CostEntry& e, uint64_t key, uintptr_t stream,
                               int64_t now_ns, LaunchPath path) noexcept {
  if (options_.batch_ns <= 0) return;
  const int64_t cost = e.cost_ns.load(std::memory_order_relaxed);
  if (cost <= 0 || cost >= options_.stream_worth_ns) return;
  constexpr int64_t kMaxBatch = 4096;
  const int64_t n = std::min(options_.batch_ns / cost, kMaxBatch);
  if (n < 2) return;
  w = SampleWindow{.owner = this,
                   .stream = stream,
                   .key = key,
                   .target = static_cast<int>(n),
                   .opened_ns = now_ns,
                   .path = path};
}

bool LaunchLimiter::open_sample(SampleWindow& w, bool learning, uint64_t key, uintptr_t stream,
                                int64_t now_ns, bool warm, LaunchPath path, bool unpaced) noexcept {
  if (!learning &&
      now_ns - last_open_ns_.load(std::memory_order_relaxed) < options_.sample_interval_ns) {
    return false;
  }
  if (in_flight_.load(std::memory_order_relaxed) >= kMaxInFlight) return false;
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return false;  // another thread is sampling: skip, never wait
  if (in_flight_.load(std::memory_order_relaxed) >= kMaxInFlight)
    return false;  // checked again, held
  CostEntry* entry = table_.insert(key);
  if (entry == nullptr) return false;
  int target = 1;
  const bool runs = entry->single.count() >= options_.learn_samples &&
                    entry->single.value() < options_.stream_worth_ns;
  const int stream_samples = entry->stream.count() + entry->stream_gpu.count();
  if (runs && (stream_samples < options_.learn_samples || (sample_seq_ & 1u) != 0)) {
    if (!warm) return false;  // wait for the steady pace; this sample is still due
    target = options_.stream_window;
  }
  // Tagged only while the run is still due: a thread may set the flag just
  // after another ended the run. Nothing unpaced is part of a run.
  const bool run_due = !unpaced && now_ns >= next_sustain_ns_.load(std::memory_order_relaxed);
  bool late = run_due && sustain_late_.load(std::memory_order_relaxed);
  if (late && target == 1 && !timer_.busy(stream)) {
    // The mark would be reached at once, and the sample would hold the host's
    // time to the launch too: programs that synchronise every few launches
    // make it the first launch after each sync, 10-20 us on a 210 us GEMM.
    // The next launch finds the stream busy; a program limited by its host
    // never does, and its back-to-back run is what it is charged: that is
    // sampled instead.
    if (learning) {
      late = false;
    } else if (runs && warm) {
      target = options_.stream_window;
    } else {
      return false;
    }
  }
  const GpuTimer::Event start = timer_.record(stream);
  if (start == 0) return false;
  ++sample_seq_;
  in_flight_.fetch_add(1, std::memory_order_relaxed);
  last_open_ns_.store(now_ns, std::memory_order_relaxed);
  const uint32_t sustain = late ? sustain_run_.load(std::memory_order_relaxed) : 0;
  const int64_t run_charged = run_due ? sustain_charged_ns_.load(std::memory_order_relaxed) : -1;
  w = SampleWindow{.owner = this,
                   .stream = stream,
                   .key = key,
                   .start = start,
                   .target = target,
                   .opened_ns = now_ns,
                   .path = path,
                   .epoch = entry->epoch.load(std::memory_order_relaxed),
                   .sustain = sustain,
                   .run_charged_ns = run_charged,
                   .unpaced = unpaced};
  return true;
}

void LaunchLimiter::after_launch(SampleWindow& w, bool launched, int64_t now_ns) noexcept {
  if (w.owner != this) return;
  if (!launched) {
    // Nothing reached the GPU: the sample would measure nothing.
    w.spoiled = true;
    close_window(w, now_ns);
    return;
  }
  // A run's first launch; the rest go light (light_launch) up to the target.
  if (w.launches == 0) w.launches = 1;
  if (w.launches >= w.target) close_window(w, now_ns);
}

void LaunchLimiter::end_window(SampleWindow& w, int64_t now_ns) noexcept {
  if (w.owner != nullptr) w.owner->close_window(w, now_ns);
}

void LaunchLimiter::abandon_window(SampleWindow& w) noexcept {
  LaunchLimiter* owner = w.owner;
  if (owner == nullptr) return;
  const GpuTimer::Event start = w.start;
  owner->charge_light(w, w.opened_ns);  // the time it ends is not known; its start is near
  w = SampleWindow{};
  if (start == 0) return;  // a batch
  std::lock_guard lock(owner->mu_);
  owner->timer_.release(start);
  owner->in_flight_.fetch_sub(1, std::memory_order_relaxed);
}

void LaunchLimiter::charge_light(const SampleWindow& w, int64_t now_ns) noexcept {
  // Every launch of a run but its first went light; unpaced, none is charged.
  if (w.launches > 1 && !w.unpaced)
    admit(w.key, w.path, now_ns, static_cast<uint32_t>(w.launches - 1));
}

void LaunchLimiter::close_window(SampleWindow& w, int64_t now_ns) noexcept {
  const int needed = w.target == 1 ? 1 : options_.min_stream_launches;
  const SampleWindow taken = w;
  w = SampleWindow{};
  charge_light(taken, now_ns > 0 ? now_ns : taken.opened_ns);
  if (taken.start == 0) return;  // a batch: nothing was timed
  std::lock_guard lock(mu_);
  GpuTimer::Event end = 0;
  if (!taken.spoiled && taken.launches >= needed && npending_ < kMaxInFlight)
    end = timer_.record(taken.stream);
  if (end == 0) {
    timer_.release(taken.start);
    in_flight_.fetch_sub(1, std::memory_order_relaxed);
    return;
  }
  // in_flight_ counts this window already, so there is room.
  const int64_t host = now_ns > 0 && taken.opened_ns > 0 ? now_ns - taken.opened_ns : 0;
  pending_[npending_++] = Pending{.start = taken.start,
                                  .end = end,
                                  .key = taken.key,
                                  .launches = taken.launches,
                                  .host_ns = host,
                                  .epoch = taken.epoch,
                                  .sustain = taken.sustain,
                                  .run_charged_ns = taken.run_charged_ns,
                                  .unpaced = taken.unpaced};
  pending_hint_.store(npending_, std::memory_order_relaxed);
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
  CostEntry* e = table_.insert(p.key);
  if (e == nullptr || ns <= 0) return;
  if (p.epoch != e->epoch.load(std::memory_order_relaxed)) return;  // forgotten since
  if (p.launches == 1) {
    e->single.add(ns);
    e->single_count.store(e->single.count(), std::memory_order_relaxed);
    if (p.sustain != 0) {
      if (add_run_sample(e->sustained, e->sustain_run, p.sustain, ns))
        e->sustained_lo = e->sustained_hi = 0;
      if (e->sustained.count() == kSteadySamples) {
        e->sustained_lo = e->sustained_hi = e->sustained.value();
      } else if (e->sustained.count() > kSteadySamples) {
        e->sustained_lo = std::min(e->sustained_lo, e->sustained.value());
        e->sustained_hi = std::max(e->sustained_hi, e->sustained.value());
      }
    }
    if (p.run_charged_ns >= 0 && log::enabled(log::Level::kDebug)) {
      log::debug(
          "sustain run %u: shape %016llx sampled at %.1f ms of the run: %.1f us%s; estimate "
          "%.1f us (%.1f..%.1f)",
          sustain_run_.load(std::memory_order_relaxed), static_cast<unsigned long long>(p.key),
          static_cast<double>(p.run_charged_ns) / 1e6, static_cast<double>(ns) / 1e3,
          p.sustain != 0 ? " (late)" : "", static_cast<double>(e->sustained.value()) / 1e3,
          static_cast<double>(e->sustained_lo) / 1e3, static_cast<double>(e->sustained_hi) / 1e3);
    }
  } else {
    // When the GPU kept pace with the host (it timestamped the end no later
    // than the host got there), the period is the host's. The run's launches
    // after its first went light, so its host time is the program's own
    // period and almost none of ours (a fully paced launch took 0.3 us longer
    // than a bare one on the H200, a tenth of a small kernel's period).
    const bool kept_pace = p.host_ns > 0 && ns * 10 <= p.host_ns * 11;
    const int64_t period = (kept_pace ? std::min(ns, p.host_ns) : ns) / p.launches;
    (kept_pace ? e->stream : e->stream_gpu).add(period);
    e->stream_by_host = kept_pace;
    if (p.sustain != 0 && kept_pace) {
      add_run_sample(e->stream_sustained, e->stream_sustain_run, p.sustain, period);
      if (e->stream_sustained.count() >= kSteadySamples)
        e->stream_flat_out = e->stream_sustained.value();
    }
    if (p.unpaced && kept_pace) {
      e->stream_unpaced.add(period);
      e->stream_unpaced_ns = now_ns;
    }
    if (log::enabled(log::Level::kDebug)) {
      log::debug(
          "shape %016llx: run of %d launches, %.2f us each on the GPU, %.2f on the host%s; "
          "estimate %.2f us",
          static_cast<unsigned long long>(p.key), p.launches,
          static_cast<double>(ns) / p.launches / 1e3,
          static_cast<double>(p.host_ns) / p.launches / 1e3, kept_pace ? "" : " (GPU behind)",
          static_cast<double>(stream_period(*e)) / 1e3);
    }
  }
  update_cost(*e, now_ns);
  samples_.fetch_add(1, std::memory_order_relaxed);
  if (p.unpaced) unpaced_samples_.fetch_add(1, std::memory_order_relaxed);
}

void LaunchLimiter::update_cost(CostEntry& e, int64_t now_ns) noexcept {
  const bool first = e.cost_ns.load(std::memory_order_relaxed) == 0;
  const int64_t single = e.single.value();
  const int64_t stream = stream_period(e);
  int64_t cost = single;
  // Back to back, a launch occupies the GPU for its period; with gaps longer
  // than half its kernel time, the gaps are the program's and not charged.
  if (stream > 0 && (single == 0 || stream * 2 <= single * 3)) {
    // Throttled, the host may run the program slower than flat out.
    const int64_t flat = flat_out_period(e, now_ns, options_.sustain_every_ns);
    cost = flat > 0 ? std::min(stream, flat) : stream;
  } else if (e.sustained.count() >= kSteadySamples && e.sustained_lo > cost &&
             e.sustained_hi * 100 <= e.sustained_lo * (100 + kSteadyPercent)) {
    // Flat out, the program would get the GPU at its power limit, not the
    // boost clock a throttled program sees: its share is of that speed.
    cost = e.sustained_lo;
  }
  e.cost_ns.store(cost, std::memory_order_relaxed);
  const int64_t d = default_cost_.load(std::memory_order_relaxed);
  default_cost_.store(d == 0 ? cost : d + (cost - d) / 8, std::memory_order_relaxed);
  if (first && cost > 0) {
    // What the launches let through before this shape was measured still owe.
    const int64_t n = e.provisional.exchange(0, std::memory_order_relaxed);
    const int64_t debt = n * cost - e.provisional_ns.exchange(0, std::memory_order_relaxed);
    if (debt > 0) {
      pacer_.admit(debt, options_.percent, now_ns, options_.burst_ns);
      charged_ns_.fetch_add(static_cast<uint64_t>(debt), std::memory_order_relaxed);
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
  e->single.reset();
  e->stream.reset();
  e->stream_gpu.reset();
  e->stream_by_host = true;
  e->sustained.reset();
  e->sustain_run = 0;
  e->sustained_lo = e->sustained_hi = 0;
  e->stream_sustained.reset();
  e->stream_sustain_run = 0;
  e->stream_flat_out = 0;
  e->stream_unpaced.reset();
  e->stream_unpaced_ns = 0;
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
  s.shapes = table_.size();
  s.sustain_runs = sustain_runs_.load();
  s.sustain_runs_shared = sustain_runs_shared_.load();
  s.unpaced_samples = unpaced_samples_.load();
  return s;
}

}  // namespace hami::vgpu::limiter
