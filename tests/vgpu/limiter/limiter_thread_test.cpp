// The limiter's lock-free parts under real threads; labelled "concurrency",
// so CI runs them under ThreadSanitizer too.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "vgpu/limiter/collective_kernels.hpp"
#include "vgpu/limiter/cost_table.hpp"
#include "vgpu/limiter/duty_gate.hpp"
#include "vgpu/limiter/share_pacer.hpp"

namespace hami::vgpu::limiter {
namespace {

TEST(CostTable, FindsWhileAnotherThreadInserts) {
  constexpr uint64_t kKeys = 4096;
  CostTable t(2 * kKeys);
  std::atomic<uint64_t> inserted{0};  // keys 1..inserted are in, with their cost
  std::atomic<bool> bad{false};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&, r] {
      uint64_t k = static_cast<uint64_t>(r) + 1;
      while (inserted.load(std::memory_order_acquire) < kKeys) {
        const uint64_t known = inserted.load(std::memory_order_acquire);
        k = k * 2862933555777941757ull + 3037000493ull;
        const uint64_t key = 1 + k % kKeys;
        const CostEntry* e = t.find(key);
        if (e != nullptr && e->key.load(std::memory_order_relaxed) != key) bad = true;
        if (key <= known && (e == nullptr || e->cost_ns.load() != static_cast<int64_t>(key)))
          bad = true;
      }
    });
  }
  bool full = false;
  for (uint64_t k = 1; k <= kKeys; ++k) {
    CostEntry* e = t.insert(k);
    if (e == nullptr) {
      full = true;
      inserted.store(kKeys);
      break;
    }
    e->cost_ns.store(static_cast<int64_t>(k));
    inserted.store(k, std::memory_order_release);
  }
  for (auto& th : readers)
    th.join();
  EXPECT_FALSE(full);
  EXPECT_FALSE(bad.load());
  EXPECT_EQ(t.size(), kKeys);
}

// Eight threads, thread t admitting through pacers[t % size], each 20,000
// launches of 7 ns at 35 % (20 ns of the clock) at time 0: every slot must be
// handed out exactly once.
void expect_every_slot_once(const std::vector<SharePacer*>& pacers) {
  constexpr int kThreads = 8, kEach = 20'000;
  std::vector<std::vector<int64_t>> starts(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    SharePacer& p = *pacers[static_cast<size_t>(t) % pacers.size()];
    threads.emplace_back([&p, &mine = starts[static_cast<size_t>(t)]] {
      mine.reserve(kEach);
      for (int i = 0; i < kEach; ++i)
        mine.push_back(p.admit(7, 35, 0, 0));
    });
  }
  for (auto& t : threads)
    t.join();
  for (SharePacer* p : pacers)
    EXPECT_EQ(p->backlog_ns(0), int64_t{kThreads} * kEach * 20);
  std::vector<int64_t> all;
  for (const auto& v : starts)
    all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  for (size_t i = 0; i < all.size(); ++i)
    ASSERT_EQ(all[i], static_cast<int64_t>(i) * 20) << i;
}

TEST(SharePacer, ConcurrentAdmitsKeepTheTotalExact) {
  SharePacer pacer;
  expect_every_slot_once({&pacer});
}

// Two processes of a container, each with threads, on one clock in shared
// memory (here a plain variable, as the .pace file's is to each of them).
TEST(SharePacer, PacersOnOneSharedClockHandOutEverySlotOnce) {
  alignas(8) int64_t clock = 0;
  SharePacer a(&clock), b(&clock);
  expect_every_slot_once({&a, &b});
}

TEST(CostTable, ConcurrentInsertsOfTheSameKeysShareOneEntry) {
  constexpr uint64_t kKeys = 2048;
  CostTable t(4 * kKeys);
  constexpr int kThreads = 4;
  std::vector<std::vector<CostEntry*>> got(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&t, &mine = got[static_cast<size_t>(i)]] {
      for (uint64_t k = 1; k <= kKeys; ++k)
        mine.push_back(t.insert(k));
    });
  }
  for (auto& th : threads)
    th.join();
  for (uint64_t k = 0; k < kKeys; ++k) {
    ASSERT_NE(got[0][k], nullptr);
    for (int i = 1; i < kThreads; ++i)
      ASSERT_EQ(got[static_cast<size_t>(i)][k], got[0][k]) << "key " << k + 1;
  }
  EXPECT_EQ(t.size(), kKeys);
}

const char* name_by_parity(uintptr_t handle) {
  return handle % 128 == 0 ? "ncclDevKernel_AllReduce_Sum_f32_RING_LL" : "gemm";
}

// Threads of one process launching the same kernels at once all get the
// right answer while the table fills in.
TEST(CollectiveKernels, ThreadsAskingAtOnceAllGetTheRightAnswer) {
  CollectiveKernels kinds(&name_by_parity);
  std::atomic<bool> bad{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < 3; ++round) {
        for (uintptr_t h = 64; h <= 64 * 2048; h += 64) {
          if (kinds.is_collective(h) != (h % 128 == 0)) bad = true;
        }
      }
    });
  }
  for (auto& th : threads)
    th.join();
  EXPECT_FALSE(bad.load());
  EXPECT_LE(kinds.cached(), CollectiveKernels::kCapacity);
}

// Ranks count their collectives on their own devices while reading each
// other's: no count is lost, each sees the other's last value at the end.
TEST(DutyGate, RanksCountWhileReadingEachOther) {
  alignas(8) static int64_t counters[2];
  counters[0] = counters[1] = 0;
  DutyGate gates[2];
  for (int d = 0; d < 2; ++d) {
    gates[d].set_collectives(&counters[d]);
    const int64_t* peer[] = {&counters[1 - d]};
    gates[d].set_peers(peer, 1);
  }
  constexpr int kEach = 20000;
  std::vector<std::thread> threads;
  for (int d = 0; d < 2; ++d) {
    for (int t = 0; t < 2; ++t) {
      threads.emplace_back([&, d] {
        int64_t seen = 0;
        for (int i = 0; i < kEach; ++i) {
          gates[d].launched_collectives(1);
          seen = std::max(seen, gates[d].peers_collectives());
        }
        EXPECT_LE(seen, 2 * kEach);
      });
    }
  }
  for (auto& th : threads)
    th.join();
  EXPECT_EQ(gates[0].collectives(), 2 * kEach);
  EXPECT_EQ(gates[0].peers_collectives(), 2 * kEach);
  EXPECT_EQ(gates[1].peers_collectives(), 2 * kEach);
}

}  // namespace
}  // namespace hami::vgpu::limiter
