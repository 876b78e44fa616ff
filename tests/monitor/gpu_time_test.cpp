#include "monitor/gpu_time.hpp"

#include <gtest/gtest.h>

namespace hami::monitor {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

region::SlotSnapshot slot(int index, int32_t pid, uint64_t started, std::optional<uint64_t> dev0) {
  region::SlotSnapshot s;
  s.index = index;
  s.pid = pid;
  s.status = region::kSlotRunning;
  s.owner_start_time = started;
  s.liveness = region::Liveness::kAlive;
  s.gpu_time_ns[0] = dev0;
  return s;
}

region::RegionSnapshot file(std::vector<region::SlotSnapshot> slots) {
  region::RegionSnapshot r;
  r.device_num = 2;
  r.slots = std::move(slots);
  return r;
}

TEST(GpuTimeRates, TheGrowthOfTheCountersOverTheWallTime) {
  GpuTimeRates rates;
  const Clock::time_point t0 = Clock::now();
  rates.begin_pass(t0);
  EXPECT_FALSE(rates.percent("/c", file({slot(0, 7, 100, 5'000'000)}), 0)) << "first pass";
  rates.end_pass();
  // One second later the process published 300 ms more: 30 %.
  rates.begin_pass(t0 + milliseconds(1000));
  auto pct = rates.percent("/c", file({slot(0, 7, 100, 305'000'000)}), 0);
  ASSERT_TRUE(pct);
  EXPECT_NEAR(*pct, 30.0, 1e-9);
  EXPECT_FALSE(rates.percent("/c", file({slot(0, 7, 100, 305'000'000)}), 1))
      << "nothing published for device 1";
  rates.end_pass();
  // Two processes: the old one grew 100 ms, a new one started since and
  // published 150 ms; over 500 ms that is 50 %.
  rates.begin_pass(t0 + milliseconds(1500));
  pct = rates.percent("/c", file({slot(0, 7, 100, 405'000'000), slot(1, 9, 200, 150'000'000)}), 0);
  ASSERT_TRUE(pct);
  EXPECT_NEAR(*pct, 50.0, 1e-9);
  rates.end_pass();
}

TEST(GpuTimeRates, ASlotWithANewOwnerStartsFromZeroAndDeadSlotsDoNotCount) {
  GpuTimeRates rates;
  const Clock::time_point t0 = Clock::now();
  rates.begin_pass(t0);
  rates.percent("/c", file({slot(0, 7, 100, 900'000'000)}), 0);
  rates.end_pass();
  // The slot now belongs to another process (another start time) with 100 ms.
  region::SlotSnapshot dead = slot(1, 8, 50, 800'000'000);
  dead.liveness = region::Liveness::kDead;
  rates.begin_pass(t0 + milliseconds(1000));
  auto pct = rates.percent("/c", file({slot(0, 7, 300, 100'000'000), dead}), 0);
  ASSERT_TRUE(pct);
  EXPECT_NEAR(*pct, 10.0, 1e-9);
  rates.end_pass();
}

TEST(GpuTimeRates, FilesThatGoAwayAreForgotten) {
  GpuTimeRates rates;
  const Clock::time_point t0 = Clock::now();
  rates.begin_pass(t0);
  rates.percent("/a", file({slot(0, 7, 1, 1)}), 0);
  rates.percent("/b", file({slot(0, 7, 1, 1), slot(1, 8, 1, 1)}), 0);
  rates.end_pass();
  EXPECT_EQ(rates.tracked(), 3u);
  rates.begin_pass(t0 + milliseconds(10));
  rates.percent("/b", file({slot(1, 8, 1, 2)}), 0);
  rates.end_pass();
  EXPECT_EQ(rates.tracked(), 1u);
}

TEST(GpuTimeRates, CappedAtTheWholeGpu) {
  GpuTimeRates rates;
  const Clock::time_point t0 = Clock::now();
  rates.begin_pass(t0);
  rates.percent("/c", file({slot(0, 7, 1, 0)}), 0);
  rates.end_pass();
  rates.begin_pass(t0 + milliseconds(100));
  // Charged at launch, work queued ahead can run over for a moment.
  EXPECT_EQ(rates.percent("/c", file({slot(0, 7, 1, 150'000'000)}), 0), 100.0);
  rates.end_pass();
}

}  // namespace
}  // namespace hami::monitor
