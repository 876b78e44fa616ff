#include "vgpu/allocation_table.hpp"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace hami::vgpu {
namespace {

TEST(AllocationTable, InsertFindErase) {
  AllocationTable t;
  EXPECT_TRUE(t.insert(0x1000, {2, region::UsageKind::kData, 4096}));
  ASSERT_TRUE(t.find(0x1000));
  EXPECT_EQ(t.find(0x1000)->device, 2);
  EXPECT_FALSE(t.find(0x2000));
  auto a = t.erase(0x1000);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->bytes, 4096u);
  EXPECT_FALSE(t.erase(0x1000));
  EXPECT_EQ(t.size(), 0u);
}

TEST(AllocationTable, EraseDevice) {
  AllocationTable t;
  for (uint64_t i = 0; i < 100; ++i) {
    t.insert(i << 21, {static_cast<int>(i % 3), region::UsageKind::kData, 1});
  }
  auto gone = t.erase_device(1);
  EXPECT_EQ(gone.size(), 33u);
  EXPECT_EQ(t.size(), 67u);
  for (const auto& a : gone)
    EXPECT_EQ(a.device, 1);
}

TEST(AllocationTable, ConcurrentThreads) {
  AllocationTable t;
  std::vector<std::thread> threads;
  for (uint64_t th = 0; th < 8; ++th) {
    threads.emplace_back([&, th] {
      for (uint64_t i = 0; i < 2000; ++i) {
        const uint64_t key = (th << 40) | (i << 21);
        t.insert(key, {0, region::UsageKind::kData, 1});
        if (i % 2 == 0) t.erase(key);
      }
    });
  }
  for (auto& th : threads)
    th.join();
  EXPECT_EQ(t.size(), 8u * 1000);
}

}  // namespace
}  // namespace hami::vgpu
