#include "vgpu/allocation_table.hpp"

#include <new>

namespace hami::vgpu {

bool AllocationTable::insert(uint64_t key, const Allocation& a) noexcept {
  Shard& s = shard(key);
  std::lock_guard lock(s.mu);
  try {
    s.map[key] = a;
    return true;
  } catch (const std::bad_alloc&) {
    return false;
  }
}

std::optional<Allocation> AllocationTable::erase(uint64_t key) noexcept {
  Shard& s = shard(key);
  std::lock_guard lock(s.mu);
  auto it = s.map.find(key);
  if (it == s.map.end()) return std::nullopt;
  Allocation a = it->second;
  s.map.erase(it);
  return a;
}

std::optional<Allocation> AllocationTable::find(uint64_t key) const noexcept {
  const Shard& s = shard(key);
  std::lock_guard lock(s.mu);
  auto it = s.map.find(key);
  if (it == s.map.end()) return std::nullopt;
  return it->second;
}

void AllocationTable::clear() noexcept {
  for (Shard& s : shards_) {
    std::lock_guard lock(s.mu);
    s.map.clear();
  }
}

std::vector<Allocation> AllocationTable::erase_device(int device) noexcept {
  std::vector<Allocation> out;
  for (Shard& s : shards_) {
    std::lock_guard lock(s.mu);
    for (auto it = s.map.begin(); it != s.map.end();) {
      if (it->second.device == device) {
        try {
          out.push_back(it->second);
        } catch (...) {
        }
        it = s.map.erase(it);
      } else {
        ++it;
      }
    }
  }
  return out;
}

size_t AllocationTable::size() const noexcept {
  size_t n = 0;
  for (const Shard& s : shards_) {
    std::lock_guard lock(s.mu);
    n += s.map.size();
  }
  return n;
}

}  // namespace hami::vgpu
