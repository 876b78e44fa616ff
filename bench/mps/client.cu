// A short MPS client (bench/mps/shm_check.sh): makes a context, runs one
// kernel, and prints how many SMs its context may use. With
// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 a client of an MPS server sees half
// the SMs (the device attribute too); a process outside MPS sees them all.
#include <cstdio>
#include <cuda.h>
#include <cuda_runtime.h>

__global__ void add_one(int* p) { p[threadIdx.x] += 1; }

int main() {
  int* d = nullptr;
  cudaError_t e = cudaMalloc(&d, 32 * sizeof(int));
  if (e == cudaSuccess) e = cudaMemset(d, 0, 32 * sizeof(int));
  if (e == cudaSuccess) {
    add_one<<<1, 32>>>(d);
    e = cudaDeviceSynchronize();
  }
  int host[32] = {};
  if (e == cudaSuccess) e = cudaMemcpy(host, d, sizeof(host), cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) {
    std::printf("client: %s (%s)\n", cudaGetErrorString(e), cudaGetErrorName(e));
    return 1;
  }
  CUexecAffinityParam aff{};
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const CUresult r = cuCtxGetExecAffinity(&aff, CU_EXEC_AFFINITY_TYPE_SM_COUNT);
  std::printf("client: kernel ok (%d), context SMs %d, device attribute %d\n", host[0],
              r == CUDA_SUCCESS ? static_cast<int>(aff.param.smCount.val) : -1, sms);
  return host[0] == 1 ? 0 : 1;
}
