// cuGetProcAddress and cuGetProcAddress_v2: the CUDA runtime (static or
// shared, 12.x and 13.x) and PyTorch find nearly every driver function here.
// We let the driver resolve the request first, so the CUDA version and the
// per-thread-default-stream flag choose exactly the variant the caller would
// get without us; then, if that variant is one we intercept, we hand back our
// hook for that same variant.
#include "vgpu/hook_decls.hpp"
#include "vgpu/hook_table.hpp"
#include "vgpu/real_driver.hpp"

namespace hami::cuda {

extern "C" {

CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion,
                          cuuint64_t flags) noexcept {
  const auto& cu = vgpu::real_cuda();
  if (cu.cuGetProcAddress == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  const CUresult rc = cu.cuGetProcAddress(symbol, pfn, cudaVersion, flags);
  if (rc == CUDA_SUCCESS && pfn != nullptr) *pfn = vgpu::substitute_cuda_pointer(*pfn);
  return rc;
}

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* symbolStatus) noexcept {
  const auto& cu = vgpu::real_cuda();
  if (cu.cuGetProcAddress_v2 == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  const CUresult rc = cu.cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus);
  if (rc == CUDA_SUCCESS && pfn != nullptr) *pfn = vgpu::substitute_cuda_pointer(*pfn);
  return rc;
}

}  // extern "C"
}  // namespace hami::cuda
