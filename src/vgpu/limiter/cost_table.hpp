#pragma once
// CostTable: what one launch of each kernel shape (function, grid, block,
// shared memory) or CUDA graph costs on the GPU, looked up on every throttled
// launch without a lock. Entries are added under the limiter's lock and never
// move; a full table leaves new shapes at the limiter's default cost.
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
  // What a launch is charged, ns of whole-GPU time; 0 while unknown.
  std::atomic<int64_t> cost_ns{0};
  // Samples of one launch alone (kernel time) and of back-to-back runs of the
  // same launch (period per launch). Written under the limiter's lock.
  RobustEstimate single;
  RobustEstimate stream;
  std::atomic<int> single_count{0};  // mirrors single.count() for lock-free readers
};

class CostTable {
 public:
  // `capacity` is rounded up to a power of two.
  explicit CostTable(size_t capacity);

  CostEntry* find(uint64_t key) const noexcept;
  // The entry for `key`, added if missing; nullptr when the table is full.
  // Callers serialise insert (the limiter's lock); find may run concurrently.
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
