// The DutyGate on its own, then two ranks of a collective (NCCL's all-reduce,
// one process per GPU) gated as LaunchLimiter gates a container on several
// GPUs, on a simulated clock: the k-th collective kernel on either GPU ends
// only once both have started it (each spins until its peer arrives), and
// each rank learns what its kernels take, spinning included, as the library
// does (the median of samples that come back late). The hosts run far ahead
// of the GPUs, as an all-reduce loop without synchronisation does, or wait
// for their GPU every so often, as tests/gpu/nccl_allreduce.py does, rank 0
// launching a few kernels of its own there.
#include "vgpu/limiter/duty_gate.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <deque>
#include <limits>
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
  EXPECT_EQ(g.decide(now, 1 * ms, 30, now, false).go, now);            // idle
  EXPECT_EQ(g.decide(328 * ms, 2 * ms, 30, now, false).go, now);       // ends at 330
  EXPECT_EQ(g.decide(329 * ms, 2 * ms, 30, now, false).go, 400 * ms);  // would end past it
  EXPECT_EQ(g.decide(now, 50 * ms, 30, now, false).go, now);  // longer than the phase, GPU idle
  EXPECT_EQ(g.decide(0, 1 * ms, 30, 335 * ms, true).go, 400 * ms);  // the off-phase
  // The queue reaches into the next on-phase: the launch goes as it opens,
  // queued behind it.
  EXPECT_EQ(g.decide(410 * ms, 1 * ms, 30, 335 * ms, false).go, 400 * ms);
  // ... or past that on-phase: the window after.
  EXPECT_EQ(g.decide(450 * ms, 1 * ms, 30, 335 * ms, false).go, 500 * ms);
}

TEST(DutyGate, WorkPastThePhaseBuysIdleTimeAfterIt) {
  // 4 ms past the end at 30 %: 4 * 70 / 30 ms of idle after it.
  EXPECT_EQ(DutyGate::tail_after(320 * ms, 14 * ms, 330 * ms, 30), 334 * ms + 4 * ms * 70 / 30);
  EXPECT_EQ(DutyGate::tail_after(320 * ms, 5 * ms, 330 * ms, 30), 325 * ms);
  // Started past the end: all of it is over.
  EXPECT_EQ(DutyGate::tail_after(340 * ms, 3 * ms, 330 * ms, 50), 346 * ms);
}

// A gate `g` whose peers are gated by `p` and `q`, each with its own counter.
struct ThreeGates {
  ThreeGates() {
    g.set_collectives(&mine);
    p.set_collectives(&peer);
    q.set_collectives(&other);
    const int64_t* peers[] = {&peer, &other};
    g.set_peers(peers, 2);
  }
  alignas(8) int64_t mine = 0;
  alignas(8) int64_t peer = 0;
  alignas(8) int64_t other = 0;
  DutyGate g{kPeriod}, p{kPeriod}, q{kPeriod};
};

TEST(DutyGate, CountsCollectivesAndReadsThePeersMost) {
  ThreeGates three;
  three.g.launched_collectives(3);
  three.g.launched_collectives(2);
  EXPECT_EQ(three.g.collectives(), 5);
  EXPECT_EQ(three.mine, 5);  // in the shared counter
  three.p.launched_collectives(4);
  three.q.launched_collectives(7);
  EXPECT_EQ(three.g.peers_collectives(), 7);
  EXPECT_EQ(three.p.peers_collectives(), 0);  // p was given no peers
}

TEST(DutyGate, ACollectiveBehindAPeersCatchesUpWithinTheSlack) {
  ThreeGates three;
  DutyGate& g = three.g;
  const int64_t now = 332 * ms;  // window 3's off-phase at 30 %
  g.launched_collectives(10);
  three.p.launched_collectives(10);
  EXPECT_EQ(g.decide(now, 1 * ms, 30, now, true).go, 400 * ms);  // level: waits
  three.p.launched_collectives(1);
  const DutyGate::Decision d = g.decide(now, 1 * ms, 30, now, true);
  EXPECT_EQ(d.go, now);  // the peer's 11th kernel spins for this one
  EXPECT_TRUE(d.catch_up);
  // Only a collective: any other kernel pairs with nothing, and waits.
  EXPECT_EQ(g.decide(now, 1 * ms, 30, now, false).go, 400 * ms);
  // Not with the queue past the slack (a fifth of the on-phase: 6 ms).
  EXPECT_EQ(g.catch_up_slack(30), 6 * ms);
  EXPECT_EQ(g.decide(337 * ms, 1 * ms, 30, now, true).go, 400 * ms);
  EXPECT_TRUE(g.may_catch_up(now, 30, now));
  EXPECT_FALSE(g.may_catch_up(now, 30, 337 * ms));
  // At 90 % the slack (18 ms) outlasts the off-phase (10 ms): a rank behind
  // catches up anywhere in it.
  EXPECT_TRUE(g.decide(0, 1 * ms, 90, 399 * ms, true).catch_up);
  g.launched_collectives(1);
  EXPECT_FALSE(g.may_catch_up(now, 30, now));  // level again
  EXPECT_EQ(g.decide(now, 1 * ms, 30, now, true).go, 400 * ms);
}

// A tenant that forges its peers' counts, so that every collective past the
// window may "catch up", gets at most a fifth of its share more: the slack.
TEST(DutyGate, ForgedPeerCountsBuyAFifthOfTheShareAtMost) {
  for (uint32_t percent : {30u, 50u, 90u}) {
    alignas(8) int64_t clock = 0;
    alignas(8) int64_t mine = 0;
    alignas(8) int64_t forged = std::numeric_limits<int64_t>::max() / 2;
    SharePacer tail(&clock);
    DutyGate g(kPeriod);
    g.set_collectives(&mine);
    const int64_t* peers[] = {&forged};
    g.set_peers(peers, 1);
    constexpr int64_t kCost = 500 * us;
    constexpr int64_t kSpan = 2'000 * ms;
    int64_t now = 0;
    int64_t gpu_free = 0;
    int64_t busy = 0;
    while (now < kSpan) {
      const DutyGate::Decision d = g.decide(tail.clock_now(), kCost, percent, now, true);
      if (d.go > now) {
        now = d.go;
        continue;
      }
      g.launched_collectives(1);
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
  double throughput;                // collectives done, as a fraction of bare
  std::array<double, 2> busy;       // each GPU's time in kernels, spinning too, of the span
  std::array<double, 2> busy_last;  // the same over the span's last second
};

struct PairSetup {
  uint32_t percent = 30;
  int64_t work = 900 * us;                   // a collective's kernel with both ranks there
  int64_t offset = 0;                        // rank 1 starts this much later
  std::array<double, 2> misjudge{1.0, 1.0};  // each rank's cost estimate x this
  bool counts = true;                        // the ranks see each other's counts
  // Every `chunk` collectives (0: never) rank 0 waits for its GPU and
  // launches `extras` small kernels of its own; then both run one more
  // collective and wait for their GPUs (nccl_allreduce.py's loop).
  int chunk = 0;
  int extras = 0;
  // Rank `stall_rank`'s host stops for `stall` at `stall_at` (a page fault
  // storm, a collection, a preempted vCPU).
  int64_t stall_at = -1;
  int64_t stall = 0;
  int stall_rank = 1;
  int64_t span = 3'000 * ms;
};

// Mirrors LaunchLimiter::pace / may_go_early / went and the hook's wait
// (launch_hooks.cpp: 200 us slices while the gate holds a launch).
PairResult run_pair(const PairSetup& s) {
  constexpr int64_t kHostNs = 5 * us;     // a launch's host time
  constexpr int64_t kSliceNs = 200 * us;  // the hook's gate slice
  constexpr int64_t kSyncNs = 20 * us;    // a host's return from waiting on its GPU
  constexpr int64_t kExtraCost = 5 * us;
  enum Op : uint8_t { kCollective, kExtra, kSync };
  alignas(8) static int64_t clocks[2];
  alignas(8) static int64_t counters[2];
  clocks[0] = clocks[1] = counters[0] = counters[1] = 0;
  std::array<SharePacer, 2> tails{SharePacer(&clocks[0]), SharePacer(&clocks[1])};
  std::array<DutyGate, 2> gates{DutyGate(kPeriod), DutyGate(kPeriod)};
  for (int d = 0; d < 2; ++d) {
    gates[static_cast<size_t>(d)].set_collectives(&counters[d]);
    const int64_t* peer[] = {&counters[1 - d]};
    if (s.counts) gates[static_cast<size_t>(d)].set_peers(peer, 1);
  }
  struct Rank {
    int64_t host = 0;
    int64_t cost = 0;
    bool waiting = false;  // holding a launch the gate deferred
    int64_t go = 0;
    bool stalled = false;
    size_t step = 0;                // in the loop below
    std::vector<Op> loop;           // one chunk, repeated
    std::vector<int64_t> enqueued;  // when each collective reached this GPU's queue
  };
  std::array<Rank, 2> r;
  r[1].host = s.offset;
  for (size_t d = 0; d < 2; ++d) {
    r[d].cost = s.work;
    if (s.chunk == 0) {
      r[d].loop = {kCollective};
      continue;
    }
    r[d].loop.assign(static_cast<size_t>(s.chunk), kCollective);
    if (d == 0) {
      r[d].loop.push_back(kSync);
      r[d].loop.insert(r[d].loop.end(), static_cast<size_t>(s.extras), kExtra);
    }
    r[d].loop.push_back(kCollective);
    r[d].loop.push_back(kSync);
  }
  std::vector<int64_t> end;                     // of each collective, once both launched it
  std::array<std::vector<int64_t>, 2> started;  // on each GPU
  std::array<std::deque<int64_t>, 2> measured;
  auto book = [&](int d, int64_t now, bool catch_up, int64_t cost, bool collective) {
    Rank& x = r[static_cast<size_t>(d)];
    DutyGate& g = gates[static_cast<size_t>(d)];
    if (collective) g.launched_collectives(1);
    tails[static_cast<size_t>(d)].advance(now, [&](int64_t start) {
      return catch_up ? start + cost
                      : DutyGate::tail_after(start, cost, g.on_end(g.window_of(start), s.percent),
                                             s.percent);
    });
    if (collective) x.enqueued.push_back(now);
    x.host = now + kHostNs;
    ++x.step;
  };
  for (;;) {
    const int d = r[0].host <= r[1].host ? 0 : 1;
    Rank& x = r[static_cast<size_t>(d)];
    DutyGate& g = gates[static_cast<size_t>(d)];
    const int64_t now = x.host;
    if (now > s.span) break;
    if (d == s.stall_rank && s.stall_at >= 0 && !x.stalled && now >= s.stall_at) {
      x.stalled = true;
      x.host = now + s.stall;
      continue;
    }
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
    const Op op = x.loop[x.step % x.loop.size()];
    if (op == kSync) {
      // Waits for its last collective, which ends once the peer launched it.
      const size_t k = x.enqueued.size() - 1;
      if (end.size() <= k) {
        x.host = r[static_cast<size_t>(1 - d)].host + 1;
        continue;
      }
      x.host = std::max(now, end[k]) + kSyncNs;
      ++x.step;
      continue;
    }
    const bool collective = op == kCollective;
    const int64_t cost = collective ? x.cost : kExtraCost;
    const int64_t tail = tails[static_cast<size_t>(d)].clock_now();
    if (x.waiting) {
      const bool early = collective && g.may_catch_up(tail, s.percent, now);
      if (now < x.go && !early) {
        x.host = std::min(x.go, now + kSliceNs);
        continue;
      }
      x.waiting = false;
      book(d, now, early && now < x.go, cost, collective);
      continue;
    }
    const DutyGate::Decision dec = g.decide(tail, cost, s.percent, now, collective);
    if (dec.go <= now) {
      book(d, now, dec.catch_up, cost, collective);
    } else {
      x.waiting = true;
      x.go = dec.go;
      x.host = std::min(dec.go, now + kSliceNs);
    }
  }
  PairResult out{};
  int64_t done = 0;
  const int64_t last_from = s.span - 1'000 * ms;
  for (size_t k = 0; k < end.size(); ++k) {
    if (end[k] > s.span) break;
    ++done;
    for (size_t e = 0; e < 2; ++e) {
      out.busy[e] += static_cast<double>(end[k] - started[e][k]);
      out.busy_last[e] +=
          static_cast<double>(std::max<int64_t>(0, end[k] - std::max(started[e][k], last_from)));
    }
  }
  out.throughput =
      static_cast<double>(done) * static_cast<double>(s.work) / static_cast<double>(s.span);
  for (size_t e = 0; e < 2; ++e) {
    out.busy[e] /= static_cast<double>(s.span);
    out.busy_last[e] /= static_cast<double>(s.span - last_from);
  }
  return out;
}

// At least 0.9 x the share of what the same loop does ungated (its host's
// waits for its GPU leave the GPU idle either way), and each GPU busy, its
// kernels spinning too, no more than the share.
void expect_share(const PairSetup& s) {
  PairSetup bare_setup = s;
  bare_setup.percent = 100;
  const double bare = run_pair(bare_setup).throughput;
  const PairResult r = run_pair(s);
  const uint32_t percent = s.percent;
  EXPECT_GE(r.throughput, 0.9 * percent / 100.0 * bare);
  // Never more than the share: each GPU's kernel time, spinning too.
  for (double b : r.busy)
    EXPECT_LE(b, percent / 100.0 + 0.03);
  for (double b : r.busy_last)
    EXPECT_LE(b, percent / 100.0 + 0.03);
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
          expect_share({.percent = percent, .work = work, .offset = offset, .misjudge = misjudge});
        }
      }
    }
  }
}

// nccl_allreduce.py's loop: rank 0 alone waits for its GPU every chunk and
// sets three values on it (three small kernels). Counted with the
// collectives, those made rank 1 "catch up" on collectives rank 0 had not
// launched, whose kernels then spun through every off-phase (GPU 1 at
// 100 %); only collectives are counted.
TEST(DutyGatePair, KernelsOfOneRankAloneMoveNothing) {
  for (uint32_t percent : {30u, 50u, 90u}) {
    for (int64_t work : {50 * us, 900 * us, 3 * ms}) {
      for (int chunk : {5, 30, 100}) {
        SCOPED_TRACE(testing::Message() << percent << "% of " << work / us << " us kernels, "
                                        << chunk << " to a chunk");
        expect_share({.percent = percent,
                      .work = work,
                      .misjudge = {0.97, 1.03},
                      .chunk = chunk,
                      .extras = 3});
      }
    }
  }
}

// A rank whose host stalls past the slack cannot catch up in that window,
// and its peer's kernel spins meanwhile. Counted per window, the ranks then
// stayed one collective apart for good, the peer's last kernel of every
// window spinning through the off-phase; counted in total, the rank behind
// catches up, a fifth of an on-phase further each window (the whole window
// at most): back in step within five times the stall at shares up to 83 %,
// nine times at 90.
TEST(DutyGatePair, ARankStalledPastTheSlackIsBackInStepAfterwards) {
  for (uint32_t percent : {30u, 50u, 90u}) {
    for (int64_t work : {50 * us, 900 * us, 3 * ms}) {
      for (int stall_rank : {0, 1}) {
        for (int64_t stall : {8 * ms, 30 * ms, 100 * ms}) {
          SCOPED_TRACE(testing::Message() << percent << "% of " << work / us << " us kernels, rank "
                                          << stall_rank << " stalled " << stall / ms << " ms");
          const PairResult r = run_pair({.percent = percent,
                                         .work = work,
                                         .misjudge = {0.97, 1.03},
                                         .stall_at = 1'234 * ms,
                                         .stall = stall,
                                         .stall_rank = stall_rank,
                                         .span = 4'000 * ms});
          EXPECT_GE(r.throughput, 0.9 * percent / 100.0 - static_cast<double>(stall) / 4e9);
          for (double b : r.busy_last)
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
