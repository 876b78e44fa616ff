// The state file written by upstream HAMi-core v1.2 on an H200 (one PyTorch
// process, 4 GiB and 30 % limits) reads back with exactly the values it holds.
#include <gtest/gtest.h>
#include <cstring>

#include "region/region.hpp"
#include "region/snapshot.hpp"
#include "support/fixtures.hpp"
#include "support/temp_dir.hpp"

namespace hami::region {
namespace {

constexpr const char* kFixture = "hami-core-v1.2-one-process.cache.gz";

void expect_fixture_values(const RegionSnapshot& s) {
  EXPECT_EQ(s.file_size, 2008953u);
  EXPECT_EQ(s.layout->id, LayoutId::kV1);
  EXPECT_EQ(s.major, 1u);
  EXPECT_EQ(s.minor, 2u);
  EXPECT_TRUE(s.writable);
  EXPECT_TRUE(s.warnings.empty());
  EXPECT_EQ(s.device_num, 1u);
  EXPECT_EQ(s.uuids[0], "GPU-90496d2f-68cf-ad72-f361-08e59367de69");
  for (int d = 1; d < kMaxDevices; ++d)
    EXPECT_EQ(s.uuids[d], "");
  for (int d = 0; d < kMaxDevices; ++d) {
    EXPECT_EQ(s.memory_limit[d], 4ull << 30) << d;
    EXPECT_EQ(s.sm_limit[d], 30u) << d;
  }
  EXPECT_EQ(s.proc_num_raw, 1);
  EXPECT_EQ(s.utilization_switch, 1);
  EXPECT_EQ(s.recent_kernel, 2);
  EXPECT_EQ(s.priority, 0);
  ASSERT_TRUE(s.last_kernel_time.has_value());
  EXPECT_EQ(*s.last_kernel_time, 1795296631u);  // 2026-11-21T21:30:31Z

  ASSERT_EQ(s.slots.size(), 1u);
  const SlotSnapshot& p = s.slots[0];
  EXPECT_EQ(p.index, 0);
  EXPECT_EQ(p.pid, 620);
  EXPECT_EQ(p.host_pid, 620);
  EXPECT_EQ(p.status, kSlotRunning);
  EXPECT_FALSE(p.owner_tagged);
  EXPECT_EQ(p.liveness, Liveness::kUnknown);
  EXPECT_EQ(p.used[0].context, 543162368u);
  EXPECT_EQ(p.used[0].module, 0u);
  EXPECT_EQ(p.used[0].data, 1210188800u);
  EXPECT_EQ(p.used[0].offset, 0u);
  EXPECT_EQ(p.used[0].total, 1753351168u);
  EXPECT_EQ(p.nvml_used[0], 1851785216u);
  EXPECT_EQ(p.sm_util[0], 3u);
  for (int d = 1; d < kMaxDevices; ++d)
    EXPECT_EQ(p.used[d].total, 0u);
  EXPECT_EQ(s.device_used(0), 1753351168u);
  EXPECT_EQ(s.device_rows(), 1);
}

TEST(UpstreamFixture, ParsesFromBytes) {
  auto bytes = test::read_gzip_fixture(kFixture);
  auto snap = parse_region(bytes, "fixture");
  ASSERT_TRUE(snap) << snap.error().message;
  expect_fixture_values(*snap);
}

TEST(UpstreamFixture, ReadsFromFile) {
  test::TempDir dir;
  const std::string path = dir.file("upstream.cache");
  test::write_file(path, test::read_gzip_fixture(kFixture));
  auto snap = read_snapshot(path);
  ASSERT_TRUE(snap) << snap.error().message;
  EXPECT_EQ(snap->source, path);
  expect_fixture_values(*snap);
}

// read_snapshot reads only the header, the tail and the slots below proc_num;
// what it returns must equal a parse of the whole file.
TEST(UpstreamFixture, PartialFileReadEqualsWholeParse) {
  auto bytes = test::read_gzip_fixture(kFixture);
  const Layout& l = layout(LayoutId::kV1);
  auto put32 = [&](size_t off, int32_t v) { std::memcpy(bytes.data() + off, &v, sizeof v); };
  auto put64 = [&](size_t off, uint64_t v) { std::memcpy(bytes.data() + off, &v, sizeof v); };
  for (int i = 1; i < 4; ++i) {
    const size_t base = l.procs + l.slot.size * static_cast<size_t>(i);
    put32(base + l.slot.pid, 100 + i);
    put32(base + l.slot.status, 1);
    put64(base + l.slot.used + l.slot.used_stride * 2 + 32, 1000u * static_cast<uint64_t>(i));
  }
  put32(l.proc_num, 3);  // slot 3 lies beyond proc_num: neither reader may see it
  put32(l.recent_kernel, 2);

  test::TempDir dir;
  const std::string path = dir.file("partial.cache");
  test::write_file(path, bytes);
  auto whole = parse_region(bytes, path);
  auto read = read_snapshot(path);
  ASSERT_TRUE(whole) << whole.error().message;
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(read->file_size, whole->file_size);
  EXPECT_EQ(read->recent_kernel, 2);
  EXPECT_EQ(read->uuids, whole->uuids);
  EXPECT_EQ(read->memory_limit, whole->memory_limit);
  ASSERT_EQ(read->slots.size(), 3u);
  ASSERT_EQ(whole->slots.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(read->slots[i].pid, whole->slots[i].pid);
    EXPECT_EQ(read->slots[i].used[2].total, whole->slots[i].used[2].total);
  }
  EXPECT_EQ(read->device_used(2), 3000u);
}

// Our library attaches an upstream-written 1.2 file, keeps its slot and limits,
// and adds its own slot beside it.
TEST(UpstreamFixture, AttachesForWritingAndKeepsUpstreamSlot) {
  test::TempDir dir;
  const std::string path = dir.file("upstream.cache");
  test::write_file(path, test::read_gzip_fixture(kFixture));
  {
    auto region = Region::open(path, OpenOptions{.create = false});
    ASSERT_TRUE(region) << region.error().message;
    EXPECT_EQ(region->memory_limit(0), 4ull << 30);
    EXPECT_EQ(region->sm_limit(3), 30u);
    EXPECT_EQ(region->device_uuid(0), "GPU-90496d2f-68cf-ad72-f361-08e59367de69");
    auto slot = region->register_process(ProcessIdentity{4242, 99});
    ASSERT_TRUE(slot) << slot.error().message;
    EXPECT_EQ(*slot, 1);
    EXPECT_EQ(region->proc_num(), 2);
    region->slot(*slot).add_usage(0, UsageKind::kData, 1 << 20);
    EXPECT_EQ(region->device_usage(0), 1753351168u + (1u << 20));
  }
  auto snap = read_snapshot(path);
  ASSERT_TRUE(snap);
  // Our slot was released on close; upstream's stays untouched.
  expect_fixture_values(*snap);
}

}  // namespace
}  // namespace hami::region
