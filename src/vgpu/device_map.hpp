#pragma once
// Which physical GPU a CUDA ordinal or an NVML handle is, as an index into the
// state file's device table. That table lists the container's GPUs by UUID in
// NVML order, which every process of the container agrees on whatever its own
// CUDA_VISIBLE_DEVICES says; limits named CUDA_DEVICE_MEMORY_LIMIT_<i> refer to
// that order. A process maps its ordinals through the driver's own UUIDs, so
// every form of CUDA_VISIBLE_DEVICES (indices, GPU-<uuid>, MIG-<uuid>) lands
// right. A MIG device (docs/mig.md) is the table's MIG-<uuid>: CUDA reports it
// with the same bytes as a GPU UUID, and NVML inside the container lists the
// GPU it is on, which maps to it too.
// When the limits file lists the container's GPUs (set_trusted), that list is
// the table: the state file only mirrors it, so a tenant rewriting the file's
// table cannot move its charges onto another index or off every limit.
//
//   int d = map.index_for_ordinal(ordinal);   // -1: not a device we can account
//   region.slot(s).add_usage(d, ...);

#include <array>
#include <atomic>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "nvml/nvml_abi.hpp"
#include "region/region.hpp"
#include "vgpu/cuda_abi.hpp"

namespace hami::vgpu {

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as NVML prints it.
std::string format_gpu_uuid(const cuda::CUuuid& uuid);

class DeviceMap {
 public:
  explicit DeviceMap(region::Region& region) : region_(region) { reset(); }

  int index_for_ordinal(cuda::CUdevice ordinal) noexcept;
  int index_for_nvml(cuda::nvmlDevice_t device) noexcept;
  // The CUDA ordinal of state-file device `index` in this process, or -1
  // when none of this process's devices is that GPU. Not for hot paths.
  cuda::CUdevice ordinal_for_index(int index) noexcept;
  // UUID of a state-file device, e.g. to find its NVML handle.
  std::string uuid(int index) const;
  // The container's GPUs in NVML order from the limits file; written into the
  // state file's table (for the node agent and upstream's tools) and, from
  // then on, never read back from it.
  void set_trusted(std::vector<std::string> uuids);
  // After fork: ordinals are the same, but keep nothing we learnt from the parent.
  void reset() noexcept;

 private:
  static constexpr int kMaxOrdinals = 64;
  int lookup_or_add(const std::string& uuid);
  void fill_from_nvml();

  region::Region& region_;
  std::mutex mu_;
  std::array<std::atomic<int>, kMaxOrdinals> ordinal_cache_;
  bool nvml_tried_ = false;
  std::vector<std::string> trusted_;  // set once, before any lookup
  // NVML handles of the GPUs the trusted MIG devices are on, and the index
  // each maps to; filled on first lookup of each handle (under mu_).
  std::vector<std::pair<cuda::nvmlDevice_t, int>> mig_parents_;
  int mig_parent_index(cuda::nvmlDevice_t device);
};

}  // namespace hami::vgpu
