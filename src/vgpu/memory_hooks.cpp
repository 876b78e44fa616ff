// Device-memory allocation and free hooks. Every path reserves its charge
// before the driver allocates (so the container can never be over its limit,
// even for an instant), commits it when the driver succeeds, and withdraws it
// when the driver fails. A free of a pointer or handle we never charged goes
// to the driver unchanged. Under CUDA_OVERSUBSCRIBE, the driver's
// out-of-memory for a charge that fits the limit is retried in host memory
// (spill.hpp), on that error path only.
#include <mutex>
#include <optional>

#include "common/log.hpp"
#include "vgpu/capture_state.hpp"
#include "vgpu/charge_size.hpp"
#include "vgpu/hook_decls.hpp"
#include "vgpu/real_driver.hpp"
#include "vgpu/runtime.hpp"
#include "vgpu/spill.hpp"

namespace hami::cuda {
namespace {

using region::UsageKind;
using vgpu::Allocation;
using vgpu::real_cuda;
using vgpu::Runtime;

using vgpu::call_real;

// Records a committed allocation; a table that cannot grow leaves it
// uncharged rather than failing the program's allocation.
void record(vgpu::AllocationTable& table, uint64_t key, Runtime& rt, const Allocation& a) {
  if (!table.insert(key, a)) {
    rt.release(a);
    log::error("out of host memory: an allocation of device memory is not accounted");
  }
}

// Records an allocation spill.hpp placed in host memory: charged as any other,
// and counted as spilled until it is freed (Runtime::release undoes both).
void record_spilled(vgpu::AllocationTable& table, uint64_t key, Runtime& rt, int dev,
                    uint64_t charge) {
  rt.change_spilled(dev, charge, true);
  record(table, key, rt, Allocation{dev, UsageKind::kData, charge, Allocation::spilled_marker()});
}

// Whether the driver's answer lets CUDA_OVERSUBSCRIBE place it in host memory.
bool may_spill(const Runtime& rt, CUresult rc) {
  return rc == CUDA_ERROR_OUT_OF_MEMORY && rt.oversubscribe();
}

// The driver's allocation, unless CUDA_OVERSUBSCRIBE wants `bytes` on the host
// already (spill.hpp: the device's reserve): then the answer a full GPU gives,
// so the caller's error path places it there.
template <class Allocate>
CUresult device_or_full(const Runtime& rt, size_t bytes, int ordinal, Allocate&& allocate) {
  if (rt.oversubscribe() && vgpu::spill::leaves_too_little(bytes, ordinal)) [[unlikely]] {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return allocate();
}

// For what a program asks for explicitly (managed memory): never moved.
constexpr auto kNoSpill = [] { return CUDA_ERROR_OUT_OF_MEMORY; };

// The common shape of an allocation whose size is known up front: reserve the
// charge, let the driver allocate, withdraw it if the driver fails (unless
// `spill` places it in host memory), otherwise record it against the key the
// driver returned.
template <class Allocate, class Key, class Spill>
CUresult charged_alloc(Runtime& rt, vgpu::AllocationTable& table, int dev, uint64_t charge,
                       Allocate&& allocate, Key&& key, Spill&& spill) {
  rt.settle(dev);
  if (!rt.reserve(dev, UsageKind::kData, charge)) return CUDA_ERROR_OUT_OF_MEMORY;
  const CUresult rc = allocate();
  if (rc != CUDA_SUCCESS) [[unlikely]] {
    if (may_spill(rt, rc) && spill() == CUDA_SUCCESS) {
      record_spilled(table, key(), rt, dev, charge);
      return CUDA_SUCCESS;
    }
    rt.release(dev, UsageKind::kData, charge);
    return rc;
  }
  record(table, key(), rt, Allocation{dev, UsageKind::kData, charge});
  return rc;
}

template <class Free>
CUresult free_tracked(vgpu::AllocationTable& table, uint64_t key, Runtime* rt, Free&& real_free) {
  // Erase before the driver frees, so an address the driver hands straight to
  // another thread is never confused with ours; put it back if the free fails.
  std::optional<Allocation> charged = rt != nullptr ? table.erase(key) : std::nullopt;
  const CUresult rc = real_free();
  if (charged) {
    if (rc == CUDA_SUCCESS) {
      rt->release(*charged);
    } else {
      table.insert(key, *charged);
    }
  }
  return rc;
}

// Stream-ordered allocations come from a pool (the current device's, or the
// one named), possibly on another device than the current context's. The
// request is reserved while the driver allocates; then the pool's charge is
// settled on what it actually reserved (pool_charges.hpp). A driver that cannot
// report pool reservations gets each allocation charged at its size instead.
//
// Into a capturing stream the allocation is a node of the graph being
// captured and takes no memory until the graph is uploaded or launched
// (graph_memory.hpp charges it then): it goes to the driver untouched, with
// no query that could invalidate the capture.
template <class Alloc, class Free>
CUresult alloc_async(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream stream,
                     bool ptsz, Alloc&& real_alloc, Free real_free) {
  Runtime* rt = Runtime::accounting();
  if (rt == nullptr || bytesize == 0) return real_alloc();
  if (vgpu::capture::active() && vgpu::capture::stream_capturing(stream, ptsz)) return real_alloc();
  const auto& cu = real_cuda();
  CUdevice ordinal = -1;
  const int guess = rt->current_device(&ordinal);
  if (pool == nullptr && cu.cuDeviceGetMemPool != nullptr && ordinal >= 0) {
    cu.cuDeviceGetMemPool(&pool, ordinal);
  }
  const uint64_t request = vgpu::charge_for_linear(bytesize);
  rt->settle(guess);
  if (!rt->reserve(guess, UsageKind::kData, request)) return CUDA_ERROR_OUT_OF_MEMORY;
  const CUresult rc = device_or_full(*rt, bytesize, -1, real_alloc);
  if (rc != CUDA_SUCCESS) [[unlikely]] {
    // Spilled memory is managed, not the pool's: charged at the request, on
    // the current context's device, and freed by free_async accordingly.
    if (may_spill(*rt, rc) && vgpu::spill::linear(dptr, bytesize) == CUDA_SUCCESS) {
      record_spilled(rt->pointers(), *dptr, *rt, guess, request);
      return CUDA_SUCCESS;
    }
    rt->release(guess, UsageKind::kData, request);
    return rc;
  }
  rt->release(guess, UsageKind::kData, request);

  int dev = guess;
  int where = -1;
  if (cu.cuPointerGetAttribute != nullptr &&
      cu.cuPointerGetAttribute(&where, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, *dptr) ==
          CUDA_SUCCESS &&
      where != ordinal) {
    dev = rt->devices().index_for_ordinal(where);
  }
  auto outcome = pool != nullptr ? rt->pools().reconcile(*rt, pool, dev, /*may_refuse=*/true)
                                 : vgpu::PoolCharges::kUnsupported;
  if (outcome == vgpu::PoolCharges::kUnsupported) {
    if (rt->reserve(dev, UsageKind::kData, request)) {
      record(rt->pointers(), *dptr, *rt, Allocation{dev, UsageKind::kData, request});
      return rc;
    }
    outcome = vgpu::PoolCharges::kRefused;
  }
  if (outcome == vgpu::PoolCharges::kRefused) {
    real_free(*dptr, stream);
    if (pool != nullptr) rt->pools().reconcile(*rt, pool, dev, /*may_refuse=*/false);
    *dptr = 0;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  record(rt->pointers(), *dptr, *rt, Allocation{dev, UsageKind::kData, 0, pool});
  return rc;
}

// A free captured into a graph happens when the graph runs, if ever: until
// then the memory stays, and so does its charge.
template <class Free>
CUresult free_async(CUdeviceptr dptr, CUstream stream, bool ptsz, Free&& real_free) {
  Runtime* rt = dptr != 0 ? Runtime::accounting() : nullptr;
  if (rt == nullptr) return real_free();
  if (vgpu::capture::active() && vgpu::capture::stream_capturing(stream, ptsz)) return real_free();
  const std::optional<Allocation> a = rt->pointers().find(dptr);
  if (a && a->spilled()) [[unlikely]] {
    return free_tracked(rt->pointers(), dptr, rt,
                        [&] { return vgpu::spill::free_stream_ordered(dptr, stream); });
  }
  const CUresult rc = free_tracked(rt->pointers(), dptr, rt, real_free);
  if (rc == CUDA_SUCCESS && a && a->pool != nullptr) {
    rt->pools().reconcile(*rt, a->pool, a->device, /*may_refuse=*/false);
  }
  return rc;
}

}  // namespace

extern "C" {

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) noexcept {
  const auto& cu = real_cuda();
  Runtime* rt = Runtime::accounting();
  if (rt == nullptr || bytesize == 0) return call_real(cu.cuMemAlloc_v2, dptr, bytesize);
  return charged_alloc(
      *rt, rt->pointers(), rt->current_device(nullptr), vgpu::charge_for_linear(bytesize),
      [&] {
        return device_or_full(*rt, bytesize, -1,
                              [&] { return call_real(cu.cuMemAlloc_v2, dptr, bytesize); });
      },
      [&] { return *dptr; }, [&] { return vgpu::spill::linear(dptr, bytesize); });
}

CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch, size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes) noexcept {
  const auto& cu = real_cuda();
  Runtime* rt = Runtime::accounting();
  if (rt == nullptr || WidthInBytes == 0 || Height == 0) {
    return call_real(cu.cuMemAllocPitch_v2, dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
  }
  // The pitch is the driver's choice; reserve for a 512-byte-aligned row, then
  // settle on what it actually chose.
  const int dev = rt->current_device(nullptr);
  const uint64_t estimate = vgpu::charge_for_linear(vgpu::round_up(WidthInBytes, 512) * Height);
  rt->settle(dev);
  if (!rt->reserve(dev, UsageKind::kData, estimate)) return CUDA_ERROR_OUT_OF_MEMORY;
  const CUresult rc = device_or_full(*rt, estimate, -1, [&] {
    return call_real(cu.cuMemAllocPitch_v2, dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
  });
  if (rc != CUDA_SUCCESS) [[unlikely]] {
    // In host memory the pitch is ours to choose: the 512-byte rows reserved.
    const size_t pitch = vgpu::round_up(WidthInBytes, 512);
    if (may_spill(*rt, rc) && pPitch != nullptr &&
        vgpu::spill::linear(dptr, pitch * Height) == CUDA_SUCCESS) {
      *pPitch = pitch;
      record_spilled(rt->pointers(), *dptr, *rt, dev, estimate);
      return CUDA_SUCCESS;
    }
    rt->release(dev, UsageKind::kData, estimate);
    return rc;
  }
  const uint64_t actual = vgpu::charge_for_linear(uint64_t{*pPitch} * Height);
  if (!rt->adjust(dev, UsageKind::kData, estimate, actual)) {
    call_real(cu.cuMemFree_v2, *dptr);
    rt->release(dev, UsageKind::kData, estimate);
    *dptr = 0;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  record(rt->pointers(), *dptr, *rt, Allocation{dev, UsageKind::kData, actual});
  return rc;
}

// Managed memory may migrate to the host, but it can all be resident on the
// device at once, so the device is charged the whole size.
CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) noexcept {
  const auto& cu = real_cuda();
  Runtime* rt = Runtime::accounting();
  if (rt == nullptr || bytesize == 0) return call_real(cu.cuMemAllocManaged, dptr, bytesize, flags);
  return charged_alloc(
      *rt, rt->pointers(), rt->current_device(nullptr), vgpu::charge_for_linear(bytesize),
      [&] { return call_real(cu.cuMemAllocManaged, dptr, bytesize, flags); }, [&] { return *dptr; },
      kNoSpill);
}

CUresult cuMemFree_v2(CUdeviceptr dptr) noexcept {
  const auto& cu = real_cuda();
  Runtime* rt = dptr != 0 ? Runtime::accounting() : nullptr;
  if (rt == nullptr) return call_real(cu.cuMemFree_v2, dptr);
  return free_tracked(rt->pointers(), dptr, rt, [&] { return call_real(cu.cuMemFree_v2, dptr); });
}

CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) noexcept {
  const auto& cu = real_cuda();
  return alloc_async(
      dptr, bytesize, nullptr, hStream, false,
      [&] { return call_real(cu.cuMemAllocAsync, dptr, bytesize, hStream); }, cu.cuMemFreeAsync);
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) noexcept {
  const auto& cu = real_cuda();
  return alloc_async(
      dptr, bytesize, nullptr, hStream, true,
      [&] { return call_real(cu.cuMemAllocAsync_ptsz, dptr, bytesize, hStream); },
      cu.cuMemFreeAsync_ptsz);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                 CUstream hStream) noexcept {
  const auto& cu = real_cuda();
  return alloc_async(
      dptr, bytesize, pool, hStream, false,
      [&] { return call_real(cu.cuMemAllocFromPoolAsync, dptr, bytesize, pool, hStream); },
      cu.cuMemFreeAsync);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream hStream) noexcept {
  const auto& cu = real_cuda();
  return alloc_async(
      dptr, bytesize, pool, hStream, true,
      [&] { return call_real(cu.cuMemAllocFromPoolAsync_ptsz, dptr, bytesize, pool, hStream); },
      cu.cuMemFreeAsync_ptsz);
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) noexcept {
  const auto& cu = real_cuda();
  return free_async(dptr, hStream, false,
                    [&] { return call_real(cu.cuMemFreeAsync, dptr, hStream); });
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) noexcept {
  const auto& cu = real_cuda();
  return free_async(dptr, hStream, true,
                    [&] { return call_real(cu.cuMemFreeAsync_ptsz, dptr, hStream); });
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) noexcept {
  const auto& cu = real_cuda();
  const CUresult rc = call_real(cu.cuMemPoolTrimTo, pool, minBytesToKeep);
  Runtime* rt = Runtime::accounting();
  if (rc == CUDA_SUCCESS && rt != nullptr) rt->pools().shrink_all(*rt);
  return rc;
}

CUresult cuMemPoolDestroy(CUmemoryPool pool) noexcept {
  const auto& cu = real_cuda();
  const CUresult rc = call_real(cu.cuMemPoolDestroy, pool);
  Runtime* rt = Runtime::accounting();
  if (rc == CUDA_SUCCESS && rt != nullptr) rt->pools().forget(*rt, pool);
  return rc;
}

// Virtual memory management (PyTorch's expandable segments, NCCL): physical
// memory is created here, on the device the properties name, and lives until
// its handle is released and its last mapping unmapped (vmm_tracker.hpp).
CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                     const CUmemAllocationProp* prop, unsigned long long flags) noexcept {
  const auto& cu = real_cuda();
  Runtime* rt = Runtime::accounting();
  if (rt == nullptr || prop == nullptr || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      size == 0 || handle == nullptr) {
    return call_real(cu.cuMemCreate, handle, size, prop, flags);
  }
  const int dev = rt->devices().index_for_ordinal(prop->location.id);
  rt->settle(dev);
  if (!rt->reserve(dev, UsageKind::kData, size)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = device_or_full(*rt, size, prop->location.id, [&] {
    return call_real(cu.cuMemCreate, handle, size, prop, flags);
  });
  bool spilled = false;
  if (rc != CUDA_SUCCESS && may_spill(*rt, rc) &&
      vgpu::spill::vmm(handle, size, *prop, flags) == CUDA_SUCCESS) {
    rc = CUDA_SUCCESS;
    spilled = true;
    rt->change_spilled(dev, size, true);
  }
  if (rc != CUDA_SUCCESS) {
    rt->release(dev, UsageKind::kData, size);
    return rc;
  }
  const Allocation a{dev, UsageKind::kData, size, spilled ? Allocation::spilled_marker() : nullptr};
  if (!rt->vmm().created(*handle, a)) {
    rt->release(a);
    log::error("out of host memory: an allocation of device memory is not accounted");
  }
  return rc;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) noexcept {
  const auto& cu = real_cuda();
  Runtime* rt = Runtime::accounting();
  if (rt == nullptr) return call_real(cu.cuMemRelease, handle);
  const std::optional<Allocation> now = rt->vmm().before_release(handle);
  const CUresult rc = call_real(cu.cuMemRelease, handle);
  if (rc != CUDA_SUCCESS) {
    rt->vmm().undo_release(handle, now);
  } else if (now) {
    rt->release(*now);
  }
  return rc;
}

// Mapping an imported handle charges it (its memory now lives here too).
CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) noexcept {
  const auto& cu = real_cuda();
  Runtime* rt = Runtime::accounting();
  if (rt == nullptr) return call_real(cu.cuMemMap, ptr, size, offset, handle, flags);
  const std::optional<Allocation> charge = rt->vmm().charge_for_map(handle, size);
  if (charge && !rt->reserve(charge->device, charge->kind, charge->bytes))
    return CUDA_ERROR_OUT_OF_MEMORY;
  const CUresult rc = call_real(cu.cuMemMap, ptr, size, offset, handle, flags);
  if (rc != CUDA_SUCCESS) {
    if (charge) rt->release(*charge);
    return rc;
  }
  rt->vmm().mapped(ptr, size, handle, charge);
  return rc;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) noexcept {
  const auto& cu = real_cuda();
  Runtime* rt = Runtime::accounting();
  if (rt == nullptr) return call_real(cu.cuMemUnmap, ptr, size);
  const vgpu::VmmTracker::Unmapped u = rt->vmm().before_unmap(ptr, size);
  const CUresult rc = call_real(cu.cuMemUnmap, ptr, size);
  if (rc != CUDA_SUCCESS) {
    rt->vmm().undo_unmap(u);
    return rc;
  }
  for (const auto& [h, a] : u.freed)
    rt->release(a);
  return rc;
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* osHandle,
                                        CUmemAllocationHandleType type) noexcept {
  const auto& cu = real_cuda();
  const CUresult rc = call_real(cu.cuMemImportFromShareableHandle, handle, osHandle, type);
  Runtime* rt = Runtime::accounting();
  if (rc != CUDA_SUCCESS || rt == nullptr || handle == nullptr ||
      cu.cuMemGetAllocationPropertiesFromHandle == nullptr)
    return rc;
  CUmemAllocationProp prop{};
  if (cu.cuMemGetAllocationPropertiesFromHandle(&prop, *handle) == CUDA_SUCCESS &&
      prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
    rt->vmm().imported(*handle, rt->devices().index_for_ordinal(prop.location.id));
  }
  return rc;
}

}  // extern "C"

namespace {

// Arrays: their layout (tiling, padding, packed mip levels) is the driver's
// business, so reserve an estimate from the descriptor, create, then settle on
// the driver's own figure: cuArrayGetMemoryRequirements where it answers (only
// for deferred-mapping arrays), otherwise what NVML saw the creation commit.
template <class Handle, class Create, class Requirements, class Destroy>
CUresult create_array(Handle* out, uint64_t estimate, Create&& create, Requirements requirements,
                      Destroy destroy) {
  Runtime* rt = Runtime::accounting();
  if (rt == nullptr) return create();
  CUdevice ordinal = -1;
  const int dev = rt->current_device(&ordinal);
  if (!rt->reserve(dev, UsageKind::kData, estimate)) return CUDA_ERROR_OUT_OF_MEMORY;
  std::unique_lock measuring(rt->probe().mutex());
  const auto before = rt->probe().sample(*rt, dev);
  const CUresult rc = create();
  if (rc != CUDA_SUCCESS || out == nullptr) {
    rt->release(dev, UsageKind::kData, estimate);
    return rc;
  }
  uint64_t actual = estimate;
  CUDA_ARRAY_MEMORY_REQUIREMENTS req{};
  if (requirements != nullptr && requirements(&req, *out, ordinal) == CUDA_SUCCESS &&
      req.size != 0) {
    actual = req.size;
  } else if (auto grown = vgpu::ProcessMemoryProbe::grown(before, rt->probe().sample(*rt, dev))) {
    actual = *grown;
  }
  measuring.unlock();
  if (!rt->adjust(dev, UsageKind::kData, estimate, actual)) {
    destroy(*out);
    rt->release(dev, UsageKind::kData, estimate);
    *out = nullptr;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  record(rt->arrays(), reinterpret_cast<uint64_t>(*out), *rt,
         Allocation{dev, UsageKind::kData, actual});
  return rc;
}

template <class Handle, class Destroy>
CUresult destroy_array(Handle h, Destroy&& destroy) {
  Runtime* rt = h != nullptr ? Runtime::accounting() : nullptr;
  if (rt == nullptr) return destroy();
  return free_tracked(rt->arrays(), reinterpret_cast<uint64_t>(h), rt, destroy);
}

}  // namespace

extern "C" {

CUresult cuArrayCreate_v2(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR* desc) noexcept {
  const auto& cu = real_cuda();
  if (desc == nullptr) return call_real(cu.cuArrayCreate_v2, pHandle, desc);
  return create_array(
      pHandle, vgpu::estimate_array(*desc),
      [&] { return call_real(cu.cuArrayCreate_v2, pHandle, desc); },
      cu.cuArrayGetMemoryRequirements, [&](CUarray a) { call_real(cu.cuArrayDestroy, a); });
}

CUresult cuArray3DCreate_v2(CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* desc) noexcept {
  const auto& cu = real_cuda();
  if (desc == nullptr) return call_real(cu.cuArray3DCreate_v2, pHandle, desc);
  return create_array(
      pHandle, vgpu::estimate_array(*desc),
      [&] { return call_real(cu.cuArray3DCreate_v2, pHandle, desc); },
      cu.cuArrayGetMemoryRequirements, [&](CUarray a) { call_real(cu.cuArrayDestroy, a); });
}

CUresult cuArrayDestroy(CUarray hArray) noexcept {
  const auto& cu = real_cuda();
  return destroy_array(hArray, [&] { return call_real(cu.cuArrayDestroy, hArray); });
}

CUresult cuMipmappedArrayCreate(CUmipmappedArray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* desc,
                                unsigned int numMipmapLevels) noexcept {
  const auto& cu = real_cuda();
  if (desc == nullptr) return call_real(cu.cuMipmappedArrayCreate, pHandle, desc, numMipmapLevels);
  const uint64_t estimate = vgpu::estimate_mipmapped_array(*desc, numMipmapLevels);
  return create_array(
      pHandle, estimate,
      [&] { return call_real(cu.cuMipmappedArrayCreate, pHandle, desc, numMipmapLevels); },
      cu.cuMipmappedArrayGetMemoryRequirements,
      [&](CUmipmappedArray a) { call_real(cu.cuMipmappedArrayDestroy, a); });
}

CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray) noexcept {
  const auto& cu = real_cuda();
  return destroy_array(hMipmappedArray,
                       [&] { return call_real(cu.cuMipmappedArrayDestroy, hMipmappedArray); });
}

}  // extern "C"
}  // namespace hami::cuda
