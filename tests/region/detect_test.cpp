// Layout detection: every malformed header gets a clear error naming the file.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "region/layout_v1.hpp"
#include "region/layouts.hpp"
#include "region/snapshot.hpp"

namespace hami::region {
namespace {

std::vector<std::byte> header(int32_t magic, uint32_t major, uint32_t minor) {
  std::vector<std::byte> h(kHeaderProbeSize);
  std::memcpy(h.data(), &magic, 4);
  std::memcpy(h.data() + 4, &major, 4);
  std::memcpy(h.data() + 8, &minor, 4);
  return h;
}

TEST(DetectLayout, CurrentVersionIsWritable) {
  for (uint64_t size : {uint64_t{2008952}, uint64_t{2008953}}) {
    auto d = detect_layout(header(kMagic, 1, 2), size, "f");
    ASSERT_TRUE(d) << d.error().message;
    EXPECT_EQ(d->layout->id, LayoutId::kV1);
    EXPECT_TRUE(d->writable);
    EXPECT_TRUE(d->warnings.empty());
  }
  auto v11 = detect_layout(header(kMagic, 1, 1), 2008953, "f");
  ASSERT_TRUE(v11);
  EXPECT_TRUE(v11->writable);
}

TEST(DetectLayout, OlderErasBySize) {
  auto initial = detect_layout(header(kMagic, 0, 0), 804681, "f");
  ASSERT_TRUE(initial);
  EXPECT_EQ(initial->layout->id, LayoutId::kInitial2024);
  EXPECT_FALSE(initial->writable);
  auto v0 = detect_layout(header(kMagic, 1, 0), 1197896, "f");  // offset 4 is sm_init_flag here
  ASSERT_TRUE(v0);
  EXPECT_EQ(v0->layout->id, LayoutId::kV0);
  EXPECT_FALSE(v0->writable);
  auto atomics = detect_layout(header(kMagic, 1, 1), 2008985, "f");
  ASSERT_TRUE(atomics);
  EXPECT_EQ(atomics->layout->id, LayoutId::kV1Atomics);
  EXPECT_FALSE(atomics->writable);
}

TEST(DetectLayout, TooShort) {
  auto d = detect_layout(header(kMagic, 1, 2), 100, "/x/short.cache");
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("/x/short.cache"), std::string::npos);
  EXPECT_NE(d.error().message.find("too short"), std::string::npos);
  auto empty = detect_layout({}, 0, "/x/empty.cache");
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.error().message.find("0 bytes"), std::string::npos);
}

TEST(DetectLayout, WrongMagic) {
  auto d = detect_layout(header(0x12345678, 1, 2), 2008953, "/x/m.cache");
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("/x/m.cache: wrong magic 0x12345678"), std::string::npos);
  auto zero = detect_layout(header(0, 1, 2), 2008953, "/x/z.cache");
  ASSERT_FALSE(zero);
  EXPECT_NE(zero.error().message.find("not initialised"), std::string::npos);
}

TEST(DetectLayout, UnknownSize) {
  auto d = detect_layout(header(kMagic, 1, 2), 2008960, "/x/s.cache");
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("2008960"), std::string::npos);
  EXPECT_NE(d.error().message.find("matches no known layout"), std::string::npos);
  // 1.2 at the atomics era's size would need guessing: refused.
  EXPECT_FALSE(detect_layout(header(kMagic, 1, 2), 2008985, "f"));
  // Unversioned sizes are exact.
  EXPECT_FALSE(detect_layout(header(kMagic, 1, 2), 1197898, "f"));
}

TEST(DetectLayout, NewerMajorRefused) {
  auto d = detect_layout(header(kMagic, 2, 0), 2008953, "/x/n.cache");
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("version 2.0 is newer"), std::string::npos);
  // Even at a size no layout has, the version is the better explanation.
  auto big = detect_layout(header(kMagic, 3, 1), 3000000, "f");
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message.find("newer"), std::string::npos);
}

TEST(DetectLayout, NewerMinorReadOnlyWithWarning) {
  auto d = detect_layout(header(kMagic, 1, 3), 2008953, "f");
  ASSERT_TRUE(d);
  EXPECT_FALSE(d->writable);
  ASSERT_EQ(d->warnings.size(), 1u);
  EXPECT_NE(d->warnings[0].find("1.3"), std::string::npos);
}

// parse_region over a buffer of every plausible size never fails silently.
TEST(ParseRegion, RejectsTruncatedCopies) {
  std::vector<std::byte> bytes(kFileSize);
  const int32_t magic = kMagic;
  const uint32_t ver[2] = {1, 2};
  std::memcpy(bytes.data(), &magic, 4);
  std::memcpy(bytes.data() + 4, ver, 8);
  ASSERT_TRUE(parse_region(bytes, "f"));
  for (size_t cut : {size_t{0}, size_t{3}, size_t{12}, size_t{804679}, kRegionSize - 1}) {
    auto r = parse_region(std::span(bytes).first(cut), "cut");
    EXPECT_FALSE(r) << "size " << cut;
  }
}

}  // namespace
}  // namespace hami::region
