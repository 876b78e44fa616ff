#pragma once
// Charges the device memory a module's globals take (`__device__` arrays),
// which the driver commits when the module is loaded into a context:
// cuModuleLoad* at once, a library (cuLibraryLoad*) at once under
// CUDA_MODULE_LOADING=EAGER and otherwise when it is first used in a context
// (cuKernelGetFunction, cuLibraryGetModule): a 1 GiB global took 1,024 MiB on
// an H100 (tests/gpu/results/driver-facts-h100.txt).
//
// What a load commits is measured as contexts are (memory_probe.hpp): this
// process's memory by NVML just before and after. A load that does not fit is
// undone and answered CUDA_ERROR_OUT_OF_MEMORY; a first use that does not fit
// cannot be undone (the library stays loaded), so it is charged anyway and
// answered CUDA_ERROR_OUT_OF_MEMORY, and the container's next allocations are
// refused until the library is unloaded. Each library is measured once per
// device. A kernel that the CUDA runtime launches without either call loads
// inside cuLaunchKernel, where only Runtime::settle sees it, from NVML.
//
//   return rt.modules().load(rt, [&] { return real_load(&m); },
//                            [&] { return key(m); }, [&] { real_unload(m); });

#include <cstdint>
#include <mutex>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/function_ref.hpp"
#include "vgpu/allocation_table.hpp"
#include "vgpu/cuda_abi.hpp"

namespace hami::vgpu {

class Runtime;

class ModuleCharges {
 public:
  // `load` loads into the current context; `key` names what it made (the
  // module or library handle) once it succeeded; `unload` undoes it.
  cuda::CUresult load(Runtime& rt, FunctionRef<cuda::CUresult()> load, FunctionRef<uint64_t()> key,
                      FunctionRef<void()> unload) noexcept;
  // A first use of library `library` (0: unknown) in the current context.
  cuda::CUresult first_use(Runtime& rt, uint64_t library,
                           FunctionRef<cuda::CUresult()> use) noexcept;
  // cuLibraryGetKernel: which library a kernel belongs to.
  void kernel_found(uint64_t kernel, uint64_t library) noexcept;
  uint64_t library_of(uint64_t kernel) noexcept;
  // cuModuleUnload / cuLibraryUnload succeeded: its charges go back.
  void unloaded(Runtime& rt, uint64_t key) noexcept;
  void reset() noexcept;

 private:
  void record(uint64_t key, const Allocation& a) noexcept;

  // Bounds on what is remembered, so a program creating kernels without end
  // cannot grow this without end; past them, uses are measured every time.
  static constexpr size_t kMaxRemembered = 1 << 20;
  std::mutex mu_;
  std::unordered_map<uint64_t, std::vector<Allocation>> charges_;
  std::unordered_map<uint64_t, uint64_t> kernels_;
  std::set<std::pair<uint64_t, int>> loaded_;  // (library, device) measured already
};

}  // namespace hami::vgpu
