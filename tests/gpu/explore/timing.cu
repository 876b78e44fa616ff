// Exploration: how GPU-side time of launches looks from events.
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>
__global__ void empty_kernel() {}
__global__ void spin_kernel(long long ns) {
  long long t0 = clock64();
  while (clock64() - t0 < ns * 2) {}
}
using C = std::chrono::steady_clock;
static double pct(std::vector<float> v, double p) { std::sort(v.begin(), v.end()); return v[size_t(p * (v.size() - 1))]; }
int main() {
  cudaFree(nullptr);
  cudaStream_t s; cudaStreamCreate(&s);
  for (int i = 0; i < 1000; ++i) empty_kernel<<<1, 1, 0, s>>>();
  cudaStreamSynchronize(s);
  // 1. bare launch rate
  auto t0 = C::now(); int n = 50000;
  for (int i = 0; i < n; ++i) empty_kernel<<<1, 1, 0, s>>>();
  double host = std::chrono::duration<double>(C::now() - t0).count();
  cudaStreamSynchronize(s);
  double all = std::chrono::duration<double>(C::now() - t0).count();
  printf("empty: host %.3f us/launch, to-sync %.3f us/launch\n", host / n * 1e6, all / n * 1e6);
  // 2. with event pair per launch
  std::vector<cudaEvent_t> ev(2 * 2000);
  for (auto& e : ev) cudaEventCreate(&e);
  t0 = C::now();
  for (int i = 0; i < 2000; ++i) { cudaEventRecord(ev[2*i], s); empty_kernel<<<1,1,0,s>>>(); cudaEventRecord(ev[2*i+1], s); }
  host = std::chrono::duration<double>(C::now() - t0).count();
  cudaStreamSynchronize(s);
  std::vector<float> el, gap;
  for (int i = 0; i < 2000; ++i) { float ms; cudaEventElapsedTime(&ms, ev[2*i], ev[2*i+1]); el.push_back(ms*1000); if (i) { cudaEventElapsedTime(&ms, ev[2*i-1], ev[2*i+1]); gap.push_back(ms*1000);} }
  printf("bracketed empty: host %.3f us/iter; inside p10 %.2f p50 %.2f p90 %.2f us; period p50 %.2f us\n", host/2000*1e6, pct(el,.1), pct(el,.5), pct(el,.9), pct(gap,.5));
  // 3. windows of 16 launches
  t0 = C::now();
  for (int i = 0; i < 200; ++i) { cudaEventRecord(ev[2*i], s); for (int k = 0; k < 16; ++k) empty_kernel<<<1,1,0,s>>>(); cudaEventRecord(ev[2*i+1], s); }
  host = std::chrono::duration<double>(C::now() - t0).count();
  cudaStreamSynchronize(s);
  el.clear();
  for (int i = 0; i < 200; ++i) { float ms; cudaEventElapsedTime(&ms, ev[2*i], ev[2*i+1]); el.push_back(ms*1000/16); }
  printf("window16 empty: host %.3f us/launch; gpu per launch p10 %.2f p50 %.2f p90 %.2f\n", host/3200*1e6, pct(el,.1), pct(el,.5), pct(el,.9));
  // 4. GPU-bound empty: pre-queue then measure (host faster? no) -- spin kernels 20us
  for (long long ns : {2000LL, 20000LL, 200000LL}) {
    el.clear();
    for (int i = 0; i < 200; ++i) { cudaEventRecord(ev[2*i], s); spin_kernel<<<132,128,0,s>>>(ns); cudaEventRecord(ev[2*i+1], s); }
    cudaStreamSynchronize(s);
    for (int i = 0; i < 200; ++i) { float ms; cudaEventElapsedTime(&ms, ev[2*i], ev[2*i+1]); el.push_back(ms*1000); }
    printf("spin %lld ns: bracket p10 %.2f p50 %.2f p90 %.2f us\n", ns, pct(el,.1), pct(el,.5), pct(el,.9));
  }
  // 5. event record host cost
  t0 = C::now();
  for (int i = 0; i < 4000; ++i) cudaEventRecord(ev[i], s);
  printf("eventRecord host %.3f us\n", std::chrono::duration<double>(C::now() - t0).count()/4000*1e6);
  t0 = C::now(); int q = 0;
  for (int i = 0; i < 4000; ++i) q += cudaEventQuery(ev[i]) == cudaSuccess;
  printf("eventQuery host %.3f us (%d done)\n", std::chrono::duration<double>(C::now() - t0).count()/4000*1e6, q);
  cudaStreamSynchronize(s);
  cudaDeviceProp p; cudaGetDeviceProperties(&p, 0);
  printf("sms %d\n", p.multiProcessorCount);
  return 0;
}
