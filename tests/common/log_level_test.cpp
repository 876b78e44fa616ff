// --log-level's one meaning: words and LIBCUDA_LOG_LEVEL's numbers, the same
// level either way, anything else refused with the accepted values named.
#include "common/log_level.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hami {
namespace {

using log::Level;

TEST(LogLevel, WordsAndNumbersMeanTheSame) {
  const std::pair<const char*, const char*> same[] = {
      {"silent", "0"}, {"error", "1"}, {"warn", "2"}, {"info", "3"}, {"debug", "4"}};
  for (const auto& [word, number] : same) {
    auto w = parse_log_level(word);
    auto n = parse_log_level(number);
    ASSERT_TRUE(w) << word;
    ASSERT_TRUE(n) << number;
    EXPECT_EQ(*w, *n) << word;
  }
  EXPECT_EQ(*parse_log_level("error"), Level::kError);
  EXPECT_EQ(*parse_log_level("4"), Level::kDebug);
}

TEST(LogLevel, AnythingElseIsRefusedNamingTheChoices) {
  for (const char* bad : {"verbose", "5", "-1", "", "DEBUG", "03", "info "}) {
    auto l = parse_log_level(bad);
    ASSERT_FALSE(l) << bad;
    EXPECT_THAT(l.error().message, ::testing::HasSubstr("expected error, warn, info, debug"));
  }
}

TEST(LogLevel, DescribedAsNumberAndWord) {
  EXPECT_EQ(describe_log_level(Level::kDebug), "4 (debug)");
  EXPECT_EQ(describe_log_level(Level::kSilent), "0 (silent)");
  EXPECT_STREQ(log_level_name(Level::kWarn), "warn");
}

}  // namespace
}  // namespace hami
