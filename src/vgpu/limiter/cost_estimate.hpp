#pragma once
// RobustEstimate: a launch's GPU time from noisy samples. Samples taken while
// another context held the GPU come out several times too long (the GPU
// time-slices between contexts, and the slice lands inside the measurement);
// a median of the last five throws those away as long as they are fewer than
// half, and a slow average of the medians takes out the jitter: the mean of
// the medians so far, then a moving average over the last `span` of them.
// Not thread-safe: the limiter updates it under its lock.
//
//   RobustEstimate e;
//   e.add(216'000); e.add(2'400'000); e.add(215'000);
//   e.value();   // 216'000: the preempted sample is ignored

#include <array>
#include <cstdint>

namespace hami::vgpu::limiter {

class RobustEstimate {
 public:
  enum class Pick : uint8_t {
    kMedian,  // the middle of the last five
    kLow,     // the second lowest: for samples whose noise only ever adds time
  };
  explicit RobustEstimate(Pick pick = Pick::kMedian, int span = 4)
      : pick_(pick), span_(span > 0 ? span : 1) {}

  void add(int64_t sample_ns) noexcept;
  // 0 until the first sample.
  int64_t value() const noexcept { return value_ >> kFraction; }
  int count() const noexcept { return count_; }
  void reset() noexcept { *this = RobustEstimate(pick_, span_); }

 private:
  static constexpr int kWindow = 5;
  // The average keeps this many bits below the nanosecond: a step of
  // 1/span of a small difference must not round to nothing.
  static constexpr int kFraction = 10;
  std::array<int64_t, kWindow> recent_{};
  int count_ = 0;
  int64_t value_ = 0;  // fixed point
  Pick pick_;
  int span_;
};

}  // namespace hami::vgpu::limiter
