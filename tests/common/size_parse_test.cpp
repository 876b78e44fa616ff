#include "common/size_parse.hpp"

#include <gtest/gtest.h>

namespace hami {
namespace {

TEST(ParseSize, Accepted) {
  EXPECT_EQ(*parse_size("0"), 0u);
  EXPECT_EQ(*parse_size("4096"), 4096u);
  EXPECT_EQ(*parse_size("4k"), 4096u);
  EXPECT_EQ(*parse_size("3000m"), 3000ull << 20);
  EXPECT_EQ(*parse_size("3000M"), 3000ull << 20);
  EXPECT_EQ(*parse_size("4g"), 4ull << 30);
  EXPECT_EQ(*parse_size("4Gi"), 4ull << 30);
  EXPECT_EQ(*parse_size("4GiB"), 4ull << 30);
  EXPECT_EQ(*parse_size("4gb"), 4ull << 30);
  EXPECT_EQ(*parse_size("2t"), 2ull << 40);
  EXPECT_EQ(*parse_size("100b"), 100u);
  EXPECT_EQ(*parse_size("010m"), 10ull << 20);  // decimal, unlike upstream's octal
  EXPECT_EQ(*parse_size("  5g\t"), 5ull << 30);
  EXPECT_EQ(*parse_size("18446744073709551615"), UINT64_MAX);
}

TEST(ParseSize, Refused) {
  for (const char* bad : {"", " ", "g", "4x", "4 g", "4gg", "4ib", "-1", "0x10", "1.5g", "4g!",
                          "18446744073709551616", "16777216t", "4kk"}) {
    auto r = parse_size(bad);
    ASSERT_FALSE(r) << "'" << bad << "'";
    EXPECT_NE(r.error().message.find("is not a size"), std::string::npos);
  }
}

TEST(ParsePercent, Range) {
  EXPECT_EQ(*parse_percent("0"), 0u);
  EXPECT_EQ(*parse_percent(" 30 "), 30u);
  EXPECT_EQ(*parse_percent("100"), 100u);
  EXPECT_FALSE(parse_percent("101"));
  EXPECT_FALSE(parse_percent("30%"));
  EXPECT_FALSE(parse_percent(""));
  EXPECT_FALSE(parse_percent("-5"));
}

}  // namespace
}  // namespace hami

namespace hami {
namespace {

TEST(ParseDuration, AcceptsUnits) {
  using std::chrono::microseconds;
  EXPECT_EQ(*parse_duration("5s"), microseconds(5'000'000));
  EXPECT_EQ(*parse_duration("5"), microseconds(5'000'000));
  EXPECT_EQ(*parse_duration(" 500ms "), microseconds(500'000));
  EXPECT_EQ(*parse_duration("2m"), microseconds(120'000'000));
  EXPECT_EQ(*parse_duration("1h"), microseconds(3'600'000'000));
  EXPECT_EQ(*parse_duration("250us"), microseconds(250));
  EXPECT_EQ(*parse_duration("0s"), microseconds(0));
}

TEST(ParseDuration, RejectsWithReason) {
  for (const char* bad :
       {"", "s", "1.5s", "5 s", "5sec", "-1s", "99999999999999999999s", "9999999999999h"}) {
    auto r = parse_duration(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find("is not a duration"), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace hami
