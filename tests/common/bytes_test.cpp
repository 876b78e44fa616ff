#include "common/bytes.hpp"

#include <gtest/gtest.h>

namespace hami {
namespace {

TEST(FormatBytes, Units) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1024), "1 KiB");
  EXPECT_EQ(format_bytes(512ull << 20), "512 MiB");
  EXPECT_EQ(format_bytes(4ull << 30), "4 GiB");
  EXPECT_EQ(format_bytes(1536ull << 20), "1.50 GiB");
  EXPECT_EQ(format_bytes(1753351168), "1.63 GiB");
  EXPECT_EQ(format_bytes(UINT64_MAX), "16.00 EiB");
}

}  // namespace
}  // namespace hami
