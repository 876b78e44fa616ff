// Our dlsym. Programs that dlopen the driver (the CUDA runtime, PyTorch, NCCL,
// nvidia-smi, ctypes) look functions up by name; for a handle of libcuda.so.1
// or libnvidia-ml.so.1 and a name we intercept, they get our hook. Every other
// lookup, RTLD_NEXT and RTLD_DEFAULT included, is glibc's own.
//
// glibc resolves RTLD_NEXT relative to the object that called dlsym, found
// from the return address. So the fall-through must be a tail call (a jump,
// not a call) to glibc's dlsym: then glibc sees our caller's return address,
// not ours. This file is compiled so that it always is (see CMakeLists.txt),
// and tests/vgpu check RTLD_NEXT from a library of their own.
//
// Sanitizer runtimes call dlsym(RTLD_NEXT, ...) from their own initialisers,
// before their shadow memory exists; nothing on this path may be
// instrumented, which is another reason it all lives in this one file.
#include <dlfcn.h>

#include <atomic>
#include <cstring>

#include "vgpu/hook_decls.hpp"
#include "vgpu/hook_table.hpp"
#include "vgpu/real_driver.hpp"

namespace hami::vgpu {
namespace {
std::atomic<DlsymFn> g_real_dlsym{nullptr};
}

DlsymFn real_dlsym() noexcept {
  DlsymFn fn = g_real_dlsym.load(std::memory_order_acquire);
  if (fn != nullptr) return fn;
  // glibc >= 2.34 has dlsym in libc at GLIBC_2.34; older ones at GLIBC_2.2.5.
  fn = reinterpret_cast<DlsymFn>(::dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"));
  if (fn == nullptr) fn = reinterpret_cast<DlsymFn>(::dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"));
  g_real_dlsym.store(fn, std::memory_order_release);
  return fn;
}

}  // namespace hami::vgpu

namespace {

// Our hook for this lookup, or nullptr to let glibc answer.
void* intercept(void* handle, const char* symbol) noexcept {
  if (symbol == nullptr || handle == RTLD_DEFAULT || handle == RTLD_NEXT) return nullptr;
  if (symbol[0] == 'c' && symbol[1] == 'u') {
    return hami::vgpu::is_cuda_handle(handle) ? hami::vgpu::hook_for_cuda_symbol(symbol) : nullptr;
  }
  if (std::strncmp(symbol, "nvml", 4) == 0) {
    return hami::vgpu::is_nvml_handle(handle) ? hami::vgpu::hook_for_nvml_symbol(symbol) : nullptr;
  }
  return nullptr;
}

}  // namespace

extern "C" HAMI_EXPORT void* dlsym(void* handle, const char* symbol) noexcept {
  if (void* hook = intercept(handle, symbol)) return hook;
  return hami::vgpu::real_dlsym()(handle, symbol);
}
