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

TEST(Utf8SequenceLength, AcceptsWellFormedSequencesOnly) {
  EXPECT_EQ(utf8_sequence_length("a", 0), 1u);
  EXPECT_EQ(utf8_sequence_length("\xc3\xa9", 0), 2u);          // é
  EXPECT_EQ(utf8_sequence_length("\xe2\x82\xac", 0), 3u);      // €
  EXPECT_EQ(utf8_sequence_length("\xf0\x9f\x98\x80", 0), 4u);  // an emoji
  EXPECT_EQ(utf8_sequence_length("x\xc3\xa9", 1), 2u);
  for (std::string_view bad : {
           std::string_view("\x80"),              // a stray continuation byte
           std::string_view("\xff"),              // never in UTF-8
           std::string_view("\xc3"),              // truncated
           std::string_view("\xc3("),             // not a continuation
           std::string_view("\xc0\xaf"),          // overlong '/'
           std::string_view("\xe0\x80\xaf"),      // overlong '/'
           std::string_view("\xed\xa0\x80"),      // a surrogate
           std::string_view("\xf4\x90\x80\x80"),  // past U+10FFFF
           std::string_view("\xe2\x82"),          // truncated at the end
       }) {
    EXPECT_EQ(utf8_sequence_length(bad, 0), 0u) << testing::PrintToString(bad);
  }
}

}  // namespace
}  // namespace hami
