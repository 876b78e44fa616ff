#include "vgpu/limiter/cost_estimate.hpp"

namespace hami::vgpu::limiter {

void RobustEstimate::add(int64_t sample_ns) noexcept {
  if (sample_ns <= 0) return;
  recent_[count_ % kWindow] = sample_ns;
  ++count_;
  const int n = count_ < kWindow ? count_ : kWindow;
  // Insertion sort of at most five values (std::sort trips GCC 12's bounds
  // analysis here, and is no faster at this size).
  std::array<int64_t, kWindow> sorted{};
  for (int i = 0; i < n; ++i) {
    int j = i;
    for (; j > 0 && sorted[j - 1] > recent_[i]; --j)
      sorted[j] = sorted[j - 1];
    sorted[j] = recent_[i];
  }
  // The lower middle of an even count: an early stretched sample must not win.
  const int64_t median = sorted[pick_ == Pick::kLow ? (n - 1) / 4 : (n - 1) / 2];
  // Until the window is full the median alone is the best guess; after that,
  // the mean of the medians, until it spans `span` of them.
  const int64_t m = median << kFraction;
  const int64_t steps = count_ - kWindow + 1;
  value_ = count_ <= kWindow ? m : value_ + (m - value_) / (steps < span_ ? steps : span_);
}

}  // namespace hami::vgpu::limiter
