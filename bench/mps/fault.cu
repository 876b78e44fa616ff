// An MPS client that dies of a fatal GPU fault: a kernel writes through an
// address nothing maps (bench/mps/run.sh, the fault case).
#include <cstdio>
#include <cuda_runtime.h>

__global__ void write_nowhere(int* p) { p[threadIdx.x] = 1; }

int main() {
  int* warm = nullptr;
  cudaMalloc(&warm, 4);  // a context on the MPS server first
  write_nowhere<<<1, 32>>>(reinterpret_cast<int*>(0x10));
  const cudaError_t e = cudaDeviceSynchronize();
  std::printf("fault client: %s\n", cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
