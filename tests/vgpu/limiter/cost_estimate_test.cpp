#include "vgpu/limiter/cost_estimate.hpp"

#include <gtest/gtest.h>

namespace hami::vgpu::limiter {
namespace {

TEST(RobustEstimate, ZeroUntilTheFirstSample) {
  RobustEstimate e;
  EXPECT_EQ(e.value(), 0);
  EXPECT_EQ(e.count(), 0);
  e.add(0);  // not a sample
  e.add(-5);
  EXPECT_EQ(e.value(), 0);
  EXPECT_EQ(e.count(), 0);
  e.add(1234);
  EXPECT_EQ(e.value(), 1234);
  EXPECT_EQ(e.count(), 1);
}

TEST(RobustEstimate, TheMedianOfTheFirstSamples) {
  RobustEstimate e;
  e.add(216'000);
  e.add(2'400'000);               // stretched by another context's slice
  EXPECT_EQ(e.value(), 216'000);  // two samples: the lower one, never the stretched one
  e.add(215'000);
  EXPECT_EQ(e.value(), 216'000);
  e.add(217'000);
  e.add(2'100'000);
  EXPECT_EQ(e.value(), 217'000);  // 215, 216, 217, 2100, 2400
}

TEST(RobustEstimate, RejectsAMinorityOfTenfoldOutliers) {
  RobustEstimate e;
  // Two in every five samples ten times too long, in every window of five.
  for (int i = 0; i < 200; ++i) {
    const bool outlier = i % 5 == 1 || i % 5 == 3;
    e.add(outlier ? 2'160'000 : 216'000);
    if (i >= 4) {  // before, two of four are out: the upper median is an outlier
      ASSERT_EQ(e.value(), 216'000) << i;
    }
  }
  EXPECT_EQ(e.count(), 200);
}

TEST(RobustEstimate, ConvergesToAChangedValue) {
  RobustEstimate e;
  for (int i = 0; i < 50; ++i)
    e.add(100'000);
  EXPECT_EQ(e.value(), 100'000);
  e.add(200'000);
  e.add(200'000);
  EXPECT_EQ(e.value(), 100'000);  // still the minority
  for (int i = 0; i < 40; ++i)
    e.add(200'000);
  EXPECT_NEAR(e.value(), 200'000, 4);  // quarter steps, integer division
  // And jitter around it is averaged out.
  for (int i = 0; i < 100; ++i)
    e.add(i % 2 == 0 ? 190'000 : 210'000);
  EXPECT_NEAR(e.value(), 200'000, 10'000);
}

TEST(RobustEstimate, ALongSpanMovesSlowlyAndSettlesExactly) {
  RobustEstimate e(RobustEstimate::Pick::kLow, 256);
  for (int i = 0; i < 300; ++i)
    e.add(3'300);
  EXPECT_EQ(e.value(), 3'300);
  // A slow second of the host: 100 samples move it about a third of the way.
  for (int i = 0; i < 100; ++i)
    e.add(4'455);
  EXPECT_GT(e.value(), 3'550);
  EXPECT_LT(e.value(), 3'800);
  // Steps of 1/256 of a 10 ns difference are kept below the nanosecond, so
  // the estimate still gets there.
  for (int i = 0; i < 3'000; ++i)
    e.add(3'310);
  EXPECT_NEAR(e.value(), 3'310, 1);
  // reset() keeps the span.
  e.reset();
  for (int i = 0; i < 300; ++i)
    e.add(1'000);
  for (int i = 0; i < 10; ++i)
    e.add(2'000);
  EXPECT_LT(e.value(), 1'100);
}

TEST(RobustEstimate, Reset) {
  RobustEstimate e;
  e.add(5);
  e.reset();
  EXPECT_EQ(e.value(), 0);
  EXPECT_EQ(e.count(), 0);
  e.add(7);
  EXPECT_EQ(e.value(), 7);
}

}  // namespace
}  // namespace hami::vgpu::limiter
