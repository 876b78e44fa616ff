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
  // The array and its five numbers.
  EXPECT_TRUE(check_json_limits("[1, 2,3,4,-5e+3]", {.max_values = 6}));
  auto r = check_json_limits("[1,2,3,4,5,6]", {.max_values = 6});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("more than 6 values"), std::string::npos);
  // The object, two keys and two values.
  EXPECT_TRUE(check_json_limits(R"({"a":1, "b" : true})", {.max_values = 5}));
  EXPECT_FALSE(check_json_limits(R"({"a":1,"b":null})", {.max_values = 4}));
  // A lone scalar is a value; so is the first element of every array (the
  // fuzzer found a scan that counted separators let [[[0]]] through).
  EXPECT_FALSE(check_json_limits("7", {.max_values = 0}));
  EXPECT_TRUE(check_json_limits("[[[0]]]", {.max_values = 4}));
  EXPECT_FALSE(check_json_limits("[[[0]]]", {.max_values = 3}));
}

TEST(JsonLimits, BracketsAndSeparatorsInStringsDoNotCount) {
  const std::string s = R"({"k":"[[[[,,,:::\"[[[[\\"})";
  EXPECT_TRUE(check_json_limits(s, {.max_depth = 1, .max_values = 3}));
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
  for (int i = 0; i < 1200000; ++i)
    flat += "{},";
  flat += "{}]";
  EXPECT_FALSE(check_json_limits(flat)) << "1.2 million values";
}

}  // namespace
}  // namespace hami
