#pragma once
// The driver's and NVML's own functions, found with glibc's dlsym on handles
// of libcuda.so.1 and libnvidia-ml.so.1 (a handle lookup searches only that
// library and its dependencies, never our preloaded exports). Members are named
// after hooks.def; a function the installed driver lacks stays null.
//
//   auto& cu = hami::vgpu::real_cuda();          // loads libcuda.so.1 once
//   if (cu.cuMemAlloc_v2) rc = cu.cuMemAlloc_v2(&p, n);

#include <atomic>

#include "nvml/nvml_abi.hpp"
#include "vgpu/cuda_abi.hpp"

namespace hami::vgpu {

using namespace hami::cuda;  // NOLINT: the .def lists use the driver's type names

struct RealCuda {
#define CU_HOOK(name, params) CUresult(*name) params = nullptr;
#define CU_REAL(name, params) CUresult(*name) params = nullptr;
#include "vgpu/hooks.def"
};

struct RealNvml {
#define NVML_HOOK(name, params) nvmlReturn_t(*name) params = nullptr;
#define NVML_REAL(name, params) nvmlReturn_t(*name) params = nullptr;
#include "vgpu/hooks.def"
};

// Calls a real driver function, or reports that the installed driver lacks it.
template <class Fn, class... Args>
cuda::CUresult call_real(Fn fn, Args... args) {
  return fn != nullptr ? fn(args...) : cuda::CUDA_ERROR_NOT_SUPPORTED;
}

// glibc's own dlsym (our exported dlsym sits in front of it).
using DlsymFn = void* (*)(void*, const char*) noexcept;
DlsymFn real_dlsym() noexcept;

// Loaded on first use; thread-safe. A library that cannot be opened leaves every
// member null (and is logged once). Every hook calls these, so the loaded case
// is one inline acquire load (std::call_once costs ~60 instructions here).
namespace detail {
extern std::atomic<bool> g_cuda_loaded;
extern std::atomic<bool> g_nvml_loaded;
extern RealCuda g_cuda;
extern RealNvml g_nvml;
const RealCuda& load_real_cuda();
const RealNvml& load_real_nvml();
}  // namespace detail

inline const RealCuda& real_cuda() {
  return detail::g_cuda_loaded.load(std::memory_order_acquire) ? detail::g_cuda
                                                               : detail::load_real_cuda();
}
inline const RealNvml& real_nvml() {
  return detail::g_nvml_loaded.load(std::memory_order_acquire) ? detail::g_nvml
                                                               : detail::load_real_nvml();
}
bool nvml_available();

// Whether `handle` (from dlopen) refers to libcuda.so.1 / libnvidia-ml.so.1,
// however the caller named it. Only consults libraries already loaded.
bool is_cuda_handle(void* handle);
bool is_nvml_handle(void* handle);

}  // namespace hami::vgpu
