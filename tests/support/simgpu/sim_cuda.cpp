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
//
// Where memory is committed follows driver 580
// (tests/gpu/results/driver-facts-h100.txt): a VMM handle's memory lives until
// it is released and its last mapping unmapped; graph memory (captured
// stream-ordered allocations, memory-alloc nodes) becomes real when the
// executable graph is uploaded or first launched and stays in the device's
// graph pool until cuDeviceGraphMemTrim; cuCtxSetLimit commits the stack at
// once ((value - 1 KiB) x SMs (132; a MIG device its own) x 2048 threads)
// and the malloc heap at the next launch; a module's globals are committed at cuModuleLoad*, a
// library's at first use in a context (cuKernelGetFunction,
// cuLibraryGetModule) or at load under CUDA_MODULE_LOADING=EAGER. Module
// images are text: "simgpu-module globals=<bytes>".
#include <sys/mman.h>
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
#include "sim_mig.hpp"
#include "vgpu/cuda_abi.hpp"

using namespace hami::cuda;  // NOLINT

struct CUctx_st {
  int ordinal;
  int physical;
  bool primary;
  // Limits (cuCtxSetLimit) and the memory they committed beyond the context.
  size_t stack = 1024;
  size_t heap = 8u << 20;
  size_t printf_fifo = 1u << 20;
  uint64_t stack_committed = 0;
  uint64_t heap_committed = 0;
};
struct CUmod_st {
  int physical;
  uint64_t bytes;
};
struct CUkern_st;
struct CUlib_st {
  uint64_t globals;
  std::map<int, uint64_t> committed;  // physical device -> bytes
  std::vector<CUkern_st*> kernels;
  std::vector<CUmod_st*> modules;
};
struct CUkern_st {
  CUlib_st* lib;
  std::string name;
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
  uint64_t size = 0;  // managed, imported: the allocation's size
  // VMM handles: mappings, released by the program, imported (another
  // process's memory: `bytes` 0 here).
  int maps = 0;
  bool released = false;
  bool imported = false;
};

// The device's graph memory pool (per process and GPU).
struct GraphPool {
  uint64_t reserved = 0;
  uint64_t used = 0;
  uint64_t reserved_high = 0;
  uint64_t used_high = 0;
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
  std::map<int, CUmemPoolHandle_st*> default_pools;          // per ordinal
  std::map<uint64_t, std::pair<uint64_t, size_t>> mappings;  // address -> (handle, size)
  std::map<int, GraphPool> graph_pools;                      // per physical device
  std::set<uint64_t> graph_addresses;                        // what graph allocations hand out
};

Process& proc() {
  static Process* p = new Process();
  return *p;
}

thread_local CUctx_st* t_current = nullptr;

// Resident threads per SM, for the stack a limit commits (an H100/H200; the
// SMs are the device's, simgpu::mig::sm_count).
constexpr uint64_t kThreadsPerSm = 2048;
constexpr size_t kDefaultStack = 1024;
constexpr size_t kDefaultHeap = 8u << 20;

// A potentially unsafe call (cuMemAlloc, cuMemPoolGetAttribute, cuCtxSetLimit,
// ...) made while stream captures forbid it: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
// and those captures invalidated, as the driver does ("the GPU" below). Never
// called with proc().mu held.
CUresult refuse_unsafe_during_capture();

// What a context's limits committed goes back with it (under proc().mu).
void give_limits(CUctx_st* ctx) {
  simgpu::give(ctx->physical, ctx->stack_committed + ctx->heap_committed);
  ctx->stack_committed = ctx->heap_committed = 0;
  ctx->stack = kDefaultStack;
  ctx->heap = kDefaultHeap;
}

// A GPU as CUDA sees it: itself, or with MIG on, its first MIG device (-1:
// none, the GPU is not a CUDA device).
int cuda_device_of(int gpu) {
  if (!simgpu::mig::enabled(gpu)) return gpu;
  const std::vector<int> migs = simgpu::mig::mig_devices(gpu);
  return migs.empty() ? -1 : simgpu::mig_device(gpu, migs.front());
}

// CUDA_VISIBLE_DEVICES as the driver reads it: indices, GPU-<uuid> prefixes
// or MIG-<uuid>s, stopping at the first entry that names no device. Device
// ids are sim_core.hpp's: a MIG device's memory is its GPU instance's. A
// MIG-enabled GPU, named or enumerated, is its first MIG device; and as the
// MIG user guide says of CUDA 11 and 12 (R450-R525 and later), a process
// enumerates one MIG device at most: the first, later ones are skipped.
std::vector<int> visible_devices() {
  simgpu::State& st = simgpu::state();
  std::vector<int> out;
  bool have_mig = false;
  auto add = [&](int dev) {
    if (simgpu::is_mig_device(dev)) {
      if (have_mig) return;
      have_mig = true;
    }
    out.push_back(dev);
  };
  const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
  if (env == nullptr) {
    for (uint32_t i = 0; i < st.device_count; ++i) {
      if (const int dev = cuda_device_of(static_cast<int>(i)); dev >= 0) add(dev);
    }
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
          found = cuda_device_of(static_cast<int>(i));
      }
    } else if (item.rfind("MIG-", 0) == 0) {
      found = simgpu::mig::find_mig_device(item.c_str());
    } else if (!item.empty() && item.find_first_not_of("0123456789") == std::string::npos) {
      const int idx = std::atoi(item.c_str());
      if (idx < static_cast<int>(st.device_count)) found = cuda_device_of(idx);
    }
    if (found < 0) break;
    add(found);
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
  std::snprintf(name, static_cast<size_t>(len), "%s", simgpu::mig::device_name(physical).c_str());
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  int physical = 0;
  if (CUresult rc = check_ordinal(dev, &physical); rc != CUDA_SUCCESS) return rc;
  const int gpu = simgpu::gpu_of(physical);
  const char* text = simgpu::is_mig_device(physical)
                         ? simgpu::state().mig[gpu].cis[physical - simgpu::mig_device(gpu, 0)].uuid
                         : simgpu::state().devices[gpu].uuid;
  simgpu::uuid_bytes(text, reinterpret_cast<unsigned char*>(uuid->bytes));
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  return cuDeviceGetUuid_v2(uuid, dev);
}

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  int physical = 0;
  if (CUresult rc = check_ordinal(dev, &physical); rc != CUDA_SUCCESS) return rc;
  *bytes = simgpu::device_total(physical);
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
    give_limits(pr.ctx);
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
    give_limits(pr.ctx);
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
  give_limits(ctx);
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
  if (CUresult rc = refuse_unsafe_during_capture(); rc != CUDA_SUCCESS) return rc;
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
  if (CUresult rc = refuse_unsafe_during_capture(); rc != CUDA_SUCCESS) return rc;
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
  if (CUresult rc = refuse_unsafe_during_capture(); rc != CUDA_SUCCESS) return rc;
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
  if (CUresult rc = refuse_unsafe_during_capture(); rc != CUDA_SUCCESS) return rc;
  std::lock_guard lock(proc().mu);
  return free_block(proc().blocks, dptr);
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
  if (CUresult rc = refuse_unsafe_during_capture(); rc != CUDA_SUCCESS) return rc;
  std::lock_guard lock(proc().mu);
  pool_release_idle(pool, keep);
  return CUDA_SUCCESS;
}

CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
  if (pool == nullptr || value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (attr != CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) return CUDA_ERROR_NOT_SUPPORTED;
  if (CUresult rc = refuse_unsafe_during_capture(); rc != CUDA_SUCCESS) return rc;
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

// A released handle's memory stays while it is mapped; the last unmap frees it.
CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  std::lock_guard lock(proc().mu);
  if (proc().host_handles.erase(handle) != 0) return CUDA_SUCCESS;
  auto it = proc().handles.find(handle);
  if (it == proc().handles.end() || it->second.released) return CUDA_ERROR_INVALID_VALUE;
  if (it->second.maps > 0) {
    it->second.released = true;
    return CUDA_SUCCESS;
  }
  if (it->second.imported) {
    proc().handles.erase(it);
    return CUDA_SUCCESS;
  }
  return free_block(proc().handles, handle);
}

// Handles shared with another process: a memfd naming the GPU and size (the
// memory stays counted to the exporting process, as NVML would show it).
CUresult cuMemExportToShareableHandle(void* out, CUmemGenericAllocationHandle handle, int type,
                                      unsigned long long) {
  if (out == nullptr || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
    return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(proc().mu);
  auto it = proc().handles.find(handle);
  if (it == proc().handles.end() || it->second.released) return CUDA_ERROR_INVALID_VALUE;
  const int fd = ::memfd_create("simgpu-vmm", MFD_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  const uint64_t rec[2] = {static_cast<uint64_t>(it->second.physical),
                           it->second.imported ? it->second.size : it->second.bytes};
  if (::pwrite(fd, rec, sizeof rec, 0) != static_cast<ssize_t>(sizeof rec)) {
    ::close(fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *static_cast<int*>(out) = fd;
  return CUDA_SUCCESS;
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* os_handle,
                                        int type) {
  if (handle == nullptr || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
    return CUDA_ERROR_INVALID_VALUE;
  uint64_t rec[2] = {};
  const int fd = static_cast<int>(reinterpret_cast<intptr_t>(os_handle));
  if (::pread(fd, rec, sizeof rec, 0) != static_cast<ssize_t>(sizeof rec)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard lock(proc().mu);
  const uint64_t h = proc().next_handle++;
  Block b{static_cast<int>(rec[0]), 0, t_current, nullptr};
  b.size = rec[1];
  b.imported = true;
  proc().handles[h] = b;
  *handle = h;
  return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop,
                                                CUmemGenericAllocationHandle handle) {
  if (prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(proc().mu);
  *prop = CUmemAllocationProp{};
  prop->type = 1;  // CU_MEM_ALLOCATION_TYPE_PINNED
  if (proc().host_handles.count(handle) != 0) {
    prop->location = {CU_MEM_LOCATION_TYPE_HOST, 0};
    return CUDA_SUCCESS;
  }
  auto it = proc().handles.find(handle);
  if (it == proc().handles.end()) return CUDA_ERROR_INVALID_VALUE;
  prop->location = {CU_MEM_LOCATION_TYPE_DEVICE, ordinal_of(it->second.physical)};
  return CUDA_SUCCESS;
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

// Driver 580 maps whole allocations only: an offset is CUDA_ERROR_NOT_SUPPORTED.
CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long) {
  std::lock_guard lock(proc().mu);
  auto it = proc().handles.find(handle);
  const bool host = proc().host_handles.count(handle) != 0;
  if ((it == proc().handles.end() && !host) || !in_range(ptr, size) ||
      proc().mappings.count(ptr) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (offset != 0) return CUDA_ERROR_NOT_SUPPORTED;
  if (!host) {
    Block& b = it->second;
    if (b.released || size > (b.imported ? b.size : b.bytes)) return CUDA_ERROR_INVALID_VALUE;
    ++b.maps;
  }
  proc().mappings[ptr] = {handle, size};
  simgpu::count("cuMemMap");
  return CUDA_SUCCESS;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  std::lock_guard lock(proc().mu);
  if (!in_range(ptr, size)) return CUDA_ERROR_INVALID_VALUE;
  auto& maps = proc().mappings;
  for (auto m = maps.lower_bound(ptr); m != maps.end() && m->first < ptr + size;) {
    auto h = proc().handles.find(m->second.first);
    if (h != proc().handles.end() && --h->second.maps == 0 && h->second.released) {
      if (h->second.imported) {
        proc().handles.erase(h);
      } else {
        free_block(proc().handles, h->first);
      }
    }
    m = maps.erase(m);
  }
  return CUDA_SUCCESS;
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
  if (CUresult rc = refuse_unsafe_during_capture(); rc != CUDA_SUCCESS) return rc;
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
  *total = simgpu::device_total(physical);
  *free = *total - std::min<uint64_t>(*total, simgpu::device_used(physical));
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int* value, int attr, CUdevice dev) {
  int physical = 0;
  if (CUresult rc = check_ordinal(dev, &physical); rc != CUDA_SUCCESS) return rc;
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (attr == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT) {
    *value = static_cast<int>(simgpu::mig::sm_count(physical));
  } else if (attr == CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR) {
    *value = static_cast<int>(kThreadsPerSm);
  } else {
    return CUDA_ERROR_NOT_SUPPORTED;  // not simulated
  }
  return CUDA_SUCCESS;
}

// ---- context limits
CUresult cuCtxGetLimit(size_t* value, int limit) {
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (t_current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (limit == CU_LIMIT_STACK_SIZE) {
    *value = t_current->stack;
  } else if (limit == CU_LIMIT_MALLOC_HEAP_SIZE) {
    *value = t_current->heap;
  } else if (limit == CU_LIMIT_PRINTF_FIFO_SIZE) {
    *value = t_current->printf_fifo;
  } else {
    return CUDA_ERROR_UNSUPPORTED_LIMIT;
  }
  return CUDA_SUCCESS;
}

CUresult cuCtxSetLimit(int limit, size_t value) {
  simgpu::count("cuCtxSetLimit");
  if (t_current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (CUresult rc = refuse_unsafe_during_capture(); rc != CUDA_SUCCESS) return rc;
  std::lock_guard lock(proc().mu);
  CUctx_st* ctx = t_current;
  if (limit == CU_LIMIT_STACK_SIZE) {
    if (value >= (512u << 10)) return CUDA_ERROR_INVALID_VALUE;
    const uint64_t want =
        value > kDefaultStack
            ? (value - kDefaultStack) * simgpu::mig::sm_count(t_current->physical) * kThreadsPerSm
            : 0;
    if (want > ctx->stack_committed) {
      if (!simgpu::take(ctx->physical, want - ctx->stack_committed))
        return CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      simgpu::give(ctx->physical, ctx->stack_committed - want);
    }
    ctx->stack_committed = want;
    ctx->stack = value;
  } else if (limit == CU_LIMIT_MALLOC_HEAP_SIZE) {
    ctx->heap = value;  // made at the next launch; one already made stays
  } else if (limit == CU_LIMIT_PRINTF_FIFO_SIZE) {
    ctx->printf_fifo = value;  // no device memory on driver 580
  } else {
    return CUDA_ERROR_UNSUPPORTED_LIMIT;
  }
  return CUDA_SUCCESS;
}

// ---- modules and libraries
namespace {

// The globals a module image declares; false if it is not one of ours.
bool image_globals(const void* image, uint64_t* bytes) {
  static constexpr char kMagic[] = "simgpu-module";
  const char* s = static_cast<const char*>(image);
  if (s == nullptr || std::strncmp(s, kMagic, sizeof kMagic - 1) != 0) return false;
  const char* g = std::strstr(s, "globals=");
  *bytes = g != nullptr ? std::strtoull(g + 8, nullptr, 10) : 0;
  return true;
}

bool file_globals(const char* path, uint64_t* bytes) {
  if (path == nullptr) return false;
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return false;
  char buf[256] = {};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  return image_globals(buf, bytes);
}

CUresult load_module(CUmodule* out, bool ok, uint64_t bytes) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ok) return CUDA_ERROR_INVALID_IMAGE;
  int physical = 0;
  if (CUresult rc = current_physical(&physical); rc != CUDA_SUCCESS) return rc;
  const uint64_t g = bytes != 0 ? simgpu::granule(bytes) : 0;
  std::lock_guard lock(proc().mu);
  if (!simgpu::take(physical, g)) return CUDA_ERROR_OUT_OF_MEMORY;
  *out = new CUmod_st{physical, g};
  return CUDA_SUCCESS;
}

std::set<const void*>& kernel_handles() {
  static auto* s = new std::set<const void*>();
  return *s;
}

// Loads library `lib` into the current context's device, once.
CUresult library_into_context(CUlib_st* lib) {
  int physical = 0;
  if (CUresult rc = current_physical(&physical); rc != CUDA_SUCCESS) return rc;
  std::lock_guard lock(proc().mu);
  if (lib->committed.count(physical) != 0) return CUDA_SUCCESS;
  const uint64_t g = lib->globals != 0 ? simgpu::granule(lib->globals) : 0;
  if (!simgpu::take(physical, g)) return CUDA_ERROR_OUT_OF_MEMORY;
  lib->committed[physical] = g;
  simgpu::count("library:loaded");
  return CUDA_SUCCESS;
}

CUresult load_library(CUlibrary* out, bool ok, uint64_t bytes) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ok) return CUDA_ERROR_INVALID_IMAGE;
  auto* lib = new CUlib_st{bytes, {}, {}, {}};
  const char* mode = std::getenv("CUDA_MODULE_LOADING");
  if (mode != nullptr && std::strcmp(mode, "EAGER") == 0 && t_current != nullptr) {
    if (CUresult rc = library_into_context(lib); rc != CUDA_SUCCESS) {
      delete lib;
      return rc;
    }
  }
  *out = lib;
  return CUDA_SUCCESS;
}

}  // namespace

namespace {
CUresult load_if_kernel(CUfunction f) {
  CUlib_st* lib = nullptr;
  {
    std::lock_guard lock(proc().mu);
    if (kernel_handles().count(f) == 0) return CUDA_SUCCESS;
    lib = reinterpret_cast<CUkern_st*>(f)->lib;
  }
  return library_into_context(lib);
}
}  // namespace

CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  uint64_t bytes = 0;
  const bool ok = image_globals(image, &bytes);
  return load_module(module, ok, bytes);
}
CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int, int*, void**) {
  return cuModuleLoadData(module, image);
}
CUresult cuModuleLoadFatBinary(CUmodule* module, const void* image) {
  return cuModuleLoadData(module, image);
}
CUresult cuModuleLoad(CUmodule* module, const char* path) {
  uint64_t bytes = 0;
  const bool ok = file_globals(path, &bytes);
  return load_module(module, ok, bytes);
}
CUresult cuModuleUnload(CUmodule module) {
  if (module == nullptr || module->physical < 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(proc().mu);
  simgpu::give(module->physical, module->bytes);
  delete module;
  return CUDA_SUCCESS;
}

CUresult cuLibraryLoadData(CUlibrary* lib, const void* code, int*, void**, unsigned int, int*,
                           void**, unsigned int) {
  uint64_t bytes = 0;
  const bool ok = image_globals(code, &bytes);
  return load_library(lib, ok, bytes);
}
CUresult cuLibraryLoadFromFile(CUlibrary* lib, const char* path, int*, void**, unsigned int, int*,
                               void**, unsigned int) {
  uint64_t bytes = 0;
  const bool ok = file_globals(path, &bytes);
  return load_library(lib, ok, bytes);
}
CUresult cuLibraryUnload(CUlibrary lib) {
  if (lib == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(proc().mu);
  for (const auto& [physical, bytes] : lib->committed)
    simgpu::give(physical, bytes);
  for (CUkern_st* k : lib->kernels) {
    kernel_handles().erase(k);
    delete k;
  }
  for (CUmod_st* m : lib->modules)
    delete m;
  delete lib;
  return CUDA_SUCCESS;
}
CUresult cuLibraryGetKernel(CUkernel* kernel, CUlibrary lib, const char* name) {
  if (kernel == nullptr || lib == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(proc().mu);
  lib->kernels.push_back(new CUkern_st{lib, name});
  *kernel = lib->kernels.back();
  kernel_handles().insert(*kernel);
  return CUDA_SUCCESS;
}
// A kernel's name; its function (cuKernelGetFunction) is the same handle
// here. Other functions (the tests' null or made-up ones) have none.
CUresult cuKernelGetName(const char** name, CUkernel kernel) {
  if (name == nullptr || kernel == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(proc().mu);
  if (kernel_handles().count(kernel) == 0)
    return static_cast<CUresult>(400);  // CUDA_ERROR_INVALID_HANDLE
  *name = kernel->name.c_str();
  return CUDA_SUCCESS;
}
CUresult cuFuncGetName(const char** name, CUfunction f) {
  return cuKernelGetName(name, reinterpret_cast<CUkernel>(f));
}
CUresult cuKernelGetFunction(CUfunction* fn, CUkernel kernel) {
  if (fn == nullptr || kernel == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult rc = library_into_context(kernel->lib); rc != CUDA_SUCCESS) return rc;
  *fn = reinterpret_cast<CUfunction>(kernel);
  return CUDA_SUCCESS;
}
CUresult cuLibraryGetModule(CUmodule* module, CUlibrary lib) {
  if (module == nullptr || lib == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult rc = library_into_context(lib); rc != CUDA_SUCCESS) return rc;
  std::lock_guard lock(proc().mu);
  lib->modules.push_back(new CUmod_st{-1, 0});  // its memory is the library's
  *module = lib->modules.back();
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
// Graphs keep their memory nodes (allocations) and child graphs as nodes;
// kernel nodes are only counted.
struct CUgraphNode_st {
  int type;  // CU_GRAPH_NODE_TYPE_*
  int physical = -1;
  uint64_t bytes = 0;  // an allocation node's size
  CUdeviceptr dptr = 0;
  CUgraph_st* child = nullptr;
};
struct CUgraph_st {
  uint64_t nodes;
  std::vector<CUgraphNode_st*> list;
  std::vector<CUdeviceptr> frees;  // frees of real memory captured into it
};
struct CUgraphExec_st {
  uint64_t nodes;
  std::map<int, uint64_t> footprint;  // physical device -> bytes its allocations take
  std::vector<CUdeviceptr> frees;
  bool resident = false;  // its allocations are in the graph pool
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
  std::vector<CUgraphNode_st*> allocs;  // stream-ordered allocations captured
  std::vector<CUdeviceptr> frees;       // frees of real memory captured
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

// The calling thread's capture interaction mode (cuThreadExchangeStreamCaptureMode).
thread_local int t_capture_mode = kCaptureGlobal;

// A potentially unsafe call (under gpu().mu), by the driver's rule: a thread
// in relaxed mode may make it; otherwise not while it has a capture of its
// own that was not begun relaxed, nor, in global mode, while another thread
// has a global-mode capture. Refused, and those captures invalidated.
bool unsafe_during_capture() {
  if (t_capture_mode == kCaptureRelaxed) return false;
  const auto me = std::this_thread::get_id();
  return invalidate_captures([&](const StreamState& st) {
    if (st.owner == me) return st.mode != kCaptureRelaxed;
    return t_capture_mode == kCaptureGlobal && st.mode == kCaptureGlobal;
  });
}

// Calls that necessarily conflict with any capture (a device-wide
// synchronisation), whatever the modes.
bool conflicts_with_capture() {
  return invalidate_captures([](const StreamState&) { return true; });
}

}  // namespace

namespace {
CUresult refuse_unsafe_during_capture() {
  std::lock_guard lock(gpu().mu);
  return unsafe_during_capture() ? kCaptureUnsupported : CUDA_SUCCESS;
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
  // A malloc heap set larger than the default is made at the next launch.
  if (t_current->heap > kDefaultHeap &&
      t_current->heap_committed < t_current->heap - kDefaultHeap) {
    const uint64_t more = t_current->heap - kDefaultHeap - t_current->heap_committed;
    if (!simgpu::take(t_current->physical, more)) return CUDA_ERROR_OUT_OF_MEMORY;
    t_current->heap_committed += more;
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
  st.allocs.clear();
  st.frees.clear();
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
  *graph = new CUgraph_st{st.captured, st.allocs, st.frees};
  st.allocs.clear();
  st.frees.clear();
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

// Where a stream-ordered call on `s` goes: recorded into the capture (true),
// or run (false); *rc says why neither, when it is not CUDA_SUCCESS.
// `record` adds the captured node (under gpu().mu).
template <class Record>
bool captured_or_checked(CUstream s, bool ptsz, CUresult* rc, Record&& record) {
  Gpu& g = gpu();
  std::lock_guard lock(g.mu);
  *rc = CUDA_SUCCESS;
  const uintptr_t key = stream_key(s, ptsz);
  if (key == 0) {
    *rc = kInvalidHandle;
    return false;
  }
  if (legacy_use_during_capture(key)) {
    *rc = kCaptureImplicit;
    return false;
  }
  if (key != kLegacy && g.streams[key].capturing) {
    StreamState& st = g.streams[key];
    if (st.invalidated) {
      *rc = kCaptureInvalidated;
    } else {
      record(st);
    }
    return true;
  }
  // On a stream that does not capture, a memory call is a potentially unsafe one.
  if (unsafe_during_capture()) *rc = kCaptureUnsupported;
  return false;
}

// Stream-ordered allocation from `pool` (null: the current device's). Into a
// capturing stream it is a graph's allocation node: an address, no memory.
CUresult async_alloc(const char* fn, CUdeviceptr* dptr, size_t bytes, CUmemPoolHandle_st* pool,
                     CUstream s, bool ptsz) {
  simgpu::count(fn);
  if (dptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  int physical = 0;
  if (pool == nullptr) {
    if (CUresult rc = current_physical(&physical); rc != CUDA_SUCCESS) return rc;
  } else {
    if (CUresult rc = check_ordinal(pool->ordinal, nullptr); rc != CUDA_SUCCESS) return rc;
    physical = pool->physical;
  }
  CUresult rc = CUDA_SUCCESS;
  if (captured_or_checked(s, ptsz, &rc, [&](StreamState& st) {
        const uint64_t addr = simgpu::next_address(bytes);
        st.allocs.push_back(new CUgraphNode_st{CU_GRAPH_NODE_TYPE_MEM_ALLOC, physical,
                                               simgpu::granule(bytes), addr, nullptr});
        *dptr = addr;
        simgpu::count("gpu:graph-alloc");
      })) {
    if (rc == CUDA_SUCCESS) {
      std::lock_guard lock(proc().mu);
      proc().graph_addresses.insert(*dptr);
    }
    return rc;
  }
  if (rc != CUDA_SUCCESS) return rc;
  if (pool == nullptr) {
    std::lock_guard lock(proc().mu);
    pool = default_pool(t_current->ordinal, physical);
  }
  return pool_alloc(dptr, bytes, pool, fn);
}

// A graph's allocations are freed by the graph or stay in its pool: freeing
// one outside any graph hands nothing back.
CUresult async_free(const char* fn, CUdeviceptr dptr, CUstream s, bool ptsz) {
  simgpu::count(fn);
  CUresult rc = CUDA_SUCCESS;
  if (captured_or_checked(s, ptsz, &rc, [&](StreamState& st) {
        std::lock_guard lock(proc().mu);
        if (proc().graph_addresses.count(dptr) == 0) st.frees.push_back(dptr);
      })) {
    return rc;
  }
  if (rc != CUDA_SUCCESS || dptr == 0) return rc;
  std::lock_guard lock(proc().mu);
  if (proc().graph_addresses.count(dptr) != 0) return CUDA_SUCCESS;
  return free_block(proc().blocks, dptr);
}

// An executable graph's allocations put into the graph pool (under
// proc().mu): at upload or first launch, until a trim.
CUresult make_resident(CUgraphExec_st* e) {
  if (e->resident) return CUDA_SUCCESS;
  for (auto it = e->footprint.begin(); it != e->footprint.end(); ++it) {
    GraphPool& gp = proc().graph_pools[it->first];
    gp.used += it->second;
    if (gp.used > gp.reserved) {
      if (!simgpu::take(it->first, gp.used - gp.reserved)) {
        for (auto back = e->footprint.begin(); back != std::next(it); ++back)
          proc().graph_pools[back->first].used -= back->second;
        return CUDA_ERROR_OUT_OF_MEMORY;
      }
      gp.reserved = gp.used;
    }
    gp.used_high = std::max(gp.used_high, gp.used);
    gp.reserved_high = std::max(gp.reserved_high, gp.reserved);
  }
  e->resident = true;
  return CUDA_SUCCESS;
}

std::set<CUgraphExec_st*>& live_execs() {
  static auto* s = new std::set<CUgraphExec_st*>();
  return *s;
}

void add_footprint(const CUgraph_st* g, std::map<int, uint64_t>& f, int depth) {
  if (g == nullptr || depth > 8) return;
  for (const CUgraphNode_st* n : g->list) {
    if (n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) f[n->physical] += n->bytes;
    if (n->type == CU_GRAPH_NODE_TYPE_GRAPH) add_footprint(n->child, f, depth + 1);
  }
}

CUresult instantiate(CUgraphExec* exec, CUgraph graph, bool upload) {
  if (exec == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (graph == nullptr) return kInvalidHandle;
  auto* e = new CUgraphExec_st{graph->nodes, {}, graph->frees};
  add_footprint(graph, e->footprint, 0);
  std::lock_guard lock(proc().mu);
  if (upload) {
    if (CUresult rc = make_resident(e); rc != CUDA_SUCCESS) {
      delete e;
      return rc;
    }
  }
  live_execs().insert(e);
  *exec = e;
  return CUDA_SUCCESS;
}

// Before a graph runs (not into a capture): its memory made real, and the
// frees of real memory captured into it done.
CUresult before_graph_runs(CUgraphExec exec, CUstream s, bool ptsz) {
  {
    Gpu& g = gpu();
    std::lock_guard lock(g.mu);
    const uintptr_t key = stream_key(s, ptsz);
    if (key != 0 && key != kLegacy && g.streams[key].capturing) return CUDA_SUCCESS;
  }
  std::lock_guard lock(proc().mu);
  if (CUresult rc = make_resident(exec); rc != CUDA_SUCCESS) return rc;
  for (CUdeviceptr p : exec->frees)
    free_block(proc().blocks, p);
  exec->frees.clear();
  return CUDA_SUCCESS;
}

}  // namespace

extern "C" {

CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream s) {
  return async_alloc("cuMemAllocAsync", dptr, bytesize, nullptr, s, false);
}
CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream s) {
  return async_alloc("cuMemAllocAsync_ptsz", dptr, bytesize, nullptr, s, true);
}
CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                 CUstream s) {
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return async_alloc("cuMemAllocFromPoolAsync", dptr, bytesize, pool, s, false);
}
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream s) {
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return async_alloc("cuMemAllocFromPoolAsync_ptsz", dptr, bytesize, pool, s, true);
}
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s) {
  return async_free("cuMemFreeAsync", dptr, s, false);
}
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s) {
  return async_free("cuMemFreeAsync_ptsz", dptr, s, true);
}

CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  if (mode == nullptr || *mode < kCaptureGlobal || *mode > kCaptureRelaxed)
    return CUDA_ERROR_INVALID_VALUE;
  std::swap(*mode, t_capture_mode);
  return CUDA_SUCCESS;
}

// ---- launches
// A library kernel launched as such (the CUDA runtime's lazy loading) loads
// its library into the context here, inside the launch.
CUresult cuLaunchKernel(CUfunction f, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, CUstream s, void**, void**) {
  if (CUresult rc = load_if_kernel(f); rc != CUDA_SUCCESS) return rc;
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
  for (CUgraphNode_st* n : graph->list)
    delete n;
  delete graph;
  return CUDA_SUCCESS;
}

CUresult cuGraphAddMemAllocNode(CUgraphNode* node, CUgraph graph, const CUgraphNode*, size_t,
                                CUDA_MEM_ALLOC_NODE_PARAMS* params) {
  if (node == nullptr || graph == nullptr || params == nullptr || params->bytesize == 0 ||
      params->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return CUDA_ERROR_INVALID_VALUE;
  int physical = 0;
  if (CUresult rc = check_ordinal(params->poolProps.location.id, &physical); rc != CUDA_SUCCESS)
    return rc;
  params->dptr = simgpu::next_address(params->bytesize);
  graph->list.push_back(new CUgraphNode_st{CU_GRAPH_NODE_TYPE_MEM_ALLOC, physical,
                                           simgpu::granule(params->bytesize), params->dptr});
  std::lock_guard lock(proc().mu);
  proc().graph_addresses.insert(params->dptr);
  *node = graph->list.back();
  return CUDA_SUCCESS;
}

// The child is referenced, not cloned as the driver does: keep it alive.
CUresult cuGraphAddChildGraphNode(CUgraphNode* node, CUgraph graph, const CUgraphNode*, size_t,
                                  CUgraph child) {
  if (node == nullptr || graph == nullptr || child == nullptr) return CUDA_ERROR_INVALID_VALUE;
  graph->list.push_back(new CUgraphNode_st{CU_GRAPH_NODE_TYPE_GRAPH, -1, 0, 0, child});
  graph->nodes += child->nodes;
  *node = graph->list.back();
  return CUDA_SUCCESS;
}

CUresult cuGraphGetNodes(CUgraph graph, CUgraphNode* nodes, size_t* count) {
  if (graph == nullptr || count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (nodes == nullptr) {
    *count = graph->list.size();
    return CUDA_SUCCESS;
  }
  const size_t n = std::min(*count, graph->list.size());
  for (size_t i = 0; i < n; ++i)
    nodes[i] = graph->list[i];
  *count = n;
  return CUDA_SUCCESS;
}

CUresult cuGraphNodeGetType(CUgraphNode node, CUgraphNodeType* type) {
  if (node == nullptr || type == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *type = node->type;
  return CUDA_SUCCESS;
}

CUresult cuGraphMemAllocNodeGetParams(CUgraphNode node, CUDA_MEM_ALLOC_NODE_PARAMS* out) {
  if (node == nullptr || out == nullptr || node->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC)
    return CUDA_ERROR_INVALID_VALUE;
  *out = CUDA_MEM_ALLOC_NODE_PARAMS{};
  out->poolProps.allocType = 1;  // CU_MEM_ALLOCATION_TYPE_PINNED
  out->poolProps.location = {CU_MEM_LOCATION_TYPE_DEVICE, ordinal_of(node->physical)};
  out->bytesize = node->bytes;
  out->dptr = node->dptr;
  return CUDA_SUCCESS;
}

CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode node, CUgraph* graph) {
  if (node == nullptr || graph == nullptr || node->type != CU_GRAPH_NODE_TYPE_GRAPH)
    return CUDA_ERROR_INVALID_VALUE;
  *graph = node->child;
  return CUDA_SUCCESS;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long) {
  simgpu::count("cuGraphInstantiateWithFlags");
  return instantiate(exec, graph, false);
}
// The CUDA 11 form, which the driver still exports.
CUresult cuGraphInstantiate(CUgraphExec* exec, CUgraph graph, CUgraphNode*, char*, size_t) {
  simgpu::count("cuGraphInstantiate");
  return instantiate(exec, graph, false);
}
CUresult cuGraphInstantiate_v2(CUgraphExec* exec, CUgraph graph, CUgraphNode*, char*, size_t) {
  simgpu::count("cuGraphInstantiate_v2");
  return instantiate(exec, graph, false);
}
CUresult cuGraphInstantiateWithParams(CUgraphExec* exec, CUgraph graph,
                                      CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  simgpu::count("cuGraphInstantiateWithParams");
  if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const CUresult rc = instantiate(exec, graph, (params->flags & 2) != 0);  // ..._FLAG_UPLOAD
  params->result_out = rc == CUDA_SUCCESS ? 0 : 1;
  return rc;
}
CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* exec, CUgraph graph,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  return cuGraphInstantiateWithParams(exec, graph, params);
}

CUresult cuGraphUpload(CUgraphExec exec, CUstream s) {
  simgpu::count("cuGraphUpload");
  if (exec == nullptr) return kInvalidHandle;
  return before_graph_runs(exec, s, false);
}
CUresult cuGraphUpload_ptsz(CUgraphExec exec, CUstream s) {
  simgpu::count("cuGraphUpload_ptsz");
  if (exec == nullptr) return kInvalidHandle;
  return before_graph_runs(exec, s, true);
}

CUresult cuGraphExecDestroy(CUgraphExec exec) {
  simgpu::count("cuGraphExecDestroy");
  if (exec == nullptr) return kInvalidHandle;
  // Its allocations stay in the graph pool until a trim, as the driver's do.
  std::lock_guard lock(proc().mu);
  live_execs().erase(exec);
  delete exec;
  return CUDA_SUCCESS;
}

CUresult cuGraphLaunch(CUgraphExec exec, CUstream s) {
  if (exec == nullptr) return kInvalidHandle;
  if (CUresult rc = before_graph_runs(exec, s, false); rc != CUDA_SUCCESS) return rc;
  return launch("cuGraphLaunch", s, false, graph_ns());
}
CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream s) {
  if (exec == nullptr) return kInvalidHandle;
  if (CUresult rc = before_graph_runs(exec, s, true); rc != CUDA_SUCCESS) return rc;
  return launch("cuGraphLaunch_ptsz", s, true, graph_ns());
}

CUresult cuDeviceGetGraphMemAttribute(CUdevice dev, CUgraphMem_attribute attr, void* value) {
  int physical = 0;
  if (CUresult rc = check_ordinal(dev, &physical); rc != CUDA_SUCCESS) return rc;
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(proc().mu);
  const GraphPool& gp = proc().graph_pools[physical];
  cuuint64_t v = 0;
  switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT:
      v = gp.used;
      break;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH:
      v = gp.used_high;
      break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT:
      v = gp.reserved;
      break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH:
      v = gp.reserved_high;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  *static_cast<cuuint64_t*>(value) = v;
  return CUDA_SUCCESS;
}

// Frees the graph pool of every graph not running (here: all of them).
CUresult cuDeviceGraphMemTrim(CUdevice dev) {
  simgpu::count("cuDeviceGraphMemTrim");
  int physical = 0;
  if (CUresult rc = check_ordinal(dev, &physical); rc != CUDA_SUCCESS) return rc;
  std::lock_guard lock(proc().mu);
  for (CUgraphExec_st* e : live_execs())
    if (e->footprint.count(physical) != 0) e->resident = false;
  GraphPool& gp = proc().graph_pools[physical];
  simgpu::give(physical, gp.reserved);
  gp.reserved = gp.used = 0;
  return CUDA_SUCCESS;
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
    if (conflicts_with_capture()) return kCaptureUnsupported;
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
    {"cuGraphAddMemAllocNode", 11040, false, F(cuGraphAddMemAllocNode)},
    {"cuGraphAddChildGraphNode", 10000, false, F(cuGraphAddChildGraphNode)},
    {"cuGraphGetNodes", 10000, false, F(cuGraphGetNodes)},
    {"cuGraphNodeGetType", 10000, false, F(cuGraphNodeGetType)},
    {"cuGraphMemAllocNodeGetParams", 11040, false, F(cuGraphMemAllocNodeGetParams)},
    {"cuGraphChildGraphNodeGetGraph", 10000, false, F(cuGraphChildGraphNodeGetGraph)},
    {"cuGraphInstantiate", 10000, false, F(cuGraphInstantiate)},
    {"cuGraphInstantiate", 11000, false, F(cuGraphInstantiate_v2)},
    {"cuGraphInstantiate", 12000, false, F(cuGraphInstantiateWithFlags)},
    {"cuGraphInstantiateWithParams", 12000, false, F(cuGraphInstantiateWithParams)},
    {"cuGraphInstantiateWithParams", 12000, true, F(cuGraphInstantiateWithParams_ptsz)},
    {"cuGraphUpload", 11010, false, F(cuGraphUpload)},
    {"cuGraphUpload", 11010, true, F(cuGraphUpload_ptsz)},
    {"cuDeviceGetGraphMemAttribute", 11040, false, F(cuDeviceGetGraphMemAttribute)},
    {"cuDeviceGraphMemTrim", 11040, false, F(cuDeviceGraphMemTrim)},
    {"cuThreadExchangeStreamCaptureMode", 10010, false, F(cuThreadExchangeStreamCaptureMode)},
    {"cuMemExportToShareableHandle", 10020, false, F(cuMemExportToShareableHandle)},
    {"cuMemImportFromShareableHandle", 10020, false, F(cuMemImportFromShareableHandle)},
    {"cuMemGetAllocationPropertiesFromHandle", 10020, false,
     F(cuMemGetAllocationPropertiesFromHandle)},
    {"cuCtxSetLimit", 3010, false, F(cuCtxSetLimit)},
    {"cuCtxGetLimit", 3010, false, F(cuCtxGetLimit)},
    {"cuDeviceGetAttribute", 2000, false, F(cuDeviceGetAttribute)},
    {"cuModuleLoad", 2000, false, F(cuModuleLoad)},
    {"cuModuleLoadData", 2000, false, F(cuModuleLoadData)},
    {"cuModuleLoadDataEx", 2010, false, F(cuModuleLoadDataEx)},
    {"cuModuleLoadFatBinary", 2000, false, F(cuModuleLoadFatBinary)},
    {"cuModuleUnload", 2000, false, F(cuModuleUnload)},
    {"cuLibraryLoadData", 12000, false, F(cuLibraryLoadData)},
    {"cuLibraryLoadFromFile", 12000, false, F(cuLibraryLoadFromFile)},
    {"cuLibraryUnload", 12000, false, F(cuLibraryUnload)},
    {"cuLibraryGetKernel", 12000, false, F(cuLibraryGetKernel)},
    {"cuKernelGetFunction", 12000, false, F(cuKernelGetFunction)},
    {"cuKernelGetName", 12030, false, F(cuKernelGetName)},
    {"cuFuncGetName", 12030, false, F(cuFuncGetName)},
    {"cuLibraryGetModule", 12000, false, F(cuLibraryGetModule)},
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
