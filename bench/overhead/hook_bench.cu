// Host-side rates of the calls libvgpu.so may sit on: empty-kernel launches,
// cudaMalloc+cudaFree pairs, cudaMemGetInfo. Each rate is the best of many
// short batches inside one process (the machine is noisy for host rates).
//
//   hook_bench launch|malloc|meminfo
// Prints: workload=<w> ops_per_s=<best batch rate> batches=<n>
//
//   hook_bench launch_ab
// One process, two ways to the same cuLaunchKernel, alternating batch by
// batch: the pointer the CUDA runtime is given (cuGetProcAddress: our hook
// when libvgpu.so is active) and the driver's own function (looked up with
// glibc's dlsym, past ours), the latter twice as an A/A control. Two runs of
// one program on this machine differ by more than the hook costs, so the
// hook's cost is measured inside one process.
// Prints: workload=launch_ab hooked=<ops/s> driver=<ops/s> driver2=<ops/s>
//         hooked_is_driver=<0|1> batches=<n per arm>
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstring>

__global__ void empty_kernel() {}

namespace {

using Clock = std::chrono::steady_clock;

template <class Body>
double best_rate(int batches, int per_batch, Body&& body) {
  double best = 0;
  for (int b = 0; b < batches; ++b) {
    const auto t0 = Clock::now();
    body(per_batch);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (per_batch / s > best) best = per_batch / s;
  }
  return best;
}

using LaunchFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void**, void**);

// The driver's own cuLaunchKernel. libvgpu.so answers dlsym on the driver's
// handle with its hooks; glibc's dlsym, found by its symbol version, does not.
LaunchFn driver_launch() {
  using Dlsym = void* (*)(void*, const char*);
  auto real_dlsym = reinterpret_cast<Dlsym>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"));
  if (real_dlsym == nullptr)
    real_dlsym = reinterpret_cast<Dlsym>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"));
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (real_dlsym == nullptr || cuda == nullptr) return nullptr;
  return reinterpret_cast<LaunchFn>(real_dlsym(cuda, "cuLaunchKernel"));
}

// What the CUDA runtime gets for cuLaunchKernel.
LaunchFn runtime_launch() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion("cuLaunchKernel", &fn, 12000, cudaEnableDefault, &q) !=
          cudaSuccess ||
      q != cudaDriverEntryPointSuccess)
    return nullptr;
  return reinterpret_cast<LaunchFn>(fn);
}

int launch_ab() {
  const LaunchFn hooked = runtime_launch();
  const LaunchFn driver = driver_launch();
  cudaFunction_t fn = nullptr;
  if (hooked == nullptr || driver == nullptr ||
      cudaGetFuncBySymbol(&fn, reinterpret_cast<const void*>(empty_kernel)) != cudaSuccess) {
    std::fprintf(stderr, "hook_bench: cannot find cuLaunchKernel or the kernel\n");
    return 1;
  }
  const auto f = reinterpret_cast<CUfunction>(fn);
  const LaunchFn arms[3] = {hooked, driver, driver};
  double best[3] = {0, 0, 0};
  const int cycles = 60, per_batch = 2000;
  bool failed = false;
  for (int c = 0; c < cycles + 1; ++c) {
    for (int k = 0; k < 3; ++k) {
      const int a = (c + k) % 3;  // each arm goes first, second and third in turn
      const double r = best_rate(1, per_batch, [&](int n) {
        for (int i = 0; i < n; ++i)
          failed |= arms[a](f, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr) != CUDA_SUCCESS;
        cudaDeviceSynchronize();
      });
      if (c > 0 && r > best[a]) best[a] = r;  // the first cycle warms up
    }
  }
  if (failed || cudaGetLastError() != cudaSuccess) return 1;
  std::printf(
      "workload=launch_ab hooked=%.1f driver=%.1f driver2=%.1f hooked_is_driver=%d batches=%d\n",
      best[0], best[1], best[2], hooked == driver ? 1 : 0, cycles);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: hook_bench launch|launch_ab|malloc|meminfo\n");
    return 2;
  }
  cudaFree(nullptr);
  if (std::strcmp(argv[1], "launch_ab") == 0) return launch_ab();
  double rate = 0;
  const int batches = 30;
  if (std::strcmp(argv[1], "launch") == 0) {
    empty_kernel<<<1, 1>>>();
    cudaDeviceSynchronize();
    rate = best_rate(batches, 5000, [](int n) {
      for (int i = 0; i < n; ++i)
        empty_kernel<<<1, 1>>>();
      cudaDeviceSynchronize();
    });
  } else if (std::strcmp(argv[1], "malloc") == 0) {
    rate = best_rate(batches, 500, [](int n) {
      for (int i = 0; i < n; ++i) {
        void* p = nullptr;
        cudaMalloc(&p, 2 << 20);
        cudaFree(p);
      }
    });
  } else if (std::strcmp(argv[1], "meminfo") == 0) {
    rate = best_rate(batches, 5000, [](int n) {
      size_t f, t;
      for (int i = 0; i < n; ++i)
        cudaMemGetInfo(&f, &t);
    });
  } else {
    return 2;
  }
  if (cudaGetLastError() != cudaSuccess) return 1;
  std::printf("workload=%s ops_per_s=%.1f batches=%d\n", argv[1], rate, batches);
  return 0;
}
