// Looks up hami_next_fn with RTLD_NEXT from inside this library, the way
// interposers (jemalloc hooks, profilers, Nsight) find what they wrap. glibc
// must answer relative to *this* object, even with libvgpu.so's dlsym in front.
#include <dlfcn.h>

extern "C" __attribute__((visibility("default"))) const char* hami_next_fn() {
  return "probe";
}

extern "C" __attribute__((visibility("default"))) const char* hami_lookup_next() {
  using Fn = const char* (*)();
  auto fn = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "hami_next_fn"));
  return fn != nullptr ? fn() : "none";
}
