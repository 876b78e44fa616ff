// Every CUDA-runtime allocation path, filled until the runtime reports out of
// memory under libvgpu.so's limit. Built with the shared and the static
// runtime, and with per-thread default streams, by tests/gpu/run.sh.
//
//   runtime_paths <path>    path: malloc pitch managed async pool array array3d mipmap
//
// Prints one line: path, bytes allocated, items, what one item took (from the
// free memory the runtime reports), the error, total, free before, free when
// full, and free after everything was freed again.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr size_t MiB = 1ull << 20;

struct Held {
  void* ptr = nullptr;
  cudaArray_t array = nullptr;
  cudaMipmappedArray_t mip = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: runtime_paths malloc|pitch|managed|async|pool|array|array3d|mipmap\n");
    return 2;
  }
  const std::string path = argv[1];
  cudaSetDevice(0);
  cudaFree(nullptr);  // create the context first
  size_t free0 = 0, total = 0;
  cudaMemGetInfo(&free0, &total);

  cudaStream_t stream;
  cudaStreamCreate(&stream);
  cudaMemPool_t pool{};
  if (path == "pool") {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    cudaMemPoolCreate(&pool, &props);
  }
  std::vector<Held> held;
  size_t allocated = 0;
  size_t item = 0;  // what one allocation took, as the (virtual) free memory shows it
  cudaError_t err = cudaSuccess;
  const cudaChannelFormatDesc fdesc = cudaCreateChannelDesc<float>();
  for (int i = 0; i < 100000 && err == cudaSuccess; ++i) {
    Held h;
    size_t bytes = 64 * MiB;
    if (path == "malloc") {
      err = cudaMalloc(&h.ptr, bytes);
    } else if (path == "pitch") {
      size_t pitch = 0;
      err = cudaMallocPitch(&h.ptr, &pitch, 8192, 8192);  // 64 MiB
      bytes = pitch * 8192;
    } else if (path == "managed") {
      err = cudaMallocManaged(&h.ptr, bytes);
    } else if (path == "async") {
      err = cudaMallocAsync(&h.ptr, bytes, stream);
      cudaStreamSynchronize(stream);
    } else if (path == "pool") {
      err = cudaMallocFromPoolAsync(&h.ptr, bytes, pool, stream);
      cudaStreamSynchronize(stream);
    } else if (path == "array") {
      err = cudaMallocArray(&h.array, &fdesc, 4096, 4096);  // 64 MiB
    } else if (path == "array3d") {
      err = cudaMalloc3DArray(&h.array, &fdesc, make_cudaExtent(256, 256, 256));  // 64 MiB
    } else if (path == "mipmap") {
      err = cudaMallocMipmappedArray(&h.mip, &fdesc, make_cudaExtent(4096, 4096, 0), 2);
      bytes = 80 * MiB;  // 64 + 16
    } else {
      std::fprintf(stderr, "unknown path %s\n", path.c_str());
      return 2;
    }
    if (err == cudaSuccess) {
      held.push_back(h);
      allocated += bytes;
      if (held.size() == 1) {
        size_t f = 0, t = 0;
        cudaMemGetInfo(&f, &t);
        item = free0 - f;
      }
    }
  }
  const char* error_name = cudaGetErrorName(err);
  cudaGetLastError();  // clear the sticky-free error state for what follows
  size_t free_full = 0;
  cudaMemGetInfo(&free_full, &total);
  for (Held& h : held) {
    if (h.ptr != nullptr) {
      if (path == "async" || path == "pool") {
        cudaFreeAsync(h.ptr, stream);
      } else {
        cudaFree(h.ptr);
      }
    }
    if (h.array != nullptr) cudaFreeArray(h.array);
    if (h.mip != nullptr) cudaFreeMipmappedArray(h.mip);
  }
  cudaStreamSynchronize(stream);
  if (path == "pool") cudaMemPoolDestroy(pool);
  cudaDeviceSynchronize();
  size_t free1 = 0;
  cudaMemGetInfo(&free1, &total);
  std::printf(
      "path=%s allocated=%zu items=%zu item=%zu error=%s total=%zu free_before=%zu "
      "free_when_full=%zu free_after_free=%zu\n",
      path.c_str(), allocated, held.size(), item, error_name, total, free0, free_full, free1);
  return 0;
}
