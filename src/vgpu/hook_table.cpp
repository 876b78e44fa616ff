#include "vgpu/hook_table.hpp"

#include <dlfcn.h>

#include <cstring>

#include "vgpu/hook_decls.hpp"
#include "vgpu/real_driver.hpp"
#include "vgpu/runtime.hpp"

namespace hami::vgpu {
namespace {

struct Entry {
  const char* name;
  void* hook;
  void* (*real)();
};

#define CU_HOOK(name, params)                           \
  {#name, reinterpret_cast<void*>(&::hami::cuda::name), \
   []() -> void* { return reinterpret_cast<void*>(real_cuda().name); }},
const Entry kCudaHooks[] = {
#include "vgpu/hooks.def"
};

#define NVML_HOOK(name, params)                         \
  {#name, reinterpret_cast<void*>(&::hami::cuda::name), \
   []() -> void* { return reinterpret_cast<void*>(real_nvml().name); }},
const Entry kNvmlHooks[] = {
#include "vgpu/hooks.def"
};

template <size_t N>
void* find(const Entry (&table)[N], const char* name) {
  for (const Entry& e : table) {
    if (std::strcmp(e.name, name) == 0) return e.hook;
  }
  return nullptr;
}

}  // namespace

void* hook_for_cuda_symbol(const char* name) {
  if (!Runtime::hooks_active()) return nullptr;
  return find(kCudaHooks, name);
}

void* hook_for_nvml_symbol(const char* name) {
  if (!Runtime::hooks_active()) return nullptr;
  return find(kNvmlHooks, name);
}

void* substitute_cuda_pointer(void* real) {
  if (real == nullptr || !Runtime::hooks_active()) return real;
  for (const Entry& e : kCudaHooks) {
    if (e.real() == real) return e.hook;
  }
  // The driver may hand out internal entry points; an exported one has a name.
  Dl_info info{};
  if (::dladdr(real, &info) != 0 && info.dli_saddr == real && info.dli_sname != nullptr) {
    if (void* h = find(kCudaHooks, info.dli_sname)) return h;
  }
  return real;
}

}  // namespace hami::vgpu
