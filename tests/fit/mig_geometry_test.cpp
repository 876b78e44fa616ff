// Dynamic MIG's choice of profile and placement (src/fit/mig_geometry): the
// smallest allowed profile that holds the request, fewest slices among equals,
// at its first free placement; infeasible when no allowed profile has one;
// and the device config's allowlist matched to NVML's GPU names. Geometry: an
// H100 80GB's (NVIDIA's MIG user guide; tests/support/simgpu/sim_mig.cpp).
#include "fit/mig_geometry.hpp"

#include <gtest/gtest.h>

namespace hami::fit {
namespace {

using protocol::MigPlacement;

std::vector<MigPlacement> every(unsigned size, std::vector<unsigned> starts) {
  std::vector<MigPlacement> out;
  for (unsigned s : starts)
    out.push_back({s, size});
  return out;
}

std::vector<MigProfileSpec> h100() {
  return {{"1g.10gb", 9984, 1, every(1, {0, 1, 2, 3, 4, 5, 6})},
          {"1g.20gb", 19968, 1, every(2, {0, 2, 4, 6})},
          {"2g.20gb", 20096, 2, every(2, {0, 2, 4})},
          {"3g.40gb", 40192, 3, every(4, {0, 4})},
          {"4g.40gb", 40192, 4, every(4, {0})},
          {"7g.80gb", 80896, 7, every(8, {0})}};
}

TEST(MigGeometry, SmallestProfileThatHoldsTheRequest) {
  auto p = choose_mig(h100(), {}, 8000);
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, (MigChoice{"1g.10gb", {0, 1}, 9984}));
  // 19968 MiB: the 1g.20gb (one slice) before the 2g.20gb (two, more memory).
  EXPECT_EQ(choose_mig(h100(), {}, 15000)->profile, "1g.20gb");
  EXPECT_EQ(choose_mig(h100(), {}, 20000)->profile, "2g.20gb");
  // 3g.40gb and 4g.40gb hold the same: fewer slices wins.
  EXPECT_EQ(choose_mig(h100(), {}, 30000)->profile, "3g.40gb");
  EXPECT_EQ(choose_mig(h100(), {}, 80000)->profile, "7g.80gb");
  // No size asked: the smallest.
  EXPECT_EQ(choose_mig(h100(), {}, 0)->profile, "1g.10gb");
  // More than the largest: nothing.
  EXPECT_FALSE(choose_mig(h100(), {}, 90000));
}

TEST(MigGeometry, FirstFreePlacementGivenWhatIsTaken) {
  // A 3g at 0..3 exists: a 1g goes to slice 4, a 3g to 4..7.
  const std::vector<MigPlacement> taken = {{0, 4}};
  EXPECT_EQ(choose_mig(h100(), taken, 8000)->placement, (MigPlacement{4, 1}));
  EXPECT_EQ(choose_mig(h100(), taken, 30000)->placement, (MigPlacement{4, 4}));
  // The 7g needs slices 0..7: infeasible.
  EXPECT_FALSE(choose_mig(h100(), taken, 80000));
  // Every memory slice taken: nothing fits at all.
  EXPECT_FALSE(choose_mig(h100(), {{0, 4}, {4, 4}}, 0));
  // When the smallest profile has no free placement, a larger one is taken.
  std::vector<MigProfileSpec> two = {{"1g.10gb", 9984, 1, every(1, {6})},
                                     {"2g.20gb", 20096, 2, every(2, {0, 2, 4})}};
  auto p = choose_mig(two, {{6, 1}, {0, 2}}, 5000);
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, (MigChoice{"2g.20gb", {2, 2}, 20096}));
}

TEST(MigGeometry, AllowlistByModel) {
  const std::vector<MigAllowEntry> allow = {
      {{"A100-SXM4-40GB", "A100-PCIE-40GB"}, {"1g.5gb", "3g.20gb"}},
      {{"H100-PCIE-80GB", "H100-SXM5-80GB"}, {"1g.10gb", "3g.40gb", "7g.80gb"}},
      {{"H200 NVL", "H200-SXM5"}, {"1g.18gb", "7g.141gb"}}};
  EXPECT_TRUE(mig_model_matches("NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"));
  EXPECT_TRUE(mig_model_matches("NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB"));
  EXPECT_TRUE(mig_model_matches("NVIDIA H200", "H200-SXM5"));
  EXPECT_FALSE(mig_model_matches("NVIDIA H100 80GB HBM3", "A100-SXM4-40GB"));
  EXPECT_FALSE(mig_model_matches("NVIDIA H100 NVL", "H100-PCIE-94GB"));
  EXPECT_FALSE(mig_model_matches("NVIDIA H100 80GB HBM3", "SXM5"));

  auto allowed = allowed_mig_profiles("NVIDIA H100 80GB HBM3", allow, h100());
  ASSERT_EQ(allowed.size(), 3u);
  EXPECT_EQ(allowed[0].name, "1g.10gb");
  EXPECT_EQ(allowed[1].name, "3g.40gb");
  EXPECT_EQ(allowed[2].name, "7g.80gb");
  // 15 GB on the allowed H100 profiles: the 3g, not the disallowed 1g.20gb.
  EXPECT_EQ(choose_mig(allowed, {}, 15000)->profile, "3g.40gb");
  // A model the allowlist does not name keeps every profile.
  EXPECT_EQ(allowed_mig_profiles("NVIDIA B200", allow, h100()).size(), h100().size());
}

}  // namespace
}  // namespace hami::fit
