#include "common/text.hpp"

#include <gtest/gtest.h>

namespace hami {
namespace {

TEST(Trim, TakesBlanksOffBothEndsOnly) {
  EXPECT_EQ(trim("  key = v \r\n"), "key = v");
  EXPECT_EQ(trim("\t\v\fx\f"), "x");
  EXPECT_EQ(trim("a b"), "a b");
  EXPECT_EQ(trim(""), "");
  EXPECT_EQ(trim(" \t\r\n "), "");
}

}  // namespace
}  // namespace hami
