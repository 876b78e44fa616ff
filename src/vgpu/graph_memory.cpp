#include "vgpu/graph_memory.hpp"

#include <new>
#include <vector>

#include "common/bytes.hpp"
#include "common/log.hpp"
#include "vgpu/capture_state.hpp"
#include "vgpu/real_driver.hpp"
#include "vgpu/runtime.hpp"

namespace hami::vgpu {

using namespace hami::cuda;  // NOLINT

namespace {

// Child graphs nest; a bound keeps a cyclic answer from looping.
constexpr int kMaxDepth = 8;

void add_nodes(Runtime& rt, CUgraph graph, GraphMemory::Footprint& f, int depth) {
  const auto& cu = real_cuda();
  if (graph == nullptr || depth > kMaxDepth || cu.cuGraphGetNodes == nullptr ||
      cu.cuGraphNodeGetType == nullptr)
    return;
  size_t n = 0;
  if (cu.cuGraphGetNodes(graph, nullptr, &n) != CUDA_SUCCESS || n == 0) return;
  std::vector<CUgraphNode> nodes(n);
  if (cu.cuGraphGetNodes(graph, nodes.data(), &n) != CUDA_SUCCESS) return;
  nodes.resize(std::min(n, nodes.size()));
  for (CUgraphNode node : nodes) {
    CUgraphNodeType type = -1;
    if (cu.cuGraphNodeGetType(node, &type) != CUDA_SUCCESS) continue;
    if (type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && cu.cuGraphMemAllocNodeGetParams != nullptr) {
      CUDA_MEM_ALLOC_NODE_PARAMS p{};
      if (cu.cuGraphMemAllocNodeGetParams(node, &p) != CUDA_SUCCESS) continue;
      if (p.poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE) continue;
      const int index = rt.devices().index_for_ordinal(p.poolProps.location.id);
      if (index >= 0 && index < region::kMaxDevices) f[static_cast<size_t>(index)] += p.bytesize;
    } else if (type == CU_GRAPH_NODE_TYPE_GRAPH && cu.cuGraphChildGraphNodeGetGraph != nullptr) {
      CUgraph child = nullptr;
      if (cu.cuGraphChildGraphNodeGetGraph(node, &child) == CUDA_SUCCESS)
        add_nodes(rt, child, f, depth + 1);
    }
  }
}

bool empty(const GraphMemory::Footprint& f) {
  for (uint64_t b : f)
    if (b != 0) return false;
  return true;
}

}  // namespace

GraphMemory::Footprint GraphMemory::footprint_of(Runtime& rt, CUgraph graph) noexcept {
  Footprint f{};
  try {
    add_nodes(rt, graph, f, 0);
  } catch (const std::bad_alloc&) {
    log::error("out of host memory: a CUDA graph's allocations are not accounted");
    return Footprint{};
  }
  return f;
}

void GraphMemory::instantiated(Runtime& rt, CUgraphExec exec, const Footprint& f,
                               bool made_real) noexcept {
  if (exec == nullptr || empty(f)) return;
  {
    std::lock_guard lock(mu_);
    try {
      execs_[exec] = Exec{f, made_real};
    } catch (const std::bad_alloc&) {
      log::error("out of host memory: a CUDA graph's allocations are not accounted");
      return;
    }
    any_.store(true, std::memory_order_release);
  }
  if (made_real) settle_all(rt, f);
}

bool GraphMemory::reserve_all(Runtime& rt, const Footprint& f) noexcept {
  for (int d = 0; d < region::kMaxDevices; ++d) {
    const uint64_t b = f[static_cast<size_t>(d)];
    if (b == 0 || rt.reserve(d, region::UsageKind::kData, b)) continue;
    log::warn("device %d: a CUDA graph allocating %s does not fit under the limit of %s; refused",
              d, format_bytes(b).c_str(), format_bytes(rt.limit(d)).c_str());
    for (int u = 0; u < d; ++u)
      rt.release(u, region::UsageKind::kData, f[static_cast<size_t>(u)]);
    return false;
  }
  return true;
}

void GraphMemory::release_all(Runtime& rt, const Footprint& f) noexcept {
  for (int d = 0; d < region::kMaxDevices; ++d)
    rt.release(d, region::UsageKind::kData, f[static_cast<size_t>(d)]);
}

CUresult GraphMemory::making_real(Runtime& rt, CUgraphExec exec, CUstream stream, bool ptsz,
                                  FunctionRef<CUresult()> run) noexcept {
  Footprint pending{};
  {
    std::lock_guard lock(mu_);
    auto it = execs_.find(exec);
    if (it == execs_.end()) return run();
    if (!it->second.real) pending = it->second.footprint;
  }
  // Real already: a launch grows nothing (driver-facts-h100.txt). Launched
  // into a capture, the graph becomes a node of another graph.
  if (empty(pending) || (capture::active() && capture::stream_capturing(stream, ptsz)))
    return run();
  if (!reserve_all(rt, pending)) return CUDA_ERROR_OUT_OF_MEMORY;
  const CUresult rc = run();
  release_all(rt, pending);
  if (rc == CUDA_SUCCESS) {
    std::lock_guard lock(mu_);
    if (auto it = execs_.find(exec); it != execs_.end()) it->second.real = true;
  }
  settle_all(rt, pending);
  return rc;
}

CUresult GraphMemory::instantiate_uploading(Runtime& rt, const Footprint& f,
                                            FunctionRef<CUresult()> run) noexcept {
  if (empty(f)) return run();
  if (!reserve_all(rt, f)) return CUDA_ERROR_OUT_OF_MEMORY;
  const CUresult rc = run();
  release_all(rt, f);
  return rc;
}

void GraphMemory::settle(Runtime& rt, int index) noexcept {
  const auto& cu = real_cuda();
  const CUdevice ordinal = rt.devices().ordinal_for_index(index);
  if (cu.cuDeviceGetGraphMemAttribute == nullptr || ordinal < 0) return;
  cuuint64_t reserved = 0;
  if (cu.cuDeviceGetGraphMemAttribute(ordinal, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &reserved) !=
      CUDA_SUCCESS)
    return;
  std::lock_guard lock(mu_);
  uint64_t& charged = charged_[static_cast<size_t>(index)];
  // Already committed by the driver: recorded even past the limit (the
  // footprint was checked before it could grow).
  if (reserved > charged) {
    rt.force_charge(index, region::UsageKind::kData, reserved - charged);
  } else {
    rt.release(index, region::UsageKind::kData, charged - reserved);
  }
  charged = reserved;
}

void GraphMemory::settle_all(Runtime& rt, const Footprint& f) noexcept {
  for (int d = 0; d < region::kMaxDevices; ++d)
    if (f[static_cast<size_t>(d)] != 0) settle(rt, d);
}

void GraphMemory::forget(CUgraphExec exec) noexcept {
  if (!any()) return;
  std::lock_guard lock(mu_);
  execs_.erase(exec);
}

void GraphMemory::trimmed(Runtime& rt, CUdevice ordinal) noexcept {
  const int index = rt.devices().index_for_ordinal(ordinal);
  if (index < 0 || index >= region::kMaxDevices) return;
  {
    // A trim frees what no executing graph holds: every graph makes its
    // memory real again at its next launch.
    std::lock_guard lock(mu_);
    for (auto& [exec, e] : execs_)
      if (e.footprint[static_cast<size_t>(index)] != 0) e.real = false;
  }
  settle(rt, index);
}

void GraphMemory::reset() noexcept {
  new (&mu_) std::mutex();
  execs_.clear();
  charged_ = Footprint{};
  any_.store(false);
}

}  // namespace hami::vgpu
