// Host-side rates of the calls libvgpu.so may sit on: empty-kernel launches,
// cudaMalloc+cudaFree pairs, cudaMemGetInfo. Each rate is the best of many
// short batches inside one process (the machine is noisy for host rates).
//
//   hook_bench launch|malloc|meminfo
// Prints: workload=<w> ops_per_s=<best batch rate> batches=<n>
#include <cuda_runtime.h>

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

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: hook_bench launch|malloc|meminfo\n");
    return 2;
  }
  cudaFree(nullptr);
  double rate = 0;
  const int batches = 30;
  if (std::strcmp(argv[1], "launch") == 0) {
    empty_kernel<<<1, 1>>>();
    cudaDeviceSynchronize();
    rate = best_rate(batches, 5000, [](int n) {
      for (int i = 0; i < n; ++i) empty_kernel<<<1, 1>>>();
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
      for (int i = 0; i < n; ++i) cudaMemGetInfo(&f, &t);
    });
  } else {
    return 2;
  }
  if (cudaGetLastError() != cudaSuccess) return 1;
  std::printf("workload=%s ops_per_s=%.1f batches=%d\n", argv[1], rate, batches);
  return 0;
}
