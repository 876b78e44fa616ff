// Where the launch-bound program's second-to-second noise comes from
// (docs/sm-limiter.md, "Where it cannot be exact"). Modes:
//
//   host_noise launch SECONDS   the benchmark's loop (1000 one-block kernels,
//                               then a sync), timing the launches and the
//                               sync apart: if the sync takes a real share,
//                               the GPU, not the host, sets the pace.
//   host_noise cpu SECONDS      a fixed integer loop, no CUDA: the core's own
//                               speed, second by second, to run beside it.
//
// Output: one JSON line per whole second
//   {"mode": "launch", "s": 3, "launches": N, "launch_ms": L, "sync_ms": S}
//   {"mode": "cpu", "s": 3, "iters": N}
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

__global__ void small_kernel(float* x) {
  x[threadIdx.x] = x[threadIdx.x] * 0.5f + 1.0f;
}

using Clock = std::chrono::steady_clock;

static double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

static int run_launch(double seconds) {
  float* x = nullptr;
  cudaMalloc(&x, 128 * sizeof(float));
  for (int i = 0; i < 1000; ++i)
    small_kernel<<<1, 128>>>(x);
  cudaDeviceSynchronize();
  const auto t0 = Clock::now();
  long second = 0, launches = 0;
  double launch_s = 0, sync_s = 0;
  for (;;) {
    const auto a = Clock::now();
    for (int i = 0; i < 1000; ++i)
      small_kernel<<<1, 128>>>(x);
    const auto b = Clock::now();
    cudaDeviceSynchronize();
    const auto c = Clock::now();
    launch_s += std::chrono::duration<double>(b - a).count();
    sync_s += std::chrono::duration<double>(c - b).count();
    launches += 1000;
    const double t = since(t0);
    if (static_cast<long>(t) != second) {
      std::printf("{\"mode\": \"launch\", \"s\": %ld, \"launches\": %ld, \"launch_ms\": %.1f, "
                  "\"sync_ms\": %.1f}\n",
                  second, launches, launch_s * 1e3, sync_s * 1e3);
      std::fflush(stdout);
      second = static_cast<long>(t);
      launches = 0;
      launch_s = sync_s = 0;
      if (t >= seconds) break;
    }
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}

static int run_cpu(double seconds) {
  const auto t0 = Clock::now();
  long second = 0, iters = 0;
  volatile uint64_t sink = 0;
  uint64_t h = 1469598103934665603ull;
  for (;;) {
    for (int i = 0; i < 10000; ++i)
      h = (h ^ static_cast<uint64_t>(i)) * 1099511628211ull;
    sink = h;
    iters += 10000;
    const double t = since(t0);
    if (static_cast<long>(t) != second) {
      std::printf("{\"mode\": \"cpu\", \"s\": %ld, \"iters\": %ld}\n", second, iters);
      std::fflush(stdout);
      second = static_cast<long>(t);
      iters = 0;
      if (t >= seconds) break;
    }
  }
  (void)sink;
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 3 || (std::strcmp(argv[1], "launch") != 0 && std::strcmp(argv[1], "cpu") != 0)) {
    std::fprintf(stderr, "usage: host_noise launch|cpu SECONDS\n");
    return 2;
  }
  const double seconds = std::atof(argv[2]);
  return std::strcmp(argv[1], "launch") == 0 ? run_launch(seconds) : run_cpu(seconds);
}
