#pragma once
// What this process has charged, keyed by the driver's handle (device pointer,
// VMM handle, array, context), so a free gives back exactly what was charged
// and a free of something we never saw goes to the driver untouched. Sharded
// by key so threads allocating at once rarely meet on one mutex.
//
//   table.insert(ptr, {dev, UsageKind::kData, bytes});
//   if (auto a = table.erase(ptr)) runtime.release(*a);

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "region/region.hpp"
#include "vgpu/cuda_abi.hpp"

namespace hami::vgpu {

struct Allocation {
  int device = -1;  // index in the state file; -1: not accounted
  region::UsageKind kind = region::UsageKind::kData;
  uint64_t bytes = 0;
  // A stream-ordered allocation's pool, which is charged instead (bytes = 0).
  // Or spilled_marker(): placed in host memory under CUDA_OVERSUBSCRIBE (spill.hpp),
  // charged at `bytes` and counted as spilled until freed. A marker rather
  // than a field of its own keeps every table entry, copied on each
  // allocation and free, at 24 bytes.
  cuda::CUmemoryPool pool = nullptr;

  static cuda::CUmemoryPool spilled_marker() noexcept {
    return reinterpret_cast<cuda::CUmemoryPool>(uintptr_t{1});
  }
  bool spilled() const noexcept { return pool == spilled_marker(); }
};

class AllocationTable {
 public:
  // Returns false if the table could not grow (out of host memory): the caller
  // then keeps the allocation uncharged rather than failing the program.
  bool insert(uint64_t key, const Allocation& a) noexcept;
  std::optional<Allocation> erase(uint64_t key) noexcept;
  std::optional<Allocation> find(uint64_t key) const noexcept;
  void clear() noexcept;
  // Removes every entry on `device`; returns them.
  std::vector<Allocation> erase_device(int device) noexcept;
  size_t size() const noexcept;

 private:
  static constexpr size_t kShards = 16;
  struct Shard {
    mutable std::mutex mu;
    std::unordered_map<uint64_t, Allocation> map;
  };
  Shard& shard(uint64_t key) noexcept { return shards_[(key >> 12 ^ key >> 21) % kShards]; }
  const Shard& shard(uint64_t key) const noexcept {
    return shards_[(key >> 12 ^ key >> 21) % kShards];
  }
  std::array<Shard, kShards> shards_;
};

}  // namespace hami::vgpu
