// Graph hooks: an executable graph's allocations are found when it is
// instantiated and charged when the driver makes them real, at upload or
// first launch (graph_memory.hpp; launches are in launch_hooks.cpp).
#include "vgpu/hook_decls.hpp"
#include "vgpu/real_driver.hpp"
#include "vgpu/runtime.hpp"

namespace hami::cuda {
namespace {

using vgpu::call_real;
using vgpu::GraphMemory;
using vgpu::real_cuda;
using vgpu::Runtime;

// CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD: cuGraphInstantiateWithParams uploads too.
constexpr cuuint64_t kInstantiateUpload = 2;

template <class Instantiate>
CUresult instantiate(CUgraphExec* exec, CUgraph graph, bool uploads, Instantiate&& real) {
  Runtime* rt = Runtime::accounting();
  if (rt == nullptr || exec == nullptr) return real();
  const GraphMemory::Footprint f = GraphMemory::footprint_of(*rt, graph);
  const CUresult rc = uploads ? rt->graph_memory().instantiate_uploading(*rt, f, real) : real();
  if (rc == CUDA_SUCCESS) rt->graph_memory().instantiated(*rt, *exec, f, uploads);
  return rc;
}

CUresult with_params(decltype(vgpu::RealCuda::cuGraphInstantiateWithParams) fn, CUgraphExec* exec,
                     CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  const bool uploads = params != nullptr && (params->flags & kInstantiateUpload) != 0;
  return instantiate(exec, graph, uploads, [&] { return call_real(fn, exec, graph, params); });
}

CUresult upload(decltype(vgpu::RealCuda::cuGraphUpload) fn, bool ptsz, CUgraphExec exec,
                CUstream stream) {
  Runtime* rt = Runtime::accounting();
  if (rt == nullptr || !rt->graph_memory().any()) return call_real(fn, exec, stream);
  return rt->graph_memory().making_real(*rt, exec, stream, ptsz,
                                        [&] { return call_real(fn, exec, stream); });
}

}  // namespace

extern "C" {

CUresult cuGraphInstantiateWithFlags(CUgraphExec* phGraphExec, CUgraph hGraph,
                                     unsigned long long flags) noexcept {
  return instantiate(phGraphExec, hGraph, false, [&] {
    return call_real(real_cuda().cuGraphInstantiateWithFlags, phGraphExec, hGraph, flags);
  });
}

CUresult cuGraphInstantiateWithParams(CUgraphExec* phGraphExec, CUgraph hGraph,
                                      CUDA_GRAPH_INSTANTIATE_PARAMS* params) noexcept {
  return with_params(real_cuda().cuGraphInstantiateWithParams, phGraphExec, hGraph, params);
}

CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* phGraphExec, CUgraph hGraph,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS* params) noexcept {
  return with_params(real_cuda().cuGraphInstantiateWithParams_ptsz, phGraphExec, hGraph, params);
}

CUresult cuGraphInstantiate(CUgraphExec* phGraphExec, CUgraph hGraph, CUgraphNode* phErrorNode,
                            char* logBuffer, size_t bufferSize) noexcept {
  return instantiate(phGraphExec, hGraph, false, [&] {
    return call_real(real_cuda().cuGraphInstantiate, phGraphExec, hGraph, phErrorNode, logBuffer,
                     bufferSize);
  });
}

CUresult cuGraphInstantiate_v2(CUgraphExec* phGraphExec, CUgraph hGraph, CUgraphNode* phErrorNode,
                               char* logBuffer, size_t bufferSize) noexcept {
  return instantiate(phGraphExec, hGraph, false, [&] {
    return call_real(real_cuda().cuGraphInstantiate_v2, phGraphExec, hGraph, phErrorNode, logBuffer,
                     bufferSize);
  });
}

CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream) noexcept {
  return upload(real_cuda().cuGraphUpload, false, hGraphExec, hStream);
}

CUresult cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream) noexcept {
  return upload(real_cuda().cuGraphUpload_ptsz, true, hGraphExec, hStream);
}

CUresult cuDeviceGraphMemTrim(CUdevice device) noexcept {
  const CUresult rc = call_real(real_cuda().cuDeviceGraphMemTrim, device);
  Runtime* rt = Runtime::accounting();
  if (rc == CUDA_SUCCESS && rt != nullptr) rt->graph_memory().trimmed(*rt, device);
  return rc;
}

}  // extern "C"
}  // namespace hami::cuda
