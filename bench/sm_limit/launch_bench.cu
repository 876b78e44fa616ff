// Launch-bound workload for the SM-limit benchmark: a stream of small kernels
// (one block each), as fast as the host can issue them. Prints how many
// kernels finished in each whole second, then the overall rate, and when its
// first second began (CLOCK_MONOTONIC, for lining its seconds up with
// switch-phases' log).
//
//   launch_bench SECONDS
// Output: one JSON line {"mode": "launch", "per_second": [...], "rate": R, "t0_ns": T}
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <vector>

__global__ void small_kernel(float* x) {
  x[threadIdx.x] = x[threadIdx.x] * 0.5f + 1.0f;
}

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 10.0;
  float* x = nullptr;
  cudaMalloc(&x, 128 * sizeof(float));
  for (int i = 0; i < 1000; ++i)
    small_kernel<<<1, 128>>>(x);
  cudaDeviceSynchronize();
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  std::vector<long> per_second(static_cast<size_t>(seconds) + 1, 0);
  long total = 0;
  double elapsed = 0;
  while (elapsed < seconds) {
    for (int i = 0; i < 1000; ++i)
      small_kernel<<<1, 128>>>(x);
    cudaDeviceSynchronize();
    elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    total += 1000;
    const size_t s = static_cast<size_t>(elapsed);
    if (s < per_second.size()) per_second[s] += 1000;
  }
  if (cudaGetLastError() != cudaSuccess) return 1;
  std::printf("{\"mode\": \"launch\", \"per_second\": [");
  for (size_t i = 0; i + 1 < per_second.size(); ++i)
    std::printf("%s%ld", i ? ", " : "", per_second[i]);
  const auto t0_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t0.time_since_epoch());
  std::printf("], \"rate\": %.1f, \"t0_ns\": %lld}\n", total / elapsed,
              static_cast<long long>(t0_ns.count()));
  return 0;
}
