// Does the driver's cuGetProcAddress hand out the addresses of its exported
// symbols? libvgpu.so recognises the variant the driver chose by address.
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef int (*gpa_v2_t)(const char*, void**, int, unsigned long long, int*);

int main(void) {
  void* h = dlopen("libcuda.so.1", RTLD_NOW);
  if (!h) {
    printf("no libcuda: %s\n", dlerror());
    return 1;
  }
  int (*init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
  printf("cuInit -> %d\n", init(0));
  gpa_v2_t gpa = (gpa_v2_t)dlsym(h, "cuGetProcAddress_v2");
  struct {
    const char* base;
    const char* exported;
    int version;
    unsigned long long flags;
  } q[] = {
      {"cuMemAlloc", "cuMemAlloc_v2", 13000, 0},
      {"cuMemAlloc", "cuMemAlloc", 2000, 0},
      {"cuMemFree", "cuMemFree_v2", 13000, 0},
      {"cuMemGetInfo", "cuMemGetInfo_v2", 13000, 0},
      {"cuMemAllocPitch", "cuMemAllocPitch_v2", 13000, 0},
      {"cuMemAllocManaged", "cuMemAllocManaged", 13000, 0},
      {"cuMemAllocAsync", "cuMemAllocAsync", 13000, 0},
      {"cuMemAllocAsync", "cuMemAllocAsync_ptsz", 13000, 2},
      {"cuMemFreeAsync", "cuMemFreeAsync_ptsz", 13000, 2},
      {"cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz", 13000, 2},
      {"cuMemCreate", "cuMemCreate", 13000, 0},
      {"cuMemRelease", "cuMemRelease", 13000, 0},
      {"cuArrayCreate", "cuArrayCreate_v2", 13000, 0},
      {"cuArray3DCreate", "cuArray3DCreate_v2", 13000, 0},
      {"cuMipmappedArrayCreate", "cuMipmappedArrayCreate", 13000, 0},
      {"cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain", 13000, 0},
      {"cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2", 13000, 0},
      {"cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxReset_v2", 13000, 0},
      {"cuCtxCreate", "cuCtxCreate_v4", 13000, 0},
      {"cuCtxCreate", "cuCtxCreate_v2", 11000, 0},
      {"cuCtxCreate", "cuCtxCreate_v3", 12000, 0},
      {"cuCtxDestroy", "cuCtxDestroy_v2", 13000, 0},
      {"cuDeviceTotalMem", "cuDeviceTotalMem_v2", 13000, 0},
      {"cuGetProcAddress", "cuGetProcAddress_v2", 13000, 0},
      {"cuGetProcAddress", "cuGetProcAddress", 11030, 0},
      {"cuLaunchKernel", "cuLaunchKernel_ptsz", 13000, 2},
      {"cuLaunchKernel", "cuLaunchKernel", 13000, 0},
      {"cuGraphLaunch", "cuGraphLaunch", 13000, 0},
  };
  int same = 0, total = 0;
  for (unsigned i = 0; i < sizeof q / sizeof q[0]; ++i) {
    void* p = 0;
    int st = -1;
    int rc = gpa(q[i].base, &p, q[i].version, q[i].flags, &st);
    void* e = dlsym(h, q[i].exported);
    Dl_info info;
    const char* nm = "?";
    if (p && dladdr(p, &info) && info.dli_saddr == p && info.dli_sname) nm = info.dli_sname;
    ++total;
    same += (p == e && p);
    printf("%-26s v%-5d f%llu rc=%d st=%d %s exported(%s)=%s dladdr=%s\n", q[i].base, q[i].version,
           q[i].flags, rc, st, p == e ? "SAME" : "DIFF", q[i].exported, e ? "yes" : "no", nm);
  }
  printf("same address: %d/%d\n", same, total);
  return 0;
}
