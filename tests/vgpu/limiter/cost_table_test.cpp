#include "vgpu/limiter/cost_table.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace hami::vgpu::limiter {
namespace {

TEST(CostTable, FindAndInsert) {
  CostTable t(64);
  EXPECT_EQ(t.find(42), nullptr);
  CostEntry* e = t.insert(42);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->key.load(), 42u);
  EXPECT_EQ(e->cost_ns.load(), 0);
  EXPECT_EQ(t.find(42), e);
  EXPECT_EQ(t.insert(42), e);  // already there
  EXPECT_EQ(t.size(), 1u);
  e->cost_ns.store(216'000);
  EXPECT_EQ(t.find(42)->cost_ns.load(), 216'000);
  EXPECT_EQ(t.find(43), nullptr);
}

TEST(CostTable, KeyZeroIsNormalised) {
  CostTable t(64);
  CostEntry* e = t.insert(0);
  ASSERT_NE(e, nullptr);
  EXPECT_NE(e->key.load(), 0u);  // 0 marks a free entry
  EXPECT_EQ(e->key.load(), CostTable::normalise(0));
  EXPECT_EQ(t.find(0), e);
  EXPECT_EQ(t.find(CostTable::normalise(0)), e);
  EXPECT_EQ(CostTable::normalise(7), 7u);
}

TEST(CostTable, AFullTableReturnsNull) {
  CostTable t(100);  // rounded up to 128
  for (uint64_t k = 1; k <= 128; ++k)
    ASSERT_NE(t.insert(k), nullptr) << k;
  EXPECT_EQ(t.size(), 128u);
  EXPECT_EQ(t.insert(129), nullptr);
  EXPECT_EQ(t.find(129), nullptr);
  EXPECT_EQ(t.size(), 128u);
  for (uint64_t k = 1; k <= 128; ++k)
    ASSERT_NE(t.find(k), nullptr) << k;
}

TEST(CostTable, ProbesAreBounded) {
  CostTable t(1024);
  // Keys that all want the same slot: 32 probes, then the table counts as full.
  for (uint64_t j = 0; j < 32; ++j)
    ASSERT_NE(t.insert(5 + j * 1024), nullptr) << j;
  EXPECT_EQ(t.insert(5 + 32 * 1024), nullptr);
  EXPECT_NE(t.insert(6 + 40 * 1024), nullptr);  // from slot 6, slot 37 is the 32nd probe
  EXPECT_EQ(t.find(5 + 32 * 1024), nullptr);
}

}  // namespace
}  // namespace hami::vgpu::limiter
