#include "vgpu/real_driver.hpp"

#include <dlfcn.h>

#include <atomic>
#include <mutex>

#include "common/log.hpp"

namespace hami::vgpu {
namespace {

std::atomic<void*> g_cuda_handle{nullptr};
std::atomic<void*> g_nvml_handle{nullptr};

std::mutex g_load_mu;
bool g_nvml_usable = false;

template <class Fn>
void resolve(void* handle, Fn& slot, const char* name) {
  slot = reinterpret_cast<Fn>(real_dlsym()(handle, name));
}

void load_cuda() {
  void* h = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    log::error(
        "cannot load libcuda.so.1 (%s): CUDA calls through libvgpu.so will fail; check "
        "that the NVIDIA driver is mounted into the container",
        ::dlerror());
    return;
  }
  g_cuda_handle.store(h);
#define CU_HOOK(name, params) resolve(h, detail::g_cuda.name, #name);
#define CU_REAL(name, params) resolve(h, detail::g_cuda.name, #name);
#include "vgpu/hooks.def"
}

void load_nvml() {
  void* h = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    log::warn(
        "cannot load libnvidia-ml.so.1 (%s): device enumeration falls back to CUDA order "
        "and contexts are not charged",
        ::dlerror());
    return;
  }
  g_nvml_handle.store(h);
#define NVML_HOOK(name, params) resolve(h, detail::g_nvml.name, #name);
#define NVML_REAL(name, params) resolve(h, detail::g_nvml.name, #name);
#include "vgpu/hooks.def"
  g_nvml_usable = detail::g_nvml.nvmlInit_v2 != nullptr;
}

// Compares against a library that is already loaded, without loading it.
bool same_library(void* handle, const char* soname, std::atomic<void*>& cache) {
  if (handle == nullptr) return false;
  void* known = cache.load(std::memory_order_acquire);
  if (known == nullptr) {
    void* h = ::dlopen(soname, RTLD_LAZY | RTLD_NOLOAD);
    if (h == nullptr) return false;
    ::dlclose(h);  // NOLOAD took a reference; the library stays loaded by its owner
    cache.store(h, std::memory_order_release);
    known = h;
  }
  return handle == known;
}

}  // namespace

namespace detail {
std::atomic<bool> g_cuda_loaded{false};
std::atomic<bool> g_nvml_loaded{false};
RealCuda g_cuda;
RealNvml g_nvml;

const RealCuda& load_real_cuda() {
  std::lock_guard lock(g_load_mu);
  if (!g_cuda_loaded.load(std::memory_order_relaxed)) {
    load_cuda();
    g_cuda_loaded.store(true, std::memory_order_release);
  }
  return g_cuda;
}

const RealNvml& load_real_nvml() {
  std::lock_guard lock(g_load_mu);
  if (!g_nvml_loaded.load(std::memory_order_relaxed)) {
    load_nvml();
    g_nvml_loaded.store(true, std::memory_order_release);
  }
  return g_nvml;
}
}  // namespace detail

bool nvml_available() {
  real_nvml();
  return g_nvml_usable;
}

bool is_cuda_handle(void* handle) {
  return same_library(handle, "libcuda.so.1", g_cuda_handle);
}
bool is_nvml_handle(void* handle) {
  return same_library(handle, "libnvidia-ml.so.1", g_nvml_handle);
}

}  // namespace hami::vgpu
