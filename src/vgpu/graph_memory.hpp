#pragma once
// Charges the memory CUDA graphs allocate: stream-ordered allocations
// captured into a graph and memory-alloc nodes (cuGraphAddMemAllocNode).
//
// The driver makes a graph's allocations real when the executable graph is
// uploaded or first launched, not at capture or instantiation, and keeps
// them in the device's graph memory pool, across launches and after the
// graph is destroyed, until cuDeviceGraphMemTrim hands back what no
// executable graph is using (tests/gpu/results/driver-facts-h100.txt). So:
//   - at instantiation, an executable graph's footprint is read from its
//     allocation nodes (child graphs included), per device;
//   - before a graph whose memory is not real yet is uploaded or launched,
//     its footprint is reserved: a graph that does not fit gets
//     CUDA_ERROR_OUT_OF_MEMORY and never runs;
//   - after it, and after a trim, the charge is settled on the pool's
//     reserved memory (CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), which is what
//     the driver holds for this process.
// Nothing here runs inside a capture: a graph launched into a capturing
// stream becomes a node of another graph and makes nothing real.
//
//   rt.graph_memory().instantiated(rt, graph, exec);
//   return rt.graph_memory().making_real(rt, exec, stream, ptsz, [&] { return launch(); });

#include <array>
#include <atomic>
#include <mutex>
#include <unordered_map>

#include "common/function_ref.hpp"
#include "region/region.hpp"
#include "vgpu/cuda_abi.hpp"

namespace hami::vgpu {

class Runtime;

class GraphMemory {
 public:
  // Per state-file device, what a graph allocates.
  using Footprint = std::array<uint64_t, region::kMaxDevices>;

  // The allocation nodes of `graph`; all zero when it allocates nothing or
  // the driver cannot say.
  static Footprint footprint_of(Runtime& rt, cuda::CUgraph graph) noexcept;

  // Remembers `exec` if it allocates; `made_real` when instantiation also
  // uploaded it.
  void instantiated(Runtime& rt, cuda::CUgraphExec exec, const Footprint& f,
                    bool made_real) noexcept;
  // Whether any remembered executable graph allocates (one load).
  bool any() const noexcept { return any_.load(std::memory_order_acquire); }

  // Runs `run` (an upload or a launch of `exec`), charging the graph's memory
  // as it becomes real; CUDA_ERROR_OUT_OF_MEMORY without running it when that
  // does not fit the limit.
  cuda::CUresult making_real(Runtime& rt, cuda::CUgraphExec exec, cuda::CUstream stream, bool ptsz,
                             FunctionRef<cuda::CUresult()> run) noexcept;
  // The same for an instantiation that uploads (CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD).
  cuda::CUresult instantiate_uploading(Runtime& rt, const Footprint& f,
                                       FunctionRef<cuda::CUresult()> run) noexcept;

  // cuGraphExecDestroy: its memory stays in the pool until a trim.
  void forget(cuda::CUgraphExec exec) noexcept;
  // After cuDeviceGraphMemTrim of CUDA device `ordinal`.
  void trimmed(Runtime& rt, cuda::CUdevice ordinal) noexcept;

  void reset() noexcept;

 private:
  struct Exec {
    Footprint footprint{};
    bool real = false;
  };
  // Reserves `f` on every device; false (nothing held) if one does not fit.
  static bool reserve_all(Runtime& rt, const Footprint& f) noexcept;
  static void release_all(Runtime& rt, const Footprint& f) noexcept;
  // Settles the charge of device `index` on the driver's figure.
  void settle(Runtime& rt, int index) noexcept;
  void settle_all(Runtime& rt, const Footprint& f) noexcept;

  std::mutex mu_;
  std::unordered_map<cuda::CUgraphExec, Exec> execs_;
  Footprint charged_{};  // what the pool's reserve is charged, per device
  std::atomic<bool> any_{false};
};

}  // namespace hami::vgpu
