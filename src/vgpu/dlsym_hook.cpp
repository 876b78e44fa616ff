// Our dlsym and dlvsym. Programs that dlopen the driver (the CUDA runtime,
// PyTorch, NCCL, nvidia-smi, ctypes) look functions up by name; whatever route
// a lookup takes, a name we intercept that would have found the driver's own
// function (libcuda.so.1, libnvidia-ml.so.1) gets our hook instead:
//
//  - a handle of libcuda.so.1 / libnvidia-ml.so.1: our hook, glibc not asked;
//  - any other handle (a library that depends on the driver, a second handle):
//    glibc answers, and an answer inside the driver becomes our hook;
//  - RTLD_NEXT from a library that comes before the driver: the same;
//  - dlvsym(handle, name, version): glibc answers first (it finds nothing in
//    the driver, whose symbols are unversioned), then the same rules apply;
//  - looking up "dlsym" or "dlvsym" themselves (dlvsym(RTLD_DEFAULT, "dlsym",
//    "GLIBC_2.34") is how a program reaches glibc's own past an interposer):
//    ours, by any handle or version.
//
// Every other lookup is glibc's own. glibc resolves RTLD_NEXT relative to the
// object that called dlsym, found from the return address; so the
// fall-through must be a tail call (a jump, not a call) to glibc's dlsym: then
// glibc sees our caller's return address, not ours. This file is compiled so
// that it always is (see libvgpu.cmake), and tests/vgpu check RTLD_NEXT from a
// library of their own. For a name we intercept we first ask glibc from here
// (RTLD_NEXT then means "after libvgpu.so"): an answer inside the driver is
// replaced by our hook, and so is an answer inside the caller itself (an
// interposer asking for the next definition after its own); anything else
// falls through to glibc for the caller.
//
// Since we export dlsym and dlvsym, calling either by name from this library
// would land in ours: glibc's own are found once in libc's symbol table.
//
// Sanitizer runtimes call dlsym(RTLD_NEXT, ...) and dlvsym from their own
// initialisers, before their shadow memory exists; nothing on this path may be
// instrumented, which is another reason it all lives in this one file. Nor may
// it call a libc function a sanitizer intercepts (strcmp, strlen...): while the
// runtime initialises, its interceptors have nothing to forward to. The string
// helpers below are ours for that reason.
#include <dlfcn.h>
#include <elf.h>
#include <gnu/libc-version.h>
#include <link.h>

#include <atomic>
#include <cstdint>

#include "vgpu/hook_decls.hpp"
#include "vgpu/hook_table.hpp"
#include "vgpu/real_driver.hpp"

namespace hami::vgpu {
namespace {

using DlvsymFn = void* (*)(void*, const char*, const char*) noexcept;

std::atomic<DlsymFn> g_real_dlsym{nullptr};
std::atomic<DlvsymFn> g_real_dlvsym{nullptr};

bool str_eq(const char* a, const char* b) noexcept {
  for (; *a != '\0' && *a == *b; ++a, ++b) {
  }
  return *a == *b;
}

bool has_prefix(const char* s, const char* prefix) noexcept {
  for (; *prefix != '\0'; ++s, ++prefix) {
    if (*s != *prefix) return false;
  }
  return true;
}

// The part of a path after its last '/'.
const char* base_name(const char* path) noexcept {
  const char* base = path;
  for (const char* p = path; *p != '\0'; ++p) {
    if (*p == '/') base = p + 1;
  }
  return base;
}

uint32_t gnu_hash(const char* s) {
  uint32_t h = 5381;
  for (; *s != '\0'; ++s)
    h = h * 33 + static_cast<unsigned char>(*s);
  return h;
}

// glibc relocates most of its dynamic section's addresses in place; a value
// below the load address is still an offset.
uintptr_t dyn_addr(const link_map* lm, ElfW(Addr) value) {
  return value < lm->l_addr ? lm->l_addr + value : value;
}

// The address of `name`, defined in libc itself, read from libc's dynamic
// symbol table (GNU hash, or the SysV hash's symbol count for a linear scan).
void* libc_symbol(const char* name) noexcept {
  Dl_info info{};
  link_map* lm = nullptr;
  if (::dladdr1(reinterpret_cast<void*>(&::gnu_get_libc_version), &info,
                reinterpret_cast<void**>(&lm), RTLD_DL_LINKMAP) == 0 ||
      lm == nullptr || lm->l_ld == nullptr) {
    return nullptr;
  }
  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  const uint32_t* gnu = nullptr;
  const uint32_t* sysv = nullptr;
  for (const ElfW(Dyn)* d = lm->l_ld; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB:
        symtab = reinterpret_cast<const ElfW(Sym)*>(dyn_addr(lm, d->d_un.d_ptr));
        break;
      case DT_STRTAB:
        strtab = reinterpret_cast<const char*>(dyn_addr(lm, d->d_un.d_ptr));
        break;
      case DT_GNU_HASH:
        gnu = reinterpret_cast<const uint32_t*>(dyn_addr(lm, d->d_un.d_ptr));
        break;
      case DT_HASH:
        sysv = reinterpret_cast<const uint32_t*>(dyn_addr(lm, d->d_un.d_ptr));
        break;
      default:
        break;
    }
  }
  if (symtab == nullptr || strtab == nullptr) return nullptr;
  auto match = [&](uint32_t i) -> void* {
    const ElfW(Sym)& s = symtab[i];
    if (s.st_shndx == SHN_UNDEF || s.st_value == 0) return nullptr;
    if (ELF64_ST_TYPE(s.st_info) != STT_FUNC && ELF64_ST_TYPE(s.st_info) != STT_GNU_IFUNC)
      return nullptr;
    if (!str_eq(strtab + s.st_name, name)) return nullptr;
    return reinterpret_cast<void*>(lm->l_addr + s.st_value);
  };
  if (gnu != nullptr) {
    const uint32_t nbuckets = gnu[0], symoffset = gnu[1], bloom_size = gnu[2];
    if (nbuckets == 0) return nullptr;
    const auto* bloom = reinterpret_cast<const ElfW(Addr)*>(gnu + 4);
    const auto* buckets = reinterpret_cast<const uint32_t*>(bloom + bloom_size);
    const uint32_t* chain = buckets + nbuckets;
    const uint32_t h = gnu_hash(name);
    uint32_t i = buckets[h % nbuckets];
    if (i < symoffset) return nullptr;
    for (;; ++i) {
      const uint32_t c = chain[i - symoffset];
      if ((c | 1) == (h | 1)) {
        if (void* p = match(i)) return p;
      }
      if ((c & 1) != 0) return nullptr;
    }
  }
  if (sysv != nullptr) {
    for (uint32_t i = 0; i < sysv[1]; ++i) {
      if (void* p = match(i)) return p;
    }
  }
  return nullptr;
}

DlvsymFn real_dlvsym() noexcept {
  DlvsymFn fn = g_real_dlvsym.load(std::memory_order_acquire);
  if (fn != nullptr) return fn;
  fn = reinterpret_cast<DlvsymFn>(libc_symbol("dlvsym"));
  g_real_dlvsym.store(fn, std::memory_order_release);
  return fn;
}

}  // namespace

DlsymFn real_dlsym() noexcept {
  DlsymFn fn = g_real_dlsym.load(std::memory_order_acquire);
  if (fn != nullptr) return fn;
  fn = reinterpret_cast<DlsymFn>(libc_symbol("dlsym"));
  g_real_dlsym.store(fn, std::memory_order_release);
  return fn;
}

}  // namespace hami::vgpu

extern "C" HAMI_EXPORT void* dlsym(void* handle, const char* symbol) noexcept;
extern "C" HAMI_EXPORT void* dlvsym(void* handle, const char* symbol, const char* version) noexcept;

namespace {

enum class Family { kNone, kCuda, kNvml, kSelf };

Family family_of(const char* symbol) noexcept {
  if (symbol == nullptr) return Family::kNone;
  if (symbol[0] == 'c' && symbol[1] == 'u') return Family::kCuda;
  if (hami::vgpu::has_prefix(symbol, "nvml")) return Family::kNvml;
  if (symbol[0] == 'd' &&
      (hami::vgpu::str_eq(symbol, "dlsym") || hami::vgpu::str_eq(symbol, "dlvsym")))
    return Family::kSelf;
  return Family::kNone;
}

// Whether `p` lies in a driver library (by file name, so a copy of libcuda.so.1
// loaded from another directory counts too).
bool in_driver(void* p, Family f) noexcept {
  Dl_info info{};
  if (p == nullptr || ::dladdr(p, &info) == 0 || info.dli_fname == nullptr) return false;
  const char* base = hami::vgpu::base_name(info.dli_fname);
  return f == Family::kCuda ? hami::vgpu::has_prefix(base, "libcuda.so")
                            : hami::vgpu::has_prefix(base, "libnvidia-ml.so");
}

bool same_object(void* a, void* b) noexcept {
  Dl_info ia{}, ib{};
  return a != nullptr && b != nullptr && ::dladdr(a, &ia) != 0 && ::dladdr(b, &ib) != 0 &&
         ia.dli_fbase == ib.dli_fbase;
}

void* hook_for(Family f, const char* symbol) noexcept {
  return f == Family::kCuda ? hami::vgpu::hook_for_cuda_symbol(symbol)
                            : hami::vgpu::hook_for_nvml_symbol(symbol);
}

// Our answer for a lookup, or nullptr to let glibc answer for the caller.
// `ask` is glibc's answer as seen from this library.
template <class Ask>
void* intercept(void* handle, const char* symbol, void* caller, bool by_handle,
                Ask&& ask) noexcept {
  const Family f = family_of(symbol);
  if (f == Family::kNone) return nullptr;
  if (f == Family::kSelf) {
    return symbol[1] == 'l' && symbol[2] == 's' ? reinterpret_cast<void*>(&dlsym)
                                                : reinterpret_cast<void*>(&dlvsym);
  }
  // RTLD_DEFAULT searches from the start, where our exports come first.
  if (handle == RTLD_DEFAULT) return nullptr;
  if (by_handle && handle != RTLD_NEXT) {
    if (f == Family::kCuda ? hami::vgpu::is_cuda_handle(handle)
                           : hami::vgpu::is_nvml_handle(handle)) {
      return hook_for(f, symbol);
    }
  }
  void* hook = hook_for(f, symbol);
  if (hook == nullptr) return nullptr;  // not ours, or nothing configured
  void* found = ask();
  if (found == nullptr || found == hook) return nullptr;
  if (in_driver(found, f)) return hook;
  // An interposer looking past its own definition: the next one is the driver's.
  if (handle == RTLD_NEXT && same_object(found, caller)) return hook;
  return nullptr;
}

}  // namespace

extern "C" HAMI_EXPORT void* dlsym(void* handle, const char* symbol) noexcept {
  if (void* hook = intercept(handle, symbol, __builtin_return_address(0), /*by_handle=*/true,
                             [&] { return hami::vgpu::real_dlsym()(handle, symbol); })) {
    return hook;
  }
  return hami::vgpu::real_dlsym()(handle, symbol);
}

extern "C" HAMI_EXPORT void* dlvsym(void* handle, const char* symbol,
                                    const char* version) noexcept {
  if (void* hook = intercept(handle, symbol, __builtin_return_address(0), /*by_handle=*/false,
                             [&] { return hami::vgpu::real_dlvsym()(handle, symbol, version); })) {
    return hook;
  }
  return hami::vgpu::real_dlvsym()(handle, symbol, version);
}
