// libcuda.so.1 double: the driver-API functions libvgpu.so and its tests use,
// with real semantics where they matter to the library (current context per
// thread, primary-context retain counts, CUDA_VISIBLE_DEVICES, version- and
// flag-aware cuGetProcAddress, allocation granularity, failures). Kernel
// launches (plain, Ex, cooperative, graphs; each with its per-thread-stream
// _ptsz variant) run on a simulated GPU in real time: one engine per process,
// SIMGPU_KERNEL_NS / SIMGPU_GRAPH_NS per launch, with streams, events
// (cuEventQuery is CUDA_ERROR_NOT_READY until the engine reaches the event,
// cuEventElapsedTime measures the engine's time), synchronisation, and stream
// capture with the driver's invalidation rules (see "the GPU" below).
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "sim_core.hpp"
#include "vgpu/cuda_abi.hpp"

using namespace hami::cuda;  // NOLINT

struct CUctx_st {
  int ordinal;
  int physical;
  bool primary;
};
// Pools reserve device memory in 32 MiB granules, as the real driver's do,
// and hand it all back once nothing is allocated from them.
struct CUmemPoolHandle_st {
  int ordinal;
  int physical;
  uint64_t reserved;
  uint64_t used;
};
struct CUarray_st {
  int physical;
  uint64_t bytes;
  bool deferred;
};
struct CUmipmappedArray_st {
  int physical;
  uint64_t bytes;
};
struct CUfunc_st;

namespace {

struct Block {
  int physical;
  uint64_t bytes;
  CUcontext ctx;
  CUmemPoolHandle_st* pool;  // stream-ordered: the pool's reservation backs it
  // Managed memory: `bytes` is what is resident on the device (0: on the host).
  bool managed = false;
  uint64_t size = 0;  // managed: the allocation's size
};

constexpr uint64_t kPoolGranule = 32ull << 20;

struct Process {
  std::mutex mu;
  bool initialized = false;
  std::vector<int> visible;  // ordinal -> physical device
  struct Primary {
    int refs = 0;
    CUctx_st* ctx = nullptr;
  };
  std::vector<Primary> primary;
  std::map<uint64_t, Block> blocks;     // device pointers
  std::map<uint64_t, Block> handles;    // VMM handles
  std::set<uint64_t> host_handles;      // VMM handles of host memory
  std::map<uint64_t, uint64_t> ranges;  // reserved address ranges: base -> size
  uint64_t next_handle = 1;
  std::map<int, CUmemPoolHandle_st*> default_pools;  // per ordinal
};

Process& proc() {
  static Process* p = new Process();
  return *p;
}

thread_local CUctx_st* t_current = nullptr;

// CUDA_VISIBLE_DEVICES as the driver reads it: indices or GPU-<uuid> prefixes,
// stopping at the first entry that names no device.
std::vector<int> visible_devices() {
  simgpu::State& st = simgpu::state();
  std::vector<int> out;
  const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
  if (env == nullptr) {
    for (uint32_t i = 0; i < st.device_count; ++i)
      out.push_back(static_cast<int>(i));
    return out;
  }
  std::string s = env;
  size_t pos = 0;
  while (pos <= s.size() && !s.empty()) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    std::string item = s.substr(pos, end - pos);
    pos = end + 1;
    int found = -1;
    if (item.rfind("GPU-", 0) == 0) {
      for (uint32_t i = 0; i < st.device_count; ++i) {
        if (std::strncmp(st.devices[i].uuid, item.c_str(), item.size()) == 0)
          found = static_cast<int>(i);
      }
    } else if (!item.empty() && item.find_first_not_of("0123456789") == std::string::npos) {
      const int idx = std::atoi(item.c_str());
      if (idx < static_cast<int>(st.device_count)) found = idx;
    }
    if (found < 0) break;
    out.push_back(found);
    if (end == s.size()) break;
  }
  return out;
}

CUresult check_ordinal(CUdevice dev, int* physical) {
  Process& p = proc();
  if (!p.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (dev < 0 || dev >= static_cast<int>(p.visible.size())) return CUDA_ERROR_INVALID_DEVICE;
  if (physical != nullptr) *physical = p.visible[dev];
  return CUDA_SUCCESS;
}

int ordinal_of(int physical) {
  Process& p = proc();
  for (size_t i = 0; i < p.visible.size(); ++i) {
    if (p.visible[i] == physical) return static_cast<int>(i);
  }
  return -1;
}

CUresult alloc_block(std::map<uint64_t, Block>& table, int physical, uint64_t bytes, uint64_t key,
                     const char* fn) {
  if (simgpu::should_fail(fn)) return CUDA_ERROR_OUT_OF_MEMORY;
  if (!simgpu::take(physical, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  table[key] = Block{physical, bytes, t_current, nullptr};
  return CUDA_SUCCESS;
}

void pool_release_idle(CUmemPoolHandle_st* pool, uint64_t keep) {
  const uint64_t need =
      (std::max(pool->used, keep) + kPoolGranule - 1) / kPoolGranule * kPoolGranule;
  if (pool->reserved > need) {
    simgpu::give(pool->physical, pool->reserved - need);
    pool->reserved = need;
  }
}

CUresult free_block(std::map<uint64_t, Block>& table, uint64_t key) {
  auto it = table.find(key);
  if (it == table.end()) return CUDA_ERROR_INVALID_VALUE;
  if (CUmemPoolHandle_st* pool = it->second.pool) {
    pool->used -= it->second.bytes;
    if (pool->used == 0) pool_release_idle(pool, 0);
  } else {
    simgpu::give(it->second.physical, it->second.bytes);
  }
  table.erase(it);
  return CUDA_SUCCESS;
}

CUmemPoolHandle_st* default_pool(int ordinal, int physical) {
  auto& slot = proc().default_pools[ordinal];
  if (slot == nullptr) slot = new CUmemPoolHandle_st{ordinal, physical, 0, 0};
  return slot;
}

CUresult pool_alloc(CUdeviceptr* dptr, uint64_t bytes, CUmemPoolHandle_st* pool, const char* fn) {
  if (dptr == nullptr || bytes == 0 || pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(proc().mu);
  if (simgpu::should_fail(fn)) return CUDA_ERROR_OUT_OF_MEMORY;
  const uint64_t g = simgpu::granule(bytes);
  while (pool->used + g > pool->reserved) {
    if (!simgpu::take(pool->physical, kPoolGranule)) return CUDA_ERROR_OUT_OF_MEMORY;
    pool->reserved += kPoolGranule;
  }
  pool->used += g;
  const uint64_t addr = simgpu::next_address(bytes);
  proc().blocks[addr] = Block{pool->physical, g, t_current, pool};
  *dptr = addr;
  return CUDA_SUCCESS;
}

// Frees everything a destroyed context owned.
void drop_context(CUcontext ctx) {
  for (auto it = proc().blocks.begin(); it != proc().blocks.end();) {
    if (it->second.ctx == ctx && it->second.pool == nullptr) {
      simgpu::give(it->second.physical, it->second.bytes);
      it = proc().blocks.erase(it);
    } else {
      ++it;
    }
  }
}

CUresult linear_alloc(CUdeviceptr* dptr, uint64_t bytes, int physical, const char* fn) {
  if (dptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(proc().mu);
  const uint64_t addr = simgpu::next_address(bytes);
  const CUresult rc = alloc_block(proc().blocks, physical, simgpu::granule(bytes), addr, fn);
  if (rc == CUDA_SUCCESS) *dptr = addr;
  return rc;
}

CUresult current_physical(int* physical) {
  if (!proc().initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (t_current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *physical = t_current->physical;
  return CUDA_SUCCESS;
}

// Rows padded to 512 bytes, whole 2 MiB pages: a layout libvgpu cannot derive
// from the descriptor, as with the real driver.
uint64_t array_bytes(size_t w, size_t h, size_t d, int format, unsigned channels) {
  uint64_t elem = (format == 0x01 || format == 0x08)                     ? 1
                  : (format == 0x02 || format == 0x09 || format == 0x10) ? 2
                                                                         : 4;
  const uint64_t row = (uint64_t{w} * (channels ? channels : 1) * elem + 511) / 512 * 512;
  const uint64_t n = row * (h ? h : 1) * (d ? d : 1);
  return (n + (2ull << 20) - 1) / (2ull << 20) * (2ull << 20);
}

CUresult new_context(CUcontext* pctx, CUdevice dev) {
  int physical = 0;
  if (CUresult rc = check_ordinal(dev, &physical); rc != CUDA_SUCCESS) return rc;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(proc().mu);
  if (simgpu::should_fail("cuCtxCreate") || !simgpu::take(physical, simgpu::state().context_size)) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  auto* ctx = new CUctx_st{dev, physical, false};
  t_current = ctx;
  *pctx = ctx;
  return CUDA_SUCCESS;
}

}  // namespace

extern "C" {

CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  Process& p = proc();
  std::lock_guard lock(p.mu);
  if (!p.initialized) {
    p.visible = visible_devices();
    p.primary.assign(p.visible.size(), {});
    p.initialized = true;
  }
  return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int* v) {
  if (v == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *v = 13000;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int* count) {
  if (!proc().initialized) return CUDA_ERROR_NOT_INITIALIZED;
  *count = static_cast<int>(proc().visible.size());
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* dev, int ordinal) {
  if (CUresult rc = check_ordinal(ordinal, nullptr); rc != CUDA_SUCCESS) return rc;
  *dev = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  int physical = 0;
  if (CUresult rc = check_ordinal(dev, &physical); rc != CUDA_SUCCESS) return rc;
  std::snprintf(name, static_cast<size_t>(len), "%s", simgpu::state().devices[physical].name);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  int physical = 0;
  if (CUresult rc = check_ordinal(dev, &physical); rc != CUDA_SUCCESS) return rc;
  simgpu::uuid_bytes(simgpu::state().devices[physical],
                     reinterpret_cast<unsigned char*>(uuid->bytes));
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  return cuDeviceGetUuid_v2(uuid, dev);
}

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  int physical = 0;
  if (CUresult rc = check_ordinal(dev, &physical); rc != CUDA_SUCCESS) return rc;
  *bytes = simgpu::state().devices[physical].total;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  int physical = 0;
  if (CUresult rc = check_ordinal(dev, &physical); rc != CUDA_SUCCESS) return rc;
  std::lock_guard lock(proc().mu);
  auto& pr = proc().primary[dev];
  if (pr.refs == 0) {
    if (simgpu::should_fail("cuDevicePrimaryCtxRetain") ||
        !simgpu::take(physical, simgpu::state().context_size)) {
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (pr.ctx == nullptr) pr.ctx = new CUctx_st{dev, physical, true};
  }
  ++pr.refs;
  *pctx = pr.ctx;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  int physical = 0;
  if (CUresult rc = check_ordinal(dev, &physical); rc != CUDA_SUCCESS) return rc;
  std::lock_guard lock(proc().mu);
  auto& pr = proc().primary[dev];
  if (pr.refs == 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (--pr.refs == 0) {
    drop_context(pr.ctx);
    simgpu::give(physical, simgpu::state().context_size);
  }
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  return cuDevicePrimaryCtxRelease_v2(dev);
}

CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  int physical = 0;
  if (CUresult rc = check_ordinal(dev, &physical); rc != CUDA_SUCCESS) return rc;
  std::lock_guard lock(proc().mu);
  auto& pr = proc().primary[dev];
  if (pr.refs > 0) {
    drop_context(pr.ctx);
    simgpu::give(physical, simgpu::state().context_size);
    pr.refs = 0;
  }
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
  return cuDevicePrimaryCtxReset_v2(dev);
}

CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int, CUdevice dev) {
  return new_context(pctx, dev);
}
CUresult cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam*, int, unsigned int, CUdevice dev) {
  return new_context(pctx, dev);
}
CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams*, unsigned int, CUdevice dev) {
  return new_context(pctx, dev);
}

CUresult cuCtxDestroy_v2(CUcontext ctx) {
  if (ctx == nullptr || ctx->primary) return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard lock(proc().mu);
  drop_context(ctx);
  simgpu::give(ctx->physical, simgpu::state().context_size);
  if (t_current == ctx) t_current = nullptr;
  delete ctx;
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
  t_current = ctx;
  return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext* ctx) {
  *ctx = t_current;
  return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice* dev) {
  if (t_current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *dev = t_current->ordinal;
  return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  int physical = 0;
  if (CUresult rc = current_physical(&physical); rc != CUDA_SUCCESS) return rc;
  return linear_alloc(dptr, bytesize, physical, "cuMemAlloc_v2");
}

// The 32-bit API of CUDA < 3.2, kept by real drivers for old binaries.
CUresult cuMemAlloc(unsigned int* dptr, unsigned int bytesize) {
  CUdeviceptr p = 0;
  const CUresult rc = cuMemAlloc_v2(&p, bytesize);
  if (rc == CUDA_SUCCESS) *dptr = static_cast<unsigned int>(p);
  return rc;
}

CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                            unsigned int elem) {
  if (elem != 4 && elem != 8 && elem != 16) return CUDA_ERROR_INVALID_VALUE;
  int physical = 0;
  if (CUresult rc = current_physical(&physical); rc != CUDA_SUCCESS) return rc;
  const size_t p = (width + 2047) / 2048 * 2048;  // coarser than libvgpu's 512-byte guess
  const CUresult rc = linear_alloc(dptr, uint64_t{p} * height, physical, "cuMemAllocPitch_v2");
  if (rc == CUDA_SUCCESS) *pitch = p;
  return rc;
}

// Managed memory is oversubscribable, as on Linux with a Pascal or later GPU:
// it is resident on the device when there is room, on the host otherwise, and
// never fails for lack of device memory (SIMGPU_FAIL can still fail it).
CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  int physical = 0;
  if (CUresult rc = current_physical(&physical); rc != CUDA_SUCCESS) return rc;
  if (dptr == nullptr || bytesize == 0 || (flags != 1 && flags != 2)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard lock(proc().mu);
  if (simgpu::should_fail("cuMemAllocManaged")) return CUDA_ERROR_OUT_OF_MEMORY;
  const uint64_t g = simgpu::granule(bytesize);
  const uint64_t resident = simgpu::take(physical, g) ? g : 0;
  const uint64_t addr = simgpu::next_address(bytesize);
  proc().blocks[addr] = Block{physical, resident, t_current, nullptr, true, bytesize};
  if (resident == 0) simgpu::count("managed:on-host");
  *dptr = addr;
  return CUDA_SUCCESS;
}

// Preferred location the host: resident pages move there (the device memory
// is given back). Accessed-by a device: checked, nothing moves.
CUresult cuMemAdvise(CUdeviceptr ptr, size_t count, int advice, CUdevice device) {
  simgpu::count("cuMemAdvise");
  std::lock_guard lock(proc().mu);
  auto it = proc().blocks.find(ptr);
  if (it == proc().blocks.end() || !it->second.managed || count == 0 || count > it->second.size) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  Block& b = it->second;
  if (advice == CU_MEM_ADVISE_SET_PREFERRED_LOCATION && device == CU_DEVICE_CPU) {
    simgpu::give(b.physical, b.bytes);
    b.bytes = 0;
    simgpu::count("cuMemAdvise:preferred-host");
    return CUDA_SUCCESS;
  }
  if (advice == CU_MEM_ADVISE_SET_ACCESSED_BY) {
    if (device < 0 || static_cast<size_t>(device) >= proc().visible.size())
      return CUDA_ERROR_INVALID_DEVICE;
    simgpu::count("cuMemAdvise:accessed-by");
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_NOT_SUPPORTED;
}

// CUDA 12.2+: the location named instead of a device ordinal.
CUresult cuMemAdvise_v2(CUdeviceptr ptr, size_t count, int advice, CUmemLocation location) {
  simgpu::count("cuMemAdvise_v2");
  if (location.type != CU_MEM_LOCATION_TYPE_HOST && location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return CUDA_ERROR_INVALID_VALUE;
  return cuMemAdvise(ptr, count, advice,
                     location.type == CU_MEM_LOCATION_TYPE_HOST ? CU_DEVICE_CPU : location.id);
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
  if (dptr == 0) return CUDA_SUCCESS;
  std::lock_guard lock(proc().mu);
  return free_block(proc().blocks, dptr);
}

CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream) {
  int physical = 0;
  if (CUresult rc = current_physical(&physical); rc != CUDA_SUCCESS) return rc;
  CUmemPoolHandle_st* pool = nullptr;
  {
    std::lock_guard lock(proc().mu);
    pool = default_pool(t_current->ordinal, physical);
  }
  return pool_alloc(dptr, bytesize, pool, "cuMemAllocAsync");
}
CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream s) {
  return cuMemAllocAsync(dptr, bytesize, s);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream) {
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult rc = check_ordinal(pool->ordinal, nullptr); rc != CUDA_SUCCESS) return rc;
  return pool_alloc(dptr, bytesize, pool, "cuMemAllocFromPoolAsync");
}
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream s) {
  return cuMemAllocFromPoolAsync(dptr, bytesize, pool, s);
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream) {
  return cuMemFree_v2(dptr);
}
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream) {
  return cuMemFree_v2(dptr);
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice dev) {
  int physical = 0;
  if (CUresult rc = check_ordinal(dev, &physical); rc != CUDA_SUCCESS) return rc;
  std::lock_guard lock(proc().mu);
  *pool = default_pool(dev, physical);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) {
  return cuDeviceGetDefaultMemPool(pool, dev);
}

// CUmemPoolProps starts like CUmemAllocationProp: type, handle types, location.
CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemAllocationProp* props) {
  int physical = 0;
  if (pool == nullptr || props == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult rc = check_ordinal(props->location.id, &physical); rc != CUDA_SUCCESS) return rc;
  *pool = new CUmemPoolHandle_st{props->location.id, physical, 0, 0};
  return CUDA_SUCCESS;
}

CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(proc().mu);
  simgpu::give(pool->physical, pool->reserved);
  pool->reserved = 0;
  return CUDA_SUCCESS;
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep) {
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(proc().mu);
  pool_release_idle(pool, keep);
  return CUDA_SUCCESS;
}

CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
  if (pool == nullptr || value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (attr != CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) return CUDA_ERROR_NOT_SUPPORTED;
  std::lock_guard lock(proc().mu);
  *static_cast<cuuint64_t*>(value) = pool->reserved;
  return CUDA_SUCCESS;
}

CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attr, CUdeviceptr ptr) {
  if (attr != CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) return CUDA_ERROR_NOT_SUPPORTED;
  std::lock_guard lock(proc().mu);
  auto it = proc().blocks.find(ptr);
  if (it == proc().blocks.end()) return CUDA_ERROR_INVALID_VALUE;
  *static_cast<int*>(data) = ordinal_of(it->second.physical);
  return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                     const CUmemAllocationProp* prop, unsigned long long) {
  if (prop == nullptr || handle == nullptr || size == 0 || size % (2ull << 20) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // Driver 580 refuses a shareable handle (PyTorch asks for a file
  // descriptor) for the plain host location, not for a host NUMA node.
  if (prop->location.type == CU_MEM_LOCATION_TYPE_HOST && prop->requestedHandleTypes != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (prop->location.type == CU_MEM_LOCATION_TYPE_HOST ||
      prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA) {
    std::lock_guard lock(proc().mu);
    simgpu::count("cuMemCreate:host");
    *handle = proc().next_handle++;  // host memory: no device memory used
    proc().host_handles.insert(*handle);
    return CUDA_SUCCESS;
  }
  if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
  int physical = 0;
  if (CUresult rc = check_ordinal(prop->location.id, &physical); rc != CUDA_SUCCESS) return rc;
  std::lock_guard lock(proc().mu);
  const uint64_t h = proc().next_handle++;
  const CUresult rc = alloc_block(proc().handles, physical, size, h, "cuMemCreate");
  if (rc == CUDA_SUCCESS) *handle = h;
  return rc;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  std::lock_guard lock(proc().mu);
  if (proc().host_handles.erase(handle) != 0) return CUDA_SUCCESS;
  if (proc().handles.count(handle) == 0) return CUDA_ERROR_INVALID_VALUE;
  return free_block(proc().handles, handle);
}

// The mapping half of the VMM API (PyTorch's expandable segments): address
// ranges and what is mapped into them, checked as the driver checks them.
CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t, CUdeviceptr,
                             unsigned long long) {
  if (ptr == nullptr || size == 0 || size % (2ull << 20) != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(proc().mu);
  *ptr = simgpu::next_address(size);
  proc().ranges[*ptr] = size;
  return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  std::lock_guard lock(proc().mu);
  auto it = proc().ranges.find(ptr);
  if (it == proc().ranges.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
  proc().ranges.erase(it);
  return CUDA_SUCCESS;
}

static bool in_range(CUdeviceptr ptr, size_t size) {
  for (const auto& [base, len] : proc().ranges) {
    if (ptr >= base && ptr + size <= base + len) return true;
  }
  return false;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long) {
  std::lock_guard lock(proc().mu);
  const bool known = proc().handles.count(handle) != 0 || proc().host_handles.count(handle) != 0;
  if (!known || offset != 0 || !in_range(ptr, size)) return CUDA_ERROR_INVALID_VALUE;
  simgpu::count("cuMemMap");
  return CUDA_SUCCESS;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  std::lock_guard lock(proc().mu);
  return in_range(ptr, size) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// CUmemAccessDesc: a location and the access flags.
struct AccessDesc {
  CUmemLocation location;
  int flags;
};

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const AccessDesc* desc, size_t count) {
  std::lock_guard lock(proc().mu);
  if (desc == nullptr || count == 0 || !in_range(ptr, size)) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || desc[i].location.id < 0 ||
        static_cast<size_t>(desc[i].location.id) >= proc().visible.size())
      return CUDA_ERROR_INVALID_DEVICE;
  }
  simgpu::count("cuMemSetAccess");
  return CUDA_SUCCESS;
}

CUresult cuArray3DCreate_v2(CUarray* out, const CUDA_ARRAY3D_DESCRIPTOR* d) {
  int physical = 0;
  if (CUresult rc = current_physical(&physical); rc != CUDA_SUCCESS) return rc;
  if (d == nullptr || out == nullptr || d->Width == 0) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t bytes = array_bytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels);
  std::lock_guard lock(proc().mu);
  if (simgpu::should_fail("cuArrayCreate") || !simgpu::take(physical, bytes))
    return CUDA_ERROR_OUT_OF_MEMORY;
  *out = new CUarray_st{physical, bytes, (d->Flags & CUDA_ARRAY3D_DEFERRED_MAPPING) != 0};
  return CUDA_SUCCESS;
}

CUresult cuArrayCreate_v2(CUarray* out, const CUDA_ARRAY_DESCRIPTOR* d) {
  if (d == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUDA_ARRAY3D_DESCRIPTOR d3{d->Width, d->Height, 0, d->Format, d->NumChannels, 0};
  return cuArray3DCreate_v2(out, &d3);
}

CUresult cuArrayDestroy(CUarray a) {
  if (a == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(proc().mu);
  simgpu::give(a->physical, a->bytes);
  delete a;
  return CUDA_SUCCESS;
}

CUresult cuMipmappedArrayCreate(CUmipmappedArray* out, const CUDA_ARRAY3D_DESCRIPTOR* d,
                                unsigned int levels) {
  int physical = 0;
  if (CUresult rc = current_physical(&physical); rc != CUDA_SUCCESS) return rc;
  if (d == nullptr || out == nullptr || levels == 0) return CUDA_ERROR_INVALID_VALUE;
  uint64_t bytes = 0;
  size_t w = d->Width, h = d->Height, z = d->Depth;
  for (unsigned l = 0; l < levels; ++l) {
    bytes += array_bytes(w, h, z, d->Format, d->NumChannels);
    w = w > 1 ? w / 2 : 1;
    h = h > 1 ? h / 2 : h;
    z = z > 1 ? z / 2 : z;
  }
  std::lock_guard lock(proc().mu);
  if (!simgpu::take(physical, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  *out = new CUmipmappedArray_st{physical, bytes};
  return CUDA_SUCCESS;
}

CUresult cuMipmappedArrayDestroy(CUmipmappedArray a) {
  if (a == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(proc().mu);
  simgpu::give(a->physical, a->bytes);
  delete a;
  return CUDA_SUCCESS;
}

// As documented: only arrays created with CUDA_ARRAY3D_DEFERRED_MAPPING answer.
CUresult cuArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS* req, CUarray a, CUdevice) {
  if (req == nullptr || a == nullptr || !a->deferred) return CUDA_ERROR_INVALID_VALUE;
  *req = CUDA_ARRAY_MEMORY_REQUIREMENTS{a->bytes, 512, {}};
  return CUDA_SUCCESS;
}

CUresult cuMipmappedArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS*, CUmipmappedArray,
                                               CUdevice) {
  return CUDA_ERROR_INVALID_VALUE;  // mipmapped arrays are never deferred-mapping here
}

CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
  int physical = 0;
  if (CUresult rc = current_physical(&physical); rc != CUDA_SUCCESS) return rc;
  const simgpu::Device& d = simgpu::state().devices[physical];
  *total = d.total;
  *free = d.total - simgpu::device_used(physical);
  return CUDA_SUCCESS;
}

}  // extern "C"

// ---------------------------------------------------------------- the GPU
// One engine per process on a real-time timeline. A launch at time t starts at
// max(t, engine free) and holds the engine SIMGPU_KERNEL_NS (SIMGPU_GRAPH_NS
// for a graph) on its context's device, where NVML's utilisation sees it
// (simgpu::record_busy); an event is reached when its stream's earlier work is done.
// Stream capture follows the driver's rules where libvgpu could break them:
// launches into a capturing stream run nothing; a capture is invalidated by a
// capture-unsafe call (event query, synchronisation) in global mode from any
// thread, or in thread-local mode from its own thread, and by any use of the
// legacy stream while a blocking stream captures.

struct CUstream_st {
  unsigned flags;
  CUcontext ctx;
};
struct CUevent_st {
  CUcontext ctx;
  int64_t ts;     // when the GPU reaches it
  bool recorded;  // outside a capture
  bool captured;  // last recorded into a capturing stream
};
struct CUgraph_st {
  uint64_t nodes;
};
struct CUgraphExec_st {
  uint64_t nodes;
};

namespace {

constexpr CUresult kInvalidHandle = 400;         // CUDA_ERROR_INVALID_HANDLE
constexpr CUresult kIllegalState = 401;          // CUDA_ERROR_ILLEGAL_STATE
constexpr CUresult kLaunchOutOfResources = 701;  // CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
constexpr CUresult kCaptureUnsupported = 900;    // CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
constexpr CUresult kCaptureInvalidated = 901;    // CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
constexpr CUresult kCaptureImplicit = 906;       // CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
constexpr CUresult kCapturedEvent = 907;         // CUDA_ERROR_CAPTURED_EVENT
constexpr CUresult kCaptureWrongThread = 908;    // CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD
constexpr unsigned kStreamNonBlocking = 0x1;     // CU_STREAM_NON_BLOCKING
constexpr int kCaptureGlobal = 0;                // CU_STREAM_CAPTURE_MODE_GLOBAL
constexpr int kCaptureThreadLocal = 1;           // CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
constexpr int kCaptureRelaxed = 2;               // CU_STREAM_CAPTURE_MODE_RELAXED
constexpr int kCaptureStatusActive = 1;          // CU_STREAM_CAPTURE_STATUS_ACTIVE
constexpr int kCaptureStatusInvalidated = 2;     // CU_STREAM_CAPTURE_STATUS_INVALIDATED

int64_t now_ns() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void sleep_until(int64_t t) {
  const timespec ts{static_cast<time_t>(t / 1'000'000'000), static_cast<long>(t % 1'000'000'000)};
  while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

int64_t env_ns(const char* name, int64_t fallback) {
  const char* s = std::getenv(name);
  return s != nullptr && *s != '\0' ? std::strtoll(s, nullptr, 10) : fallback;
}
int64_t kernel_ns() {
  static const int64_t ns = env_ns("SIMGPU_KERNEL_NS", 20'000);
  return ns;
}
int64_t graph_ns() {
  static const int64_t ns = env_ns("SIMGPU_GRAPH_NS", 1'000'000);
  return ns;
}

struct StreamState {
  int64_t done = 0;  // when its last work item ends
  bool blocking = true;
  bool capturing = false;
  bool invalidated = false;
  int mode = kCaptureGlobal;
  std::thread::id owner;
  uint64_t captured = 0;
};

struct Gpu {
  std::mutex mu;
  int64_t engine_free = 0;
  std::map<uintptr_t, StreamState> streams;  // created and per-thread streams
};

Gpu& gpu() {
  static Gpu* g = new Gpu();
  return *g;
}

// The thread's per-thread default stream: a key no stream handle can have.
thread_local char t_per_thread_tag;
uintptr_t per_thread_key() {
  return reinterpret_cast<uintptr_t>(&t_per_thread_tag);
}
constexpr uintptr_t kLegacy = CU_STREAM_LEGACY_VALUE;

// The stream a call with handle `s` works on (under gpu().mu); 0 for an unknown handle.
uintptr_t stream_key(CUstream s, bool ptsz) {
  const auto v = reinterpret_cast<uintptr_t>(s);
  if (v == CU_STREAM_PER_THREAD_VALUE || (v == 0 && ptsz)) {
    const uintptr_t key = per_thread_key();
    gpu().streams.try_emplace(key);  // blocking, like the real per-thread stream
    return key;
  }
  if (v == 0 || v == kLegacy) return kLegacy;
  return gpu().streams.count(v) != 0 ? v : 0;
}

// Invalidates the captures `pred` selects; whether there was one.
template <class Pred>
bool invalidate_captures(Pred&& pred) {
  bool any = false;
  for (auto& [key, st] : gpu().streams) {
    if (st.capturing && pred(st)) {
      st.invalidated = true;
      any = true;
    }
  }
  return any;
}

// A capture-unsafe call (under gpu().mu): refused, and the captures it concerns
// are invalidated, as the driver does.
bool unsafe_during_capture() {
  const auto me = std::this_thread::get_id();
  return invalidate_captures([&](const StreamState& st) {
    return st.mode == kCaptureGlobal || (st.mode == kCaptureThreadLocal && st.owner == me);
  });
}

// Work on the legacy stream while a blocking stream captures would join the
// capture implicitly: refused, the capture invalidated.
bool legacy_use_during_capture(uintptr_t key) {
  return key == kLegacy && invalidate_captures([](const StreamState& st) { return st.blocking; });
}

CUresult launch(const char* fn, CUstream s, bool ptsz, int64_t duration) {
  simgpu::count(fn);
  if (simgpu::should_fail(fn)) return kLaunchOutOfResources;
  if (!proc().initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (t_current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  Gpu& g = gpu();
  std::lock_guard lock(g.mu);
  const uintptr_t key = stream_key(s, ptsz);
  if (key == 0) return kInvalidHandle;
  if (legacy_use_during_capture(key)) return kCaptureImplicit;
  StreamState* st = key == kLegacy ? nullptr : &g.streams[key];
  if (st != nullptr && st->capturing) {  // recorded into the graph, not run
    if (st->invalidated) return kCaptureInvalidated;
    ++st->captured;
    simgpu::count("gpu:captured");
    return CUDA_SUCCESS;
  }
  const int64_t start = std::max(now_ns(), g.engine_free);
  g.engine_free = start + duration;
  if (st != nullptr) st->done = g.engine_free;
  simgpu::record_busy(t_current->physical, start, g.engine_free);  // for NVML
  simgpu::count("gpu:ran");
  return CUDA_SUCCESS;
}

// When the GPU reaches the current end of stream `key` (under gpu().mu).
int64_t stream_end(uintptr_t key) {
  Gpu& g = gpu();
  return key == kLegacy ? g.engine_free : g.streams[key].done;
}

CUresult event_record(const char* fn, CUevent e, CUstream s, bool ptsz) {
  simgpu::count(fn);
  if (e == nullptr) return kInvalidHandle;
  Gpu& g = gpu();
  std::lock_guard lock(g.mu);
  const uintptr_t key = stream_key(s, ptsz);
  if (key == 0) return kInvalidHandle;
  // An event and the stream it is recorded on belong to one context.
  const CUcontext stream_ctx =
      key == kLegacy || key == per_thread_key() ? t_current : reinterpret_cast<CUstream>(key)->ctx;
  if (stream_ctx != e->ctx) return kInvalidHandle;
  if (legacy_use_during_capture(key)) return kCaptureImplicit;
  if (key != kLegacy && g.streams[key].capturing) {
    if (g.streams[key].invalidated) return kCaptureInvalidated;
    e->captured = true;
    return CUDA_SUCCESS;
  }
  e->ts = std::max(now_ns(), stream_end(key));
  e->recorded = true;
  e->captured = false;
  return CUDA_SUCCESS;
}

CUresult stream_sync(const char* fn, CUstream s, bool ptsz) {
  simgpu::count(fn);
  int64_t until = 0;
  {
    Gpu& g = gpu();
    std::lock_guard lock(g.mu);
    const uintptr_t key = stream_key(s, ptsz);
    if (key == 0) return kInvalidHandle;
    if (unsafe_during_capture() || legacy_use_during_capture(key)) return kCaptureUnsupported;
    if (key != kLegacy && g.streams[key].capturing) {
      g.streams[key].invalidated = true;
      return kCaptureUnsupported;
    }
    until = stream_end(key);
  }
  sleep_until(until);
  return CUDA_SUCCESS;
}

CUresult stream_query(const char* fn, CUstream s, bool ptsz) {
  simgpu::count(fn);
  Gpu& g = gpu();
  std::lock_guard lock(g.mu);
  const uintptr_t key = stream_key(s, ptsz);
  if (key == 0) return kInvalidHandle;
  if (unsafe_during_capture() || legacy_use_during_capture(key)) return kCaptureUnsupported;
  return now_ns() >= stream_end(key) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult begin_capture(const char* fn, CUstream s, bool ptsz, int mode) {
  simgpu::count(fn);
  if (mode < kCaptureGlobal || mode > kCaptureRelaxed) return CUDA_ERROR_INVALID_VALUE;
  Gpu& g = gpu();
  std::lock_guard lock(g.mu);
  const uintptr_t key = stream_key(s, ptsz);
  if (key == 0) return kInvalidHandle;
  if (key == kLegacy) return kCaptureUnsupported;  // the legacy stream cannot capture
  StreamState& st = g.streams[key];
  if (st.capturing) return kIllegalState;
  st.capturing = true;
  st.invalidated = false;
  st.mode = mode;
  st.owner = std::this_thread::get_id();
  st.captured = 0;
  return CUDA_SUCCESS;
}

CUresult end_capture(const char* fn, CUstream s, bool ptsz, CUgraph* graph) {
  simgpu::count(fn);
  if (graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Gpu& g = gpu();
  std::lock_guard lock(g.mu);
  const uintptr_t key = stream_key(s, ptsz);
  if (key == 0) return kInvalidHandle;
  if (key == kLegacy || !g.streams[key].capturing) return kIllegalState;
  StreamState& st = g.streams[key];
  if (st.mode != kCaptureRelaxed && st.owner != std::this_thread::get_id())
    return kCaptureWrongThread;
  st.capturing = false;
  if (st.invalidated) {
    *graph = nullptr;
    return kCaptureInvalidated;
  }
  *graph = new CUgraph_st{st.captured};
  return CUDA_SUCCESS;
}

CUresult is_capturing(const char* fn, CUstream s, bool ptsz, CUstreamCaptureStatus* status) {
  simgpu::count(fn);
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Gpu& g = gpu();
  std::lock_guard lock(g.mu);
  const uintptr_t key = stream_key(s, ptsz);
  if (key == 0) return kInvalidHandle;
  if (key == kLegacy) {
    // Documented: the legacy stream while a blocking stream captures.
    for (const auto& [k, st] : g.streams) {
      if (st.capturing && st.blocking) return kCaptureImplicit;
    }
    *status = CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
  }
  const StreamState& st = g.streams[key];
  *status = !st.capturing    ? CU_STREAM_CAPTURE_STATUS_NONE
            : st.invalidated ? kCaptureStatusInvalidated
                             : kCaptureStatusActive;
  return CUDA_SUCCESS;
}

}  // namespace

extern "C" {

// ---- launches
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, CUstream s, void**, void**) {
  return launch("cuLaunchKernel", s, false, kernel_ns());
}
CUresult cuLaunchKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream s, void**, void**) {
  return launch("cuLaunchKernel_ptsz", s, true, kernel_ns());
}

CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction, void**, void**) {
  if (config == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return launch("cuLaunchKernelEx", config->hStream, false, kernel_ns());
}
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction, void**, void**) {
  if (config == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return launch("cuLaunchKernelEx_ptsz", config->hStream, true, kernel_ns());
}

CUresult cuLaunchCooperativeKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                   unsigned, unsigned, CUstream s, void**) {
  return launch("cuLaunchCooperativeKernel", s, false, kernel_ns());
}
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned,
                                        unsigned, unsigned, unsigned, CUstream s, void**) {
  return launch("cuLaunchCooperativeKernel_ptsz", s, true, kernel_ns());
}

// ---- graphs
CUresult cuGraphCreate(CUgraph* graph, unsigned int flags) {
  if (graph == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  *graph = new CUgraph_st{0};
  return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph graph) {
  if (graph == nullptr) return kInvalidHandle;
  delete graph;
  return CUDA_SUCCESS;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long) {
  if (exec == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (graph == nullptr) return kInvalidHandle;
  *exec = new CUgraphExec_st{graph->nodes};
  return CUDA_SUCCESS;
}

CUresult cuGraphExecDestroy(CUgraphExec exec) {
  simgpu::count("cuGraphExecDestroy");
  if (exec == nullptr) return kInvalidHandle;
  delete exec;
  return CUDA_SUCCESS;
}

CUresult cuGraphLaunch(CUgraphExec exec, CUstream s) {
  if (exec == nullptr) return kInvalidHandle;
  return launch("cuGraphLaunch", s, false, graph_ns());
}
CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream s) {
  if (exec == nullptr) return kInvalidHandle;
  return launch("cuGraphLaunch_ptsz", s, true, graph_ns());
}

// ---- events
CUresult cuEventCreate(CUevent* e, unsigned int) {
  simgpu::count("cuEventCreate");
  if (e == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!proc().initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (t_current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *e = new CUevent_st{t_current, 0, false, false};
  return CUDA_SUCCESS;
}

CUresult cuEventDestroy_v2(CUevent e) {
  simgpu::count("cuEventDestroy_v2");
  if (e == nullptr) return kInvalidHandle;
  delete e;
  return CUDA_SUCCESS;
}
CUresult cuEventDestroy(CUevent e) {
  return cuEventDestroy_v2(e);
}

CUresult cuEventRecord(CUevent e, CUstream s) {
  return event_record("cuEventRecord", e, s, false);
}
CUresult cuEventRecord_ptsz(CUevent e, CUstream s) {
  return event_record("cuEventRecord_ptsz", e, s, true);
}

CUresult cuEventQuery(CUevent e) {
  simgpu::count("cuEventQuery");
  if (e == nullptr) return kInvalidHandle;
  std::lock_guard lock(gpu().mu);
  if (unsafe_during_capture()) return kCaptureUnsupported;
  if (e->captured) return kCapturedEvent;
  return !e->recorded || now_ns() >= e->ts ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuEventSynchronize(CUevent e) {
  simgpu::count("cuEventSynchronize");
  if (e == nullptr) return kInvalidHandle;
  int64_t until = 0;
  {
    std::lock_guard lock(gpu().mu);
    if (unsafe_during_capture()) return kCaptureUnsupported;
    if (e->captured) return kCapturedEvent;
    if (e->recorded) until = e->ts;
  }
  sleep_until(until);
  return CUDA_SUCCESS;
}

CUresult cuEventElapsedTime_v2(float* ms, CUevent start, CUevent end) {
  simgpu::count("cuEventElapsedTime_v2");
  if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (start == nullptr || end == nullptr) return kInvalidHandle;
  std::lock_guard lock(gpu().mu);
  if (start->captured || end->captured) return kCapturedEvent;
  if (!start->recorded || !end->recorded) return kInvalidHandle;
  const int64_t now = now_ns();
  if (now < start->ts || now < end->ts) return CUDA_ERROR_NOT_READY;
  *ms = static_cast<float>(static_cast<double>(end->ts - start->ts) / 1e6);
  return CUDA_SUCCESS;
}
CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  return cuEventElapsedTime_v2(ms, start, end);
}

// ---- streams and synchronisation
CUresult cuStreamCreate(CUstream* s, unsigned int flags) {
  if (s == nullptr || (flags & ~kStreamNonBlocking) != 0) return CUDA_ERROR_INVALID_VALUE;
  if (!proc().initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (t_current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  auto* st = new CUstream_st{flags, t_current};
  std::lock_guard lock(gpu().mu);
  gpu().streams[reinterpret_cast<uintptr_t>(st)].blocking = (flags & kStreamNonBlocking) == 0;
  *s = st;
  return CUDA_SUCCESS;
}

CUresult cuStreamDestroy_v2(CUstream s) {
  {
    std::lock_guard lock(gpu().mu);
    const auto v = reinterpret_cast<uintptr_t>(s);
    if (v <= CU_STREAM_PER_THREAD_VALUE || gpu().streams.erase(v) == 0) return kInvalidHandle;
  }
  delete s;
  return CUDA_SUCCESS;
}
CUresult cuStreamDestroy(CUstream s) {
  return cuStreamDestroy_v2(s);
}

CUresult cuStreamSynchronize(CUstream s) {
  return stream_sync("cuStreamSynchronize", s, false);
}
CUresult cuStreamSynchronize_ptsz(CUstream s) {
  return stream_sync("cuStreamSynchronize_ptsz", s, true);
}

CUresult cuStreamQuery(CUstream s) {
  return stream_query("cuStreamQuery", s, false);
}
CUresult cuStreamQuery_ptsz(CUstream s) {
  return stream_query("cuStreamQuery_ptsz", s, true);
}

CUresult cuCtxSynchronize() {
  simgpu::count("cuCtxSynchronize");
  if (t_current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  int64_t until = 0;
  {
    std::lock_guard lock(gpu().mu);
    if (unsafe_during_capture()) return kCaptureUnsupported;
    until = gpu().engine_free;
  }
  sleep_until(until);
  return CUDA_SUCCESS;
}

// ---- stream capture
CUresult cuStreamBeginCapture(CUstream s) {
  return begin_capture("cuStreamBeginCapture", s, false, kCaptureGlobal);
}
CUresult cuStreamBeginCapture_ptsz(CUstream s) {
  return begin_capture("cuStreamBeginCapture_ptsz", s, true, kCaptureGlobal);
}
CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode) {
  return begin_capture("cuStreamBeginCapture_v2", s, false, mode);
}
CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode) {
  return begin_capture("cuStreamBeginCapture_v2_ptsz", s, true, mode);
}
CUresult cuStreamBeginCaptureToGraph(CUstream s, CUgraph graph, const CUgraphNode*,
                                     const CUgraphEdgeData*, size_t, CUstreamCaptureMode mode) {
  if (graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return begin_capture("cuStreamBeginCaptureToGraph", s, false, mode);
}
CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream s, CUgraph graph, const CUgraphNode*,
                                          const CUgraphEdgeData*, size_t,
                                          CUstreamCaptureMode mode) {
  if (graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return begin_capture("cuStreamBeginCaptureToGraph_ptsz", s, true, mode);
}

CUresult cuStreamEndCapture(CUstream s, CUgraph* graph) {
  return end_capture("cuStreamEndCapture", s, false, graph);
}
CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph* graph) {
  return end_capture("cuStreamEndCapture_ptsz", s, true, graph);
}

CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus* status) {
  return is_capturing("cuStreamIsCapturing", s, false, status);
}
CUresult cuStreamIsCapturing_ptsz(CUstream s, CUstreamCaptureStatus* status) {
  return is_capturing("cuStreamIsCapturing_ptsz", s, true, status);
}

CUresult cuGetErrorString(CUresult rc, const char** s) {
  *s = rc == CUDA_SUCCESS ? "no error" : rc == CUDA_ERROR_OUT_OF_MEMORY ? "out of memory" : "error";
  return CUDA_SUCCESS;
}

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status);

CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, version, flags, nullptr);
}

}  // extern "C"

namespace {

struct ProcEntry {
  const char* base;
  int version;  // first CUDA version with this variant
  bool ptds;    // the per-thread-default-stream variant
  void* fn;
};

#define F(x) reinterpret_cast<void*>(&x)
const ProcEntry kProcs[] = {
    {"cuInit", 2000, false, F(cuInit)},
    {"cuDriverGetVersion", 2020, false, F(cuDriverGetVersion)},
    {"cuDeviceGet", 2000, false, F(cuDeviceGet)},
    {"cuDeviceGetCount", 2000, false, F(cuDeviceGetCount)},
    {"cuDeviceGetName", 2000, false, F(cuDeviceGetName)},
    {"cuDeviceGetUuid", 9020, false, F(cuDeviceGetUuid)},
    {"cuDeviceGetUuid", 11040, false, F(cuDeviceGetUuid_v2)},
    {"cuDeviceTotalMem", 3020, false, F(cuDeviceTotalMem_v2)},
    {"cuDevicePrimaryCtxRetain", 7000, false, F(cuDevicePrimaryCtxRetain)},
    {"cuDevicePrimaryCtxRelease", 7000, false, F(cuDevicePrimaryCtxRelease)},
    {"cuDevicePrimaryCtxRelease", 11000, false, F(cuDevicePrimaryCtxRelease_v2)},
    {"cuDevicePrimaryCtxReset", 7000, false, F(cuDevicePrimaryCtxReset)},
    {"cuDevicePrimaryCtxReset", 11000, false, F(cuDevicePrimaryCtxReset_v2)},
    {"cuCtxCreate", 3020, false, F(cuCtxCreate_v2)},
    {"cuCtxCreate", 11040, false, F(cuCtxCreate_v3)},
    {"cuCtxCreate", 12050, false, F(cuCtxCreate_v4)},
    {"cuCtxDestroy", 4000, false, F(cuCtxDestroy_v2)},
    {"cuCtxSetCurrent", 4000, false, F(cuCtxSetCurrent)},
    {"cuCtxGetCurrent", 4000, false, F(cuCtxGetCurrent)},
    {"cuCtxGetDevice", 2000, false, F(cuCtxGetDevice)},
    {"cuMemAlloc", 2000, false, F(cuMemAlloc)},
    {"cuMemAlloc", 3020, false, F(cuMemAlloc_v2)},
    {"cuMemAllocPitch", 3020, false, F(cuMemAllocPitch_v2)},
    {"cuMemAllocManaged", 6000, false, F(cuMemAllocManaged)},
    {"cuMemAdvise", 8000, false, F(cuMemAdvise)},
    {"cuMemAdvise", 12020, false, F(cuMemAdvise_v2)},
    {"cuMemAddressReserve", 10020, false, F(cuMemAddressReserve)},
    {"cuMemAddressFree", 10020, false, F(cuMemAddressFree)},
    {"cuMemMap", 10020, false, F(cuMemMap)},
    {"cuMemUnmap", 10020, false, F(cuMemUnmap)},
    {"cuMemSetAccess", 10020, false, F(cuMemSetAccess)},
    {"cuMemFree", 3020, false, F(cuMemFree_v2)},
    {"cuMemAllocAsync", 11020, false, F(cuMemAllocAsync)},
    {"cuMemAllocAsync", 11020, true, F(cuMemAllocAsync_ptsz)},
    {"cuMemFreeAsync", 11020, false, F(cuMemFreeAsync)},
    {"cuMemFreeAsync", 11020, true, F(cuMemFreeAsync_ptsz)},
    {"cuMemAllocFromPoolAsync", 11020, false, F(cuMemAllocFromPoolAsync)},
    {"cuMemAllocFromPoolAsync", 11020, true, F(cuMemAllocFromPoolAsync_ptsz)},
    {"cuDeviceGetDefaultMemPool", 11020, false, F(cuDeviceGetDefaultMemPool)},
    {"cuDeviceGetMemPool", 11020, false, F(cuDeviceGetMemPool)},
    {"cuMemPoolCreate", 11020, false, F(cuMemPoolCreate)},
    {"cuMemPoolDestroy", 11020, false, F(cuMemPoolDestroy)},
    {"cuMemPoolTrimTo", 11020, false, F(cuMemPoolTrimTo)},
    {"cuMemPoolGetAttribute", 11020, false, F(cuMemPoolGetAttribute)},
    {"cuPointerGetAttribute", 4000, false, F(cuPointerGetAttribute)},
    {"cuMemCreate", 10020, false, F(cuMemCreate)},
    {"cuMemRelease", 10020, false, F(cuMemRelease)},
    {"cuArrayCreate", 3020, false, F(cuArrayCreate_v2)},
    {"cuArray3DCreate", 3020, false, F(cuArray3DCreate_v2)},
    {"cuArrayDestroy", 2000, false, F(cuArrayDestroy)},
    {"cuMipmappedArrayCreate", 5000, false, F(cuMipmappedArrayCreate)},
    {"cuMipmappedArrayDestroy", 5000, false, F(cuMipmappedArrayDestroy)},
    {"cuArrayGetMemoryRequirements", 11060, false, F(cuArrayGetMemoryRequirements)},
    {"cuMipmappedArrayGetMemoryRequirements", 11060, false,
     F(cuMipmappedArrayGetMemoryRequirements)},
    {"cuMemGetInfo", 3020, false, F(cuMemGetInfo_v2)},
    {"cuCtxSynchronize", 2000, false, F(cuCtxSynchronize)},
    {"cuLaunchKernel", 4000, false, F(cuLaunchKernel)},
    {"cuLaunchKernel", 7000, true, F(cuLaunchKernel_ptsz)},
    {"cuLaunchKernelEx", 11060, false, F(cuLaunchKernelEx)},
    {"cuLaunchKernelEx", 11060, true, F(cuLaunchKernelEx_ptsz)},
    {"cuLaunchCooperativeKernel", 9000, false, F(cuLaunchCooperativeKernel)},
    {"cuLaunchCooperativeKernel", 9000, true, F(cuLaunchCooperativeKernel_ptsz)},
    {"cuGraphCreate", 10000, false, F(cuGraphCreate)},
    {"cuGraphDestroy", 10000, false, F(cuGraphDestroy)},
    {"cuGraphInstantiateWithFlags", 11040, false, F(cuGraphInstantiateWithFlags)},
    {"cuGraphExecDestroy", 10000, false, F(cuGraphExecDestroy)},
    {"cuGraphLaunch", 10000, false, F(cuGraphLaunch)},
    {"cuGraphLaunch", 10000, true, F(cuGraphLaunch_ptsz)},
    {"cuEventCreate", 2000, false, F(cuEventCreate)},
    {"cuEventDestroy", 2000, false, F(cuEventDestroy)},
    {"cuEventDestroy", 4000, false, F(cuEventDestroy_v2)},
    {"cuEventRecord", 2000, false, F(cuEventRecord)},
    {"cuEventRecord", 7000, true, F(cuEventRecord_ptsz)},
    {"cuEventQuery", 2000, false, F(cuEventQuery)},
    {"cuEventSynchronize", 2000, false, F(cuEventSynchronize)},
    {"cuEventElapsedTime", 2000, false, F(cuEventElapsedTime)},
    {"cuEventElapsedTime", 12080, false, F(cuEventElapsedTime_v2)},
    {"cuStreamCreate", 2000, false, F(cuStreamCreate)},
    {"cuStreamDestroy", 2000, false, F(cuStreamDestroy)},
    {"cuStreamDestroy", 4000, false, F(cuStreamDestroy_v2)},
    {"cuStreamSynchronize", 2000, false, F(cuStreamSynchronize)},
    {"cuStreamSynchronize", 7000, true, F(cuStreamSynchronize_ptsz)},
    {"cuStreamBeginCapture", 10000, false, F(cuStreamBeginCapture)},
    {"cuStreamBeginCapture", 10000, true, F(cuStreamBeginCapture_ptsz)},
    {"cuStreamBeginCapture", 10010, false, F(cuStreamBeginCapture_v2)},
    {"cuStreamBeginCapture", 10010, true, F(cuStreamBeginCapture_v2_ptsz)},
    {"cuStreamBeginCaptureToGraph", 12030, false, F(cuStreamBeginCaptureToGraph)},
    {"cuStreamBeginCaptureToGraph", 12030, true, F(cuStreamBeginCaptureToGraph_ptsz)},
    {"cuStreamEndCapture", 10000, false, F(cuStreamEndCapture)},
    {"cuStreamEndCapture", 10000, true, F(cuStreamEndCapture_ptsz)},
    {"cuStreamQuery", 2000, false, F(cuStreamQuery)},
    {"cuStreamQuery", 7000, true, F(cuStreamQuery_ptsz)},
    {"cuStreamIsCapturing", 10000, false, F(cuStreamIsCapturing)},
    {"cuStreamIsCapturing", 10000, true, F(cuStreamIsCapturing_ptsz)},
    {"cuGetErrorString", 6000, false, F(cuGetErrorString)},
    {"cuGetProcAddress", 11030, false, F(cuGetProcAddress)},
    {"cuGetProcAddress", 12000, false, F(cuGetProcAddress_v2)},
};
#undef F

}  // namespace

extern "C" CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version,
                                        cuuint64_t flags, CUdriverProcAddressQueryResult* status) {
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const bool ptds = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  const ProcEntry* best = nullptr;
  bool known = false;
  for (const ProcEntry& e : kProcs) {
    if (std::strcmp(e.base, symbol) != 0) continue;
    known = true;
    if (e.version > version) continue;
    if (e.ptds && !ptds) continue;
    // The newest variant; of one version, the per-thread one when asked for.
    if (best == nullptr || e.version > best->version ||
        (e.version == best->version && e.ptds && !best->ptds)) {
      best = &e;
    }
  }
  *pfn = best != nullptr ? best->fn : nullptr;
  if (status != nullptr) {
    *status = best != nullptr ? CU_GET_PROC_ADDRESS_SUCCESS
              : known         ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                              : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  }
  return best != nullptr ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
