#include "vgpu/limiter/cost_table.hpp"

namespace hami::vgpu::limiter {
namespace {

size_t round_up_pow2(size_t n) {
  size_t p = 16;
  while (p < n)
    p <<= 1;
  return p;
}

size_t slot_of(uint64_t key, size_t mask) {
  // Keys are already mixed; fold the high half in for tables of any size.
  return static_cast<size_t>(key ^ (key >> 32)) & mask;
}

}  // namespace

CostTable::CostTable(size_t capacity)
    : mask_(round_up_pow2(capacity) - 1), entries_(new CostEntry[mask_ + 1]) {}

CostEntry* CostTable::find(uint64_t key) const noexcept {
  key = normalise(key);
  size_t i = slot_of(key, mask_);
  for (size_t probe = 0; probe < kMaxProbes; ++probe, i = (i + 1) & mask_) {
    const uint64_t k = entries_[i].key.load(std::memory_order_acquire);
    if (k == key) return &entries_[i];
    if (k == 0) return nullptr;
  }
  return nullptr;
}

CostEntry* CostTable::insert(uint64_t key) noexcept {
  key = normalise(key);
  size_t i = slot_of(key, mask_);
  for (size_t probe = 0; probe < kMaxProbes; ++probe, i = (i + 1) & mask_) {
    CostEntry& e = entries_[i];
    uint64_t k = e.key.load(std::memory_order_acquire);
    if (k == 0 && e.key.compare_exchange_strong(k, key, std::memory_order_acq_rel)) {
      size_.fetch_add(1, std::memory_order_relaxed);
      return &e;
    }
    if (k == key) return &e;
  }
  return nullptr;
}

}  // namespace hami::vgpu::limiter
