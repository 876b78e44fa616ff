#include "vgpu/limiter/core_policy.hpp"

#include <gtest/gtest.h>

namespace hami::vgpu::limiter {
namespace {

TEST(CorePolicy, ParsesCaseInsensitively) {
  EXPECT_EQ(parse_core_policy("force"), CorePolicy::kForce);
  EXPECT_EQ(parse_core_policy("FORCE"), CorePolicy::kForce);
  EXPECT_EQ(parse_core_policy("Force"), CorePolicy::kForce);
  EXPECT_EQ(parse_core_policy("default"), CorePolicy::kDefault);
  EXPECT_EQ(parse_core_policy("DeFaUlT"), CorePolicy::kDefault);
  EXPECT_EQ(parse_core_policy("disable"), CorePolicy::kDisable);
  EXPECT_EQ(parse_core_policy("DISABLE"), CorePolicy::kDisable);
}

TEST(CorePolicy, RejectsAnythingElse) {
  for (const char* bad :
       {"", " force", "force ", "forced", "disabled", "off", "on", "1", "0", "enable", "defaul"}) {
    EXPECT_EQ(parse_core_policy(bad), std::nullopt) << '"' << bad << '"';
  }
  EXPECT_EQ(parse_core_policy(std::string_view("force\0", 6)), std::nullopt);
}

TEST(CorePolicy, NamesRoundTrip) {
  for (CorePolicy p : {CorePolicy::kDefault, CorePolicy::kForce, CorePolicy::kDisable})
    EXPECT_EQ(parse_core_policy(to_string(p)), p);
  EXPECT_STREQ(to_string(CorePolicy::kForce), "force");
  EXPECT_STREQ(to_string(CorePolicy::kDefault), "default");
  EXPECT_STREQ(to_string(CorePolicy::kDisable), "disable");
}

TEST(CorePolicy, EnforcesTruthTable) {
  // utilization_switch: 0 = the node agent says no contention.
  for (int32_t sw : {0, 1, -1, 2}) {
    EXPECT_TRUE(enforces(CorePolicy::kForce, sw)) << sw;
    EXPECT_EQ(enforces(CorePolicy::kDefault, sw), sw != 0) << sw;
    EXPECT_FALSE(enforces(CorePolicy::kDisable, sw)) << sw;
  }
}

}  // namespace
}  // namespace hami::vgpu::limiter
