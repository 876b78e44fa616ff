#pragma once
// CostTable: what one launch of each kernel shape (function, grid, block,
// shared memory) or CUDA graph costs on the GPU, looked up on every charged
// launch without a lock. Entries are claimed lock-free and never move; a full
// table leaves new shapes at the limiter's default cost.
//
//   CostTable t(8192);
//   if (CostEntry* e = t.find(key)) cost = e->cost_ns.load(std::memory_order_relaxed);

#include <atomic>
#include <cstdint>
#include <memory>

#include "vgpu/limiter/cost_estimate.hpp"

namespace hami::vgpu::limiter {

struct CostEntry {
  std::atomic<uint64_t> key{0};  // 0: free
  // What a launch is charged, ns of GPU time as it runs now; 0 while unknown.
  std::atomic<int64_t> cost_ns{0};
  // Samples of one launch, written under the limiter's lock: taken on a busy
  // stream (the marks bracket the kernel), and on an idle one (the launch
  // reached the GPU some time after the start mark; see LaunchLimiter).
  // Medians: one number per shape must stand for kernels whose time varies
  // (one shape can even cover GEMMs of different depths); over PyTorch
  // training steps on an H200 the median charged 1.002 of the kernels' CUPTI
  // time, the 20th percentile 0.92-0.95.
  RobustEstimate busy;
  RobustEstimate idle;
  std::atomic<int> single_count{0};  // samples of either kind, for lock-free readers
  // Launches admitted before the shape had a cost of its own, and what they
  // were charged; settled when the first cost is known.
  std::atomic<int64_t> provisional{0};
  std::atomic<int64_t> provisional_ns{0};
  std::atomic<int64_t> provisional_from_ns{0};  // when the first of them was admitted
  // Bumped by forget(): samples opened before measure another launch.
  std::atomic<uint32_t> epoch{0};
};

class CostTable {
 public:
  // `capacity` is rounded up to a power of two.
  explicit CostTable(size_t capacity);

  CostEntry* find(uint64_t key) const noexcept;
  // The entry for `key`, added if missing; nullptr when the table is full.
  // Lock-free: a free entry is claimed with one compare-and-swap of its key.
  CostEntry* insert(uint64_t key) noexcept;
  size_t size() const noexcept { return size_.load(std::memory_order_relaxed); }

  // Keys are hashes; 0 marks a free entry, so it is mapped to another value.
  static uint64_t normalise(uint64_t key) noexcept {
    return key == 0 ? 0x9e3779b97f4a7c15ull : key;
  }

 private:
  static constexpr size_t kMaxProbes = 32;
  size_t mask_;
  std::atomic<size_t> size_{0};
  std::unique_ptr<CostEntry[]> entries_;
};

}  // namespace hami::vgpu::limiter
