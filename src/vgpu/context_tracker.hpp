#pragma once
// Charges each CUDA context's own device memory (hundreds of MiB on a large
// GPU) to the device it lives on. A primary context is charged when this
// process first retains it and given back when the last retain is released or
// it is reset; every context made with cuCtxCreate is charged on its own.
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

  void reset() noexcept;

 private:
  // Runs `create` between two samples of this process's memory on `index`.
  uint64_t measured(Runtime& rt, int index, FunctionRef<cuda::CUresult()> create,
                    cuda::CUresult* rc) noexcept;
  // Charges a new context; false if it does not fit under the limit.
  bool charge(Runtime& rt, int index, uint64_t bytes) noexcept;

  static constexpr int kMaxOrdinals = 64;
  struct Primary {
    int refs = 0;
    Allocation charged;
  };
  std::mutex mu_;
  std::array<Primary, kMaxOrdinals> primary_{};
  AllocationTable created_;
};

}  // namespace hami::vgpu
