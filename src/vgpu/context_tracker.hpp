#pragma once
// Charges each CUDA context's own device memory (hundreds of MiB on a large
// GPU) to the device it lives on. A primary context is charged when this
// process first retains it and given back when the last retain is released or
// it is reset; every context made with cuCtxCreate is charged on its own.
//
// A context's limits commit memory too (driver-facts-h100.txt): the stack
// (CU_LIMIT_STACK_SIZE) at once, per resident thread of the GPU (32 KiB took
// 8,184 MiB on an H100), the malloc heap (CU_LIMIT_MALLOC_HEAP_SIZE) at the
// next launch. Both are reserved when set, above what the context started
// with (measured with it), and refused with CUDA_ERROR_OUT_OF_MEMORY past the
// limit; the heap is never given back before the context goes, as the driver
// keeps it.
//
// The size is measured, not guessed (memory_probe.hpp): NVML's view of this
// process's memory on that GPU just before and just after the driver creates
// the context. On an H200 with driver 580 that is 518 MiB.
//
//   CUresult rc = contexts.retain_primary(rt, pctx, dev, real.cuDevicePrimaryCtxRetain);

#include <array>
#include <mutex>
#include <unordered_map>

#include "common/function_ref.hpp"
#include "vgpu/allocation_table.hpp"
#include "vgpu/cuda_abi.hpp"

namespace hami::vgpu {

class Runtime;

class ContextTracker {
 public:
  using RetainFn = cuda::CUresult (*)(cuda::CUcontext*, cuda::CUdevice);
  using DeviceFn = cuda::CUresult (*)(cuda::CUdevice);
  using DestroyFn = cuda::CUresult (*)(cuda::CUcontext);

  cuda::CUresult retain_primary(Runtime& rt, cuda::CUcontext* pctx, cuda::CUdevice dev,
                                RetainFn real_retain, DeviceFn real_release) noexcept;
  cuda::CUresult release_primary(Runtime& rt, cuda::CUdevice dev, DeviceFn real_release) noexcept;
  cuda::CUresult reset_primary(Runtime& rt, cuda::CUdevice dev, DeviceFn real_reset) noexcept;

  // `create` runs the real cuCtxCreate variant and returns its result.
  cuda::CUresult create(Runtime& rt, cuda::CUcontext* pctx, cuda::CUdevice dev,
                        FunctionRef<cuda::CUresult()> create, DestroyFn real_destroy) noexcept;
  cuda::CUresult destroy(Runtime& rt, cuda::CUcontext ctx, DestroyFn real_destroy) noexcept;

  using SetLimitFn = cuda::CUresult (*)(cuda::CUlimit, size_t);
  // cuCtxSetLimit on the current context.
  cuda::CUresult set_limit(Runtime& rt, cuda::CUlimit limit, size_t value,
                           SetLimitFn real_set) noexcept;

  void reset() noexcept;

 private:
  // Runs `create` between two samples of this process's memory on `index`.
  uint64_t measured(Runtime& rt, int index, FunctionRef<cuda::CUresult()> create,
                    cuda::CUresult* rc) noexcept;
  // Charges a new context; false if it does not fit under the limit.
  bool charge(Runtime& rt, int index, uint64_t bytes) noexcept;

  // What a context's limits are charged beyond its start (under mu_).
  struct LimitCharges {
    int device = -1;
    size_t stack_start = 0;  // the limits when first seen: part of the context
    size_t heap_start = 0;
    uint64_t stack = 0;
    uint64_t heap = 0;
  };
  void release_limits(Runtime& rt, cuda::CUcontext ctx) noexcept;

  static constexpr int kMaxOrdinals = 64;
  struct Primary {
    int refs = 0;
    Allocation charged;
    cuda::CUcontext ctx = nullptr;
  };
  std::mutex mu_;
  std::array<Primary, kMaxOrdinals> primary_{};
  AllocationTable created_;
  std::unordered_map<cuda::CUcontext, LimitCharges> limits_;
};

}  // namespace hami::vgpu
