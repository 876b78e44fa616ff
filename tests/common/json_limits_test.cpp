#include "common/json_limits.hpp"

#include <gtest/gtest.h>

#include <string>

namespace hami {
namespace {

std::string nested(int levels) {
  return std::string(static_cast<size_t>(levels), '[') +
         std::string(static_cast<size_t>(levels), ']');
}

TEST(JsonLimits, DepthUpToTheLimitPasses) {
  EXPECT_TRUE(check_json_limits(nested(64)));
  auto r = check_json_limits(nested(65));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "JSON nested deeper than 64 levels (at byte 64)");
  EXPECT_TRUE(check_json_limits(nested(3), {.max_depth = 3}));
  EXPECT_FALSE(check_json_limits(R"({"a":{"b":{"c":{}}}})", {.max_depth = 3}));
}

TEST(JsonLimits, ValuesAreCounted) {
  // An array, then one per comma: 1 + 4.
  EXPECT_TRUE(check_json_limits("[1,2,3,4,5]", {.max_values = 5}));
  auto r = check_json_limits("[1,2,3,4,5,6]", {.max_values = 5});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("more than 5 values"), std::string::npos);
  // An object and one per ':' and ','.
  EXPECT_TRUE(check_json_limits(R"({"a":1,"b":2})", {.max_values = 4}));
  EXPECT_FALSE(check_json_limits(R"({"a":1,"b":2})", {.max_values = 3}));
}

TEST(JsonLimits, BracketsAndSeparatorsInStringsDoNotCount) {
  const std::string s = R"({"k":"[[[[,,,:::\"[[[[\\"})";
  EXPECT_TRUE(check_json_limits(s, {.max_depth = 1, .max_values = 2}));
  // After an escaped backslash the quote closes the string: the '[' counts.
  EXPECT_FALSE(check_json_limits(R"(["\\",[[]]])", {.max_depth = 2}));
  EXPECT_TRUE(check_json_limits(R"(["\\\"[[[["])", {.max_depth = 1}));
}

TEST(JsonLimits, TheAttackShapesAreRefusedAtOnce) {
  // 10 million nested objects cost ~1.6 GB in a DOM parse.
  std::string deep;
  for (int i = 0; i < 100000; ++i)
    deep += "{\"a\":";
  EXPECT_FALSE(check_json_limits(deep));
  std::string flat = "[";
  for (int i = 0; i < 600000; ++i)
    flat += "{},";
  flat += "{}]";
  EXPECT_FALSE(check_json_limits(flat)) << "1.2 million values";
}

}  // namespace
}  // namespace hami
