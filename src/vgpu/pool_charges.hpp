#pragma once
// Stream-ordered memory pools (cuMemAllocAsync, cuMemAllocFromPoolAsync)
// reserve device memory in large granules (32 MiB on an H200) and keep it
// after frees until the driver trims them. What the GPU commits is the pool's
// reserved memory, not the sum of its allocations, so each pool this process
// uses is charged its CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, re-read after
// every allocation and free through it, on trims, and before any allocation
// would be refused (a pool may have shrunk at a synchronisation since).
//
//   auto r = pools.reconcile(rt, pool, dev, /*may_refuse=*/true);
//   if (r == PoolCharges::kRefused) { free it; return CUDA_ERROR_OUT_OF_MEMORY; }

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "vgpu/cuda_abi.hpp"

namespace hami::vgpu {

class Runtime;

class PoolCharges {
 public:
  enum Outcome {
    kUnsupported,  // the driver cannot tell us a pool's reserved memory
    kCharged,      // the pool's charge now equals its reserved memory
    kRefused,      // it grew past what the container may have; charge unchanged
  };

  Outcome reconcile(Runtime& rt, cuda::CUmemoryPool pool, int dev, bool may_refuse) noexcept;
  // Re-reads every pool; true if any charge went down.
  bool shrink_all(Runtime& rt) noexcept;
  // The pool is gone: give back all it was charged.
  void forget(Runtime& rt, cuda::CUmemoryPool pool) noexcept;
  void reset() noexcept;

 private:
  struct Pool {
    int device = -1;
    uint64_t charged = 0;
  };
  // Recursive: reconcile() reserves, and a refused reservation shrinks every
  // pool (shrink_all) before giving up. Entries are erased only by forget().
  std::recursive_mutex mu_;
  std::unordered_map<cuda::CUmemoryPool, Pool> pools_;
  // Most processes never use a pool: then shrink_all costs one load.
  std::atomic<bool> any_{false};
};

}  // namespace hami::vgpu
