#pragma once
// The lifetime of VMM memory (cuMemCreate, PyTorch's expandable segments,
// NCCL's buffers with NCCL_CUMEM_ENABLE): the driver frees a handle's memory
// only once the handle is released AND its last mapping is unmapped, in
// either order (tests/gpu/results/driver-facts-h100.txt). So a handle's charge
// is given back at the later of the two, never at cuMemRelease of a handle
// that is still mapped.
//
// A handle imported from another process (cuMemImportFromShareableHandle)
// keeps that memory alive too, so it is charged to the importer as well, at
// the size it maps, from its first mapping until it is released and unmapped:
// memory shared between two processes of one container counts twice while
// both hold it, never zero times after its creator lets go.
//
// Bookkeeping happens before the driver call it describes and is undone if
// the call fails, so a handle or address the driver hands straight to another
// thread is never confused with the old one.
//
//   vmm.created(handle, {dev, UsageKind::kData, size});
//   if (auto a = vmm.before_release(handle)) charge_back = *a;   // not mapped: free now
//   for (const Allocation& a : vmm.before_unmap(ptr, size)) rt.release(a);

#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "vgpu/allocation_table.hpp"

namespace hami::vgpu {

class VmmTracker {
 public:
  // A handle cuMemCreate made, charged `a`. False when it cannot be recorded
  // (out of host memory): the caller gives the charge back.
  bool created(uint64_t handle, const Allocation& a) noexcept;
  // A handle imported onto state-file device `device`; charged at first mapping.
  void imported(uint64_t handle, int device) noexcept;

  // What mapping `size` bytes of `handle` must newly charge (an imported
  // handle's first mapping): reserve it before cuMemMap.
  std::optional<Allocation> charge_for_map(uint64_t handle, size_t size) noexcept;
  // After a successful cuMemMap; `charged` is what charge_for_map returned.
  void mapped(cuda::CUdeviceptr ptr, size_t size, uint64_t handle,
              const std::optional<Allocation>& charged) noexcept;

  // Before cuMemRelease: the charge to give back once the driver agrees, when
  // nothing maps the handle; otherwise the handle is marked released and its
  // charge waits for the last unmap. undo_release() if the driver refuses.
  std::optional<Allocation> before_release(uint64_t handle) noexcept;
  void undo_release(uint64_t handle, const std::optional<Allocation>& taken) noexcept;

  // Before cuMemUnmap of [ptr, ptr + size): the charges of released handles
  // whose last mapping this removes. undo_unmap() if the driver refuses.
  struct Unmapped {
    std::vector<std::pair<cuda::CUdeviceptr, std::pair<uint64_t, size_t>>> mappings;
    std::vector<std::pair<uint64_t, Allocation>> freed;
  };
  Unmapped before_unmap(cuda::CUdeviceptr ptr, size_t size) noexcept;
  void undo_unmap(const Unmapped& u) noexcept;

  // After fork: the child inherits none of the parent's handles.
  void reset() noexcept;

 private:
  struct Handle {
    Allocation charge;
    int maps = 0;
    bool released = false;
    bool imported = false;
  };
  std::mutex mu_;
  std::unordered_map<uint64_t, Handle> handles_;
  // Mapped address -> (handle, size).
  std::map<cuda::CUdeviceptr, std::pair<uint64_t, size_t>> mappings_;
};

}  // namespace hami::vgpu
