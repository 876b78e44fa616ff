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
#include <dlfcn.h>

#include <cstring>

#include "vgpu/hook_decls.hpp"
#include "vgpu/hook_table.hpp"
#include "vgpu/real_driver.hpp"

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
