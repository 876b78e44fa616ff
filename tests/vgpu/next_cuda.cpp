// Linked into cuda-client before libcuda.so.1: dlsym(RTLD_NEXT, name) from here
// means "the next definition after this library", which glibc answers with
// the driver's own function. libvgpu.so must answer with its hook instead.
#include <dlfcn.h>

extern "C" __attribute__((visibility("default"))) void* hami_next_lookup(const char* name) {
  return dlsym(RTLD_NEXT, name);
}
