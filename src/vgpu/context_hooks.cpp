// Context hooks: each context's own memory, and what its limits commit, is
// charged to its device (context_tracker.hpp says how it is measured).
#include "vgpu/hook_decls.hpp"
#include "vgpu/real_driver.hpp"
#include "vgpu/runtime.hpp"

namespace hami::cuda {
namespace {

using vgpu::real_cuda;
using vgpu::Runtime;

using vgpu::call_real;

CUresult release_primary(CUdevice dev, vgpu::ContextTracker::DeviceFn real) {
  Runtime* rt = Runtime::accounting();
  if (rt == nullptr || real == nullptr) return call_real(real, dev);
  return rt->contexts().release_primary(*rt, dev, real);
}

CUresult reset_primary(CUdevice dev, vgpu::ContextTracker::DeviceFn real) {
  Runtime* rt = Runtime::accounting();
  if (rt == nullptr || real == nullptr) return call_real(real, dev);
  rt->sm().context_gone(nullptr);  // the primary context's events die with it
  return rt->contexts().reset_primary(*rt, dev, real);
}

}  // namespace

extern "C" {

CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) noexcept {
  const auto& cu = real_cuda();
  Runtime* rt = Runtime::accounting();
  if (rt == nullptr || cu.cuDevicePrimaryCtxRetain == nullptr) {
    return call_real(cu.cuDevicePrimaryCtxRetain, pctx, dev);
  }
  auto release = cu.cuDevicePrimaryCtxRelease_v2 != nullptr ? cu.cuDevicePrimaryCtxRelease_v2
                                                            : cu.cuDevicePrimaryCtxRelease;
  return rt->contexts().retain_primary(*rt, pctx, dev, cu.cuDevicePrimaryCtxRetain, release);
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev) noexcept {
  return release_primary(dev, real_cuda().cuDevicePrimaryCtxRelease);
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) noexcept {
  return release_primary(dev, real_cuda().cuDevicePrimaryCtxRelease_v2);
}

CUresult cuDevicePrimaryCtxReset(CUdevice dev) noexcept {
  return reset_primary(dev, real_cuda().cuDevicePrimaryCtxReset);
}

CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) noexcept {
  return reset_primary(dev, real_cuda().cuDevicePrimaryCtxReset_v2);
}

CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) noexcept {
  const auto& cu = real_cuda();
  Runtime* rt = Runtime::accounting();
  if (rt == nullptr || cu.cuCtxCreate_v2 == nullptr)
    return call_real(cu.cuCtxCreate_v2, pctx, flags, dev);
  return rt->contexts().create(
      *rt, pctx, dev, [&] { return cu.cuCtxCreate_v2(pctx, flags, dev); }, cu.cuCtxDestroy_v2);
}

CUresult cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* params, int numParams,
                        unsigned int flags, CUdevice dev) noexcept {
  const auto& cu = real_cuda();
  Runtime* rt = Runtime::accounting();
  if (rt == nullptr || cu.cuCtxCreate_v3 == nullptr) {
    return call_real(cu.cuCtxCreate_v3, pctx, params, numParams, flags, dev);
  }
  return rt->contexts().create(
      *rt, pctx, dev, [&] { return cu.cuCtxCreate_v3(pctx, params, numParams, flags, dev); },
      cu.cuCtxDestroy_v2);
}

CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* params, unsigned int flags,
                        CUdevice dev) noexcept {
  const auto& cu = real_cuda();
  Runtime* rt = Runtime::accounting();
  if (rt == nullptr || cu.cuCtxCreate_v4 == nullptr) {
    return call_real(cu.cuCtxCreate_v4, pctx, params, flags, dev);
  }
  return rt->contexts().create(
      *rt, pctx, dev, [&] { return cu.cuCtxCreate_v4(pctx, params, flags, dev); },
      cu.cuCtxDestroy_v2);
}

CUresult cuCtxSetLimit(CUlimit limit, size_t value) noexcept {
  const auto& cu = real_cuda();
  Runtime* rt = Runtime::accounting();
  if (rt == nullptr || cu.cuCtxSetLimit == nullptr)
    return call_real(cu.cuCtxSetLimit, limit, value);
  return rt->contexts().set_limit(*rt, limit, value, cu.cuCtxSetLimit);
}

CUresult cuCtxDestroy_v2(CUcontext ctx) noexcept {
  const auto& cu = real_cuda();
  Runtime* rt = Runtime::accounting();
  if (rt == nullptr || cu.cuCtxDestroy_v2 == nullptr) return call_real(cu.cuCtxDestroy_v2, ctx);
  rt->sm().context_gone(ctx);
  return rt->contexts().destroy(*rt, ctx, cu.cuCtxDestroy_v2);
}

}  // extern "C"
}  // namespace hami::cuda
