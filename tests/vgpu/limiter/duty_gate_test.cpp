// The DutyGate on its own, then two ranks of a collective (NCCL's all-reduce,
// one process per GPU) gated as LaunchLimiter gates a container on several
// GPUs, on a simulated clock: the k-th kernel on either GPU ends only once
// both have started it (each spins until its peer arrives), and each rank
// learns what its kernels take, spinning included, as the library does (the
// median of samples that come back late). The hosts run far ahead of the
// GPUs, as an all-reduce loop without synchronisation does.
#include "vgpu/limiter/duty_gate.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <deque>
#include <vector>

#include "vgpu/limiter/share_pacer.hpp"

namespace hami::vgpu::limiter {
namespace {

constexpr int64_t us = 1'000;
constexpr int64_t ms = 1'000'000;
constexpr int64_t kPeriod = 100 * ms;

TEST(DutyGate, GoesAtOnceInTheOnPhaseWhileTheQueueFits) {
  DutyGate g(kPeriod);
  // Window 3 is [300, 400) ms; at 30 % its on-phase ends at 330 ms.
  EXPECT_EQ(g.on_end(3, 30), 330 * ms);
  const int64_t now = 310 * ms;
  EXPECT_EQ(g.decide(now, 1 * ms, 30, now).go, now);            // idle
  EXPECT_EQ(g.decide(328 * ms, 2 * ms, 30, now).go, now);       // ends at 330
  EXPECT_EQ(g.decide(329 * ms, 2 * ms, 30, now).go, 400 * ms);  // would end past it
  EXPECT_EQ(g.decide(now, 50 * ms, 30, now).go, now);           // longer than the phase, GPU idle
  EXPECT_EQ(g.decide(0, 1 * ms, 30, 335 * ms).go, 400 * ms);    // the off-phase
  EXPECT_EQ(g.decide(0, 1 * ms, 30, 335 * ms).window, 4);
  // The queue reaches into the next on-phase: the launch goes as it opens,
  // queued behind it.
  EXPECT_EQ(g.decide(410 * ms, 1 * ms, 30, 335 * ms).go, 400 * ms);
  // ... or past that on-phase: the window after.
  EXPECT_EQ(g.decide(450 * ms, 1 * ms, 30, 335 * ms).go, 500 * ms);
}

TEST(DutyGate, WorkPastThePhaseBuysIdleTimeAfterIt) {
  // 4 ms past the end at 30 %: 4 * 70 / 30 ms of idle after it.
  EXPECT_EQ(DutyGate::tail_after(320 * ms, 14 * ms, 330 * ms, 30), 334 * ms + 4 * ms * 70 / 30);
  EXPECT_EQ(DutyGate::tail_after(320 * ms, 5 * ms, 330 * ms, 30), 325 * ms);
  // Started past the end: all of it is over.
  EXPECT_EQ(DutyGate::tail_after(340 * ms, 3 * ms, 330 * ms, 50), 346 * ms);
}

// A gate `g` whose one peer is gated by `p`, each counting in its own slots.
struct TwoGates {
  TwoGates() {
    g.set_counts(mine);
    p.set_counts(peer);
    const int64_t* peers[] = {peer};
    g.set_peers(peers, 1);
  }
  alignas(8) int64_t mine[DutyGate::kSlots] = {};
  alignas(8) int64_t peer[DutyGate::kSlots] = {};
  DutyGate g{kPeriod}, p{kPeriod};
};

TEST(DutyGate, CountsEachWindowInItsSlotAndReadsOnlyThatWindow) {
  TwoGates two;
  DutyGate& g = two.g;
  DutyGate& p = two.p;
  g.count(7, 3);
  g.count(8, 1);  // the next window: another slot
  g.count(7, 2);
  EXPECT_EQ(g.counted(7), 5);
  EXPECT_EQ(g.counted(8), 1);
  EXPECT_EQ(g.counted(11), 0);  // its slot holds window 7
  g.count(11, 4);               // takes window 7's slot over
  EXPECT_EQ(g.counted(7), 0);
  g.count(7, 1);  // stale: a later window holds the slot
  EXPECT_EQ(g.counted(11), 4);
  g.count(8, -5);  // never below 0
  EXPECT_EQ(g.counted(8), 0);
  p.count(11, 6);
  EXPECT_EQ(g.peers_counted(11), 6);
  EXPECT_EQ(g.peers_counted(8), 0);
}

TEST(DutyGate, ARankBehindItsPeerCatchesUpWithinTheSlack) {
  TwoGates two;
  DutyGate& g = two.g;
  DutyGate& p = two.p;
  const int64_t now = 332 * ms;  // window 3's off-phase at 30 %
  g.count(3, 10);
  p.count(3, 10);
  EXPECT_EQ(g.decide(now, 1 * ms, 30, now).go, 400 * ms);  // level: waits
  p.count(3, 1);
  const DutyGate::Decision d = g.decide(now, 1 * ms, 30, now);
  EXPECT_EQ(d.go, now);  // the peer's 11th kernel spins for this one
  EXPECT_TRUE(d.catch_up);
  EXPECT_EQ(d.window, 3);
  // Not with the queue past the slack (a fifth of the on-phase: 6 ms).
  EXPECT_EQ(g.catch_up_slack(30), 6 * ms);
  EXPECT_EQ(g.decide(337 * ms, 1 * ms, 30, now).go, 400 * ms);
  // A launch already sent to window 4 goes early on the same terms.
  EXPECT_EQ(g.behind_in(now, 30, now, 4), 3);
  EXPECT_EQ(g.behind_in(now, 30, now, 3), -1);  // only windows before `before`
  // At 90 % window 3's on-phase ends at 390 ms: in window 4, within the
  // slack, its deficit comes first, and the launch pairs with the peer's
  // kernel of window 3.
  const DutyGate::Decision late = g.decide(0, 1 * ms, 90, 401 * ms);
  EXPECT_EQ(late.go, 401 * ms);
  EXPECT_EQ(late.window, 3);
  EXPECT_TRUE(late.catch_up);
  EXPECT_EQ(g.decide(0, 1 * ms, 90, 411 * ms).window, 4);  // past the slack: window 4's own
  g.count(3, 1);
  EXPECT_EQ(g.behind_in(now, 30, now, 4), -1);  // level again
}

// A tenant that forges its peers' counts, so that every launch past the
// window may "catch up", gets at most a fifth of its share more: the slack.
TEST(DutyGate, ForgedPeerCountsBuyAFifthOfTheShareAtMost) {
  for (uint32_t percent : {30u, 50u, 90u}) {
    alignas(8) int64_t clock = 0;
    alignas(8) int64_t mine[DutyGate::kSlots] = {};
    alignas(8) int64_t forged[DutyGate::kSlots] = {};
    SharePacer tail(&clock);
    DutyGate g(kPeriod);
    g.set_counts(mine);
    const int64_t* peers[] = {forged};
    g.set_peers(peers, 1);
    constexpr int64_t kCost = 500 * us;
    constexpr int64_t kSpan = 2'000 * ms;
    int64_t now = 0;
    int64_t gpu_free = 0;
    int64_t busy = 0;
    while (now < kSpan) {
      for (int64_t w = std::max<int64_t>(0, g.window_of(now) - 1); w <= g.window_of(now) + 2; ++w)
        forged[w % DutyGate::kSlots] = w << DutyGate::kCountBits | DutyGate::kCountMask;
      const DutyGate::Decision d = g.decide(tail.clock_now(), kCost, percent, now);
      if (d.go > now) {
        now = d.go;
        continue;
      }
      g.count(d.window, 1);
      tail.advance(now, [&](int64_t start) {
        return d.catch_up ? start + kCost
                          : DutyGate::tail_after(start, kCost,
                                                 g.on_end(g.window_of(start), percent), percent);
      });
      const int64_t start = std::max(now, gpu_free);
      gpu_free = start + kCost;
      busy += std::max<int64_t>(0, std::min(gpu_free, kSpan) - start);
      now += 5 * us;
    }
    const double got = static_cast<double>(busy) / static_cast<double>(kSpan);
    EXPECT_GT(got, percent / 100.0) << percent;
    EXPECT_LE(got, percent / 100.0 * 1.2 + 0.01) << percent;
  }
}

// --- Two ranks ---------------------------------------------------------------

struct PairResult {
  double throughput;           // collectives done, as a fraction of bare
  std::array<double, 2> busy;  // each GPU's time in kernels, spinning too, of the span
};

struct PairSetup {
  uint32_t percent = 30;
  int64_t work = 900 * us;                   // a collective's kernel with both ranks there
  int64_t offset = 0;                        // rank 1 starts this much later
  std::array<double, 2> misjudge{1.0, 1.0};  // each rank's cost estimate x this
  bool counts = true;                        // the ranks see each other's counts
  int64_t span = 3'000 * ms;
};

// Mirrors LaunchLimiter::pace / may_go_early / went and the hook's wait
// (launch_hooks.cpp: 200 us slices while the gate holds a launch).
PairResult run_pair(const PairSetup& s) {
  constexpr int64_t kHostNs = 5 * us;     // a launch's host time
  constexpr int64_t kSliceNs = 200 * us;  // the hook's gate slice
  alignas(8) static int64_t clocks[2];
  alignas(8) static int64_t counts[2][DutyGate::kSlots];
  clocks[0] = clocks[1] = 0;
  for (auto& c : counts)
    std::fill(std::begin(c), std::end(c), 0);
  std::array<SharePacer, 2> tails{SharePacer(&clocks[0]), SharePacer(&clocks[1])};
  std::array<DutyGate, 2> gates{DutyGate(kPeriod), DutyGate(kPeriod)};
  for (int d = 0; d < 2; ++d) {
    gates[static_cast<size_t>(d)].set_counts(counts[d]);
    const int64_t* peer[] = {counts[1 - d]};
    if (s.counts) gates[static_cast<size_t>(d)].set_peers(peer, 1);
  }
  struct Rank {
    int64_t host = 0;
    int64_t cost = 0;
    bool waiting = false;  // holding a launch the gate deferred
    int64_t go = 0;
    int64_t window = 0;
    std::vector<int64_t> enqueued;  // when each collective reached this GPU's queue
  };
  std::array<Rank, 2> r;
  r[1].host = s.offset;
  for (Rank& x : r)
    x.cost = s.work;
  std::vector<int64_t> end;                     // of each collective, once both launched it
  std::array<std::vector<int64_t>, 2> started;  // on each GPU
  std::array<std::deque<int64_t>, 2> measured;
  auto book = [&](int d, int64_t now, bool catch_up) {
    Rank& x = r[static_cast<size_t>(d)];
    DutyGate& g = gates[static_cast<size_t>(d)];
    tails[static_cast<size_t>(d)].advance(now, [&](int64_t start) {
      return catch_up ? start + x.cost
                      : DutyGate::tail_after(start, x.cost, g.on_end(g.window_of(start), s.percent),
                                             s.percent);
    });
    x.enqueued.push_back(now);
    x.host = now + kHostNs;
  };
  for (;;) {
    const int d = r[0].host <= r[1].host ? 0 : 1;
    Rank& x = r[static_cast<size_t>(d)];
    DutyGate& g = gates[static_cast<size_t>(d)];
    const int64_t now = x.host;
    if (now > s.span) break;
    // Collectives both ranks launched: when they start and end on each GPU;
    // samples of those done by now come back (the last 8 not yet).
    while (end.size() < std::min(r[0].enqueued.size(), r[1].enqueued.size())) {
      const size_t k = end.size();
      std::array<int64_t, 2> st{};
      for (size_t e = 0; e < 2; ++e)
        st[e] = std::max(r[e].enqueued[k], k > 0 ? end[k - 1] : 0);
      end.push_back(std::max(st[0], st[1]) + s.work);
      for (size_t e = 0; e < 2; ++e) {
        started[e].push_back(st[e]);
        measured[e].push_back(end.back() - st[e]);
      }
    }
    auto& m = measured[static_cast<size_t>(d)];
    while (m.size() > 24)
      m.pop_front();
    if (m.size() > 8) {
      std::vector<int64_t> v(m.begin(), m.end() - 8);
      std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
      x.cost = static_cast<int64_t>(static_cast<double>(v[v.size() / 2]) *
                                    s.misjudge[static_cast<size_t>(d)]);
    }
    if (x.waiting) {
      const int64_t tail = tails[static_cast<size_t>(d)].clock_now();
      if (now < x.go && g.behind_in(tail, s.percent, now, x.window) < 0) {
        x.host = std::min(x.go, now + kSliceNs);
        continue;
      }
      x.waiting = false;
      const int64_t v =
          g.window_of(now) < x.window ? g.behind_in(tail, s.percent, now, x.window) : -1;
      if (v >= 0) {
        g.count(x.window, -1);
        g.count(v, 1);
      }
      book(d, now, v >= 0);
      continue;
    }
    const DutyGate::Decision dec =
        g.decide(tails[static_cast<size_t>(d)].clock_now(), x.cost, s.percent, now);
    g.count(dec.window, 1);
    if (dec.go <= now) {
      book(d, now, dec.catch_up);
    } else {
      x.waiting = true;
      x.go = dec.go;
      x.window = dec.window;
      x.host = std::min(dec.go, now + kSliceNs);
    }
  }
  PairResult out{};
  int64_t done = 0;
  std::array<double, 2> busy{0, 0};
  for (size_t k = 0; k < end.size(); ++k) {
    if (end[k] > s.span) break;
    ++done;
    for (size_t e = 0; e < 2; ++e)
      busy[e] += static_cast<double>(end[k] - started[e][k]);
  }
  out.throughput =
      static_cast<double>(done) * static_cast<double>(s.work) / static_cast<double>(s.span);
  for (size_t e = 0; e < 2; ++e)
    out.busy[e] = busy[e] / static_cast<double>(s.span);
  return out;
}

// Kernels of 0.05 to 5 ms, the ranks starting up to 3 ms apart, each rank
// judging its costs right or 3 % off, one over, one under: the GPU time then
// follows the rank that fits more (3 % over at most). Biased 10 % apart for
// good, one rank runs past each window by more than the slack lets the
// other catch up, and its kernels spin through the off-phase; in phase both
// time the same kernels, and agree.
TEST(DutyGatePair, CollectivesHoldTheirShare) {
  for (uint32_t percent : {30u, 50u, 90u}) {
    for (int64_t work : {50 * us, 400 * us, 900 * us, 3 * ms, 5 * ms}) {
      for (int64_t offset : {0 * ms, 1 * ms, 3 * ms}) {
        for (std::array<double, 2> misjudge :
             {std::array<double, 2>{1.0, 1.0}, std::array<double, 2>{0.97, 1.03}}) {
          SCOPED_TRACE(testing::Message()
                       << percent << "% of " << work / us << " us kernels, ranks " << offset / us
                       << " us apart, costs judged x" << misjudge[0] << "/x" << misjudge[1]);
          const PairResult r =
              run_pair({.percent = percent, .work = work, .offset = offset, .misjudge = misjudge});
          EXPECT_GE(r.throughput, 0.9 * percent / 100.0);
          // Never more than the share: each GPU's kernel time, spinning too.
          for (double b : r.busy)
            EXPECT_LE(b, percent / 100.0 + 0.03);
        }
      }
    }
  }
}

// Without the counts a rank that fits one more launch into a window than its
// peer leaves that kernel spinning through the off-phase: the GPU is busy
// far past the share for little work.
TEST(DutyGatePair, WithoutTheCountsOneRankSpinsThroughTheOffPhase) {
  const PairSetup s{.percent = 30, .misjudge = {0.97, 1.03}};
  PairSetup apart = s;
  apart.counts = false;
  const PairResult without = run_pair(apart);
  EXPECT_GT(std::max(without.busy[0], without.busy[1]), 0.30 + 0.10);
  const PairResult with = run_pair(s);
  EXPECT_LE(std::max(with.busy[0], with.busy[1]), 0.30 + 0.03);
  EXPECT_GE(with.throughput, 0.9 * 0.30);
}

}  // namespace
}  // namespace hami::vgpu::limiter
