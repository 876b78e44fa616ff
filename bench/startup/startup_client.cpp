// One container's first process for the start-up benchmark (startup-bench):
// the first CUDA calls a program makes (cuInit, the primary context, one
// allocation), through libvgpu.so when it is preloaded, against the simulated
// driver. Prints the CLOCK_MONOTONIC time at which the allocation returned
// ("<ns> <rc>"), then holds its context, as a running container does, until
// stdin closes.
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>

#include "vgpu/cuda_abi.hpp"

using namespace hami::cuda;  // NOLINT

extern "C" {
CUresult cuInit(unsigned int);
CUresult cuDeviceGet(CUdevice*, int);
CUresult cuDevicePrimaryCtxRetain(CUcontext*, CUdevice);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuMemAlloc_v2(CUdeviceptr*, size_t);
}

int main() {
  CUresult rc = cuInit(0);
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  CUdeviceptr p = 0;
  if (rc == CUDA_SUCCESS) rc = cuDeviceGet(&dev, 0);
  if (rc == CUDA_SUCCESS) rc = cuDevicePrimaryCtxRetain(&ctx, dev);
  if (rc == CUDA_SUCCESS) rc = cuCtxSetCurrent(ctx);
  if (rc == CUDA_SUCCESS) rc = cuMemAlloc_v2(&p, 1 << 20);
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  std::printf("%lld %d\n", static_cast<long long>(t.tv_sec) * 1000000000LL + t.tv_nsec,
              static_cast<int>(rc));
  std::fflush(stdout);
  char b;
  while (read(0, &b, 1) > 0) {
  }
  return rc == CUDA_SUCCESS ? 0 : 1;
}
