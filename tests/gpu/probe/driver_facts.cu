// What the real driver does where libvgpu.so and the simulated driver must
// follow it (run without the library; output in tests/gpu/results/):
//   capture   which calls a stream capture allows, per capture mode and
//             calling thread, and which invalidate it
//   graphmem  when memory that a captured graph allocates becomes real
//   vmm       whether cuMemRelease of a mapped handle frees anything
//   limits    what cuCtxSetLimit commits, and when
//   module    what module globals commit, eager and lazy loading
// Build: nvcc -O2 -arch=sm_90 -o driver-facts driver_facts.cu -lcuda -l:libnvidia-ml.so.1
//        (NVML is declared here, so no nvml.h is needed)
//        nvcc -cubin -arch=sm_90 -o globals.cubin driver_facts.cu -DGLOBALS_MODULE
// Run:   driver-facts globals.cubin
#include <cuda.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#ifdef GLOBALS_MODULE
// 1 GiB of module globals, zero-initialised (no bytes in the file).
__device__ char g_big[1ull << 30];
extern "C" __global__ void touch_big() { g_big[threadIdx.x * 4096] = 1; }
#else

__global__ void nop() {}
__global__ void deep_stack(int n, int* out) {
  volatile int local[2048];
  for (int i = 0; i < 2048; ++i) local[i] = i * n;
  *out = local[n % 2048];
}
__global__ void heap_user(size_t bytes, int* out) {
  char* p = static_cast<char*>(malloc(bytes));
  *out = p != nullptr;
  if (p) free(p);
}

// The three NVML calls used, as nvml.h declares them.
extern "C" {
typedef struct nvmlDevice_st* nvmlDevice_t;
struct nvmlProcessInfo_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
int nvmlInit_v2();
int nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_t* device);
int nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned* count,
                                            nvmlProcessInfo_t* infos);
}

namespace {

nvmlDevice_t g_nvml;
CUcontext g_ctx;
CUdevice g_dev;

uint64_t proc_mib() {
  unsigned n = 64;
  nvmlProcessInfo_t infos[64];
  if (nvmlDeviceGetComputeRunningProcesses_v3(g_nvml, &n, infos) != 0) return ~0ull;
  for (unsigned i = 0; i < n; ++i)
    if (infos[i].pid == static_cast<unsigned>(getpid())) return infos[i].usedGpuMemory >> 20;
  return 0;
}

uint64_t graph_attr(CUgraphMem_attribute a) {
  cuuint64_t v = 0;
  cuDeviceGetGraphMemAttribute(g_dev, a, &v);
  return v >> 20;
}

void mem_line(const char* what) {
  std::printf("  %-48s process %6llu MiB  graph used %5llu reserved %5llu MiB\n", what,
              static_cast<unsigned long long>(proc_mib()),
              static_cast<unsigned long long>(graph_attr(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT)),
              static_cast<unsigned long long>(graph_attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT)));
}

const char* mode_name(int m) {
  return m == CU_STREAM_CAPTURE_MODE_GLOBAL         ? "global"
         : m == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL ? "thread_local"
                                                    : "relaxed";
}

struct Fixture {
  CUstream other = nullptr;  // a second, non-blocking stream
  CUevent done = nullptr;    // recorded on `other` before the capture
  CUevent done2 = nullptr;
  CUevent spare = nullptr;
  CUdeviceptr ptr = 0;  // a plain allocation
  CUmemoryPool pool = nullptr;
  CUgraphExec exec = nullptr;  // a small graph made before the capture
};

using Op = std::function<CUresult(Fixture&, CUstream capturing)>;

// One capture per (call, mode, thread): begin, a kernel, the call, then what
// became of the capture.
void capture_case(const char* name, const Op& op, int mode, bool other_thread, Fixture& f) {
  CUstream s = nullptr;
  cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
  CUresult begin = cuStreamBeginCapture(s, static_cast<CUstreamCaptureMode>(mode));
  nop<<<1, 1, 0, s>>>();
  CUresult rc = CUDA_SUCCESS;
  if (other_thread) {
    std::thread t([&] {
      cuCtxSetCurrent(g_ctx);
      rc = op(f, s);
    });
    t.join();
  } else {
    rc = op(f, s);
  }
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  cuStreamIsCapturing(s, &st);
  CUgraph g = nullptr;
  CUresult end = cuStreamEndCapture(s, &g);
  if (g) cuGraphDestroy(g);
  std::printf("capture %-36s %-12s %-6s begin=%d call=%d status=%s end=%d\n", name,
              mode_name(mode), other_thread ? "other" : "same", begin, rc,
              st == CU_STREAM_CAPTURE_STATUS_ACTIVE        ? "active"
              : st == CU_STREAM_CAPTURE_STATUS_INVALIDATED ? "invalidated"
                                                           : "none",
              end);
  cuCtxSynchronize();
  cuStreamDestroy(s);
}

void capture_facts(Fixture& f) {
  std::printf("\n## capture: rc of the call, the capture's status after it, cuStreamEndCapture\n");
  std::vector<std::pair<const char*, Op>> ops = {
      {"cuCtxGetCurrent",
       [](Fixture&, CUstream) {
         CUcontext c;
         return cuCtxGetCurrent(&c);
       }},
      {"cuCtxGetDevice",
       [](Fixture&, CUstream) {
         CUdevice d;
         return cuCtxGetDevice(&d);
       }},
      {"cuDeviceGetUuid_v2",
       [](Fixture&, CUstream) {
         CUuuid u;
         return cuDeviceGetUuid_v2(&u, g_dev);
       }},
      {"cuStreamIsCapturing(other)",
       [](Fixture& f, CUstream) {
         CUstreamCaptureStatus st;
         return cuStreamIsCapturing(f.other, &st);
       }},
      {"cuDeviceGetMemPool",
       [](Fixture&, CUstream) {
         CUmemoryPool p;
         return cuDeviceGetMemPool(&p, g_dev);
       }},
      {"cuMemPoolGetAttribute(reserved)",
       [](Fixture& f, CUstream) {
         cuuint64_t v;
         return cuMemPoolGetAttribute(f.pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v);
       }},
      {"cuPointerGetAttribute(plain ptr)",
       [](Fixture& f, CUstream) {
         int o;
         return cuPointerGetAttribute(&o, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, f.ptr);
       }},
      {"cuMemAllocAsync(capturing)+attr+free",
       [](Fixture&, CUstream s) {
         CUdeviceptr p = 0;
         CUresult rc = cuMemAllocAsync(&p, 64 << 20, s);
         if (rc != CUDA_SUCCESS) return rc;
         int o = -1;
         CUresult a = cuPointerGetAttribute(&o, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p);
         std::printf("    (pointer attribute of a captured allocation: rc=%d ordinal=%d)\n", a, o);
         return cuMemFreeAsync(p, s);
       }},
      {"cuMemAllocAsync(capturing) only",
       [](Fixture&, CUstream s) {
         CUdeviceptr p = 0;
         CUresult rc = cuMemAllocAsync(&p, 64 << 20, s);
         if (rc == CUDA_SUCCESS) cuMemFreeAsync(p, s);
         return rc;
       }},
      {"cuMemAllocAsync(other stream)+free",
       [](Fixture& f, CUstream) {
         CUdeviceptr p = 0;
         CUresult rc = cuMemAllocAsync(&p, 64 << 20, f.other);
         if (rc != CUDA_SUCCESS) return rc;
         return cuMemFreeAsync(p, f.other);
       }},
      {"cuMemAlloc_v2+cuMemFree_v2",
       [](Fixture&, CUstream) {
         CUdeviceptr p = 0;
         CUresult rc = cuMemAlloc_v2(&p, 2 << 20);
         if (rc != CUDA_SUCCESS) return rc;
         return cuMemFree_v2(p);
       }},
      {"cuMemGetInfo_v2",
       [](Fixture&, CUstream) {
         size_t fr, t;
         return cuMemGetInfo_v2(&fr, &t);
       }},
      {"cuEventQuery(recorded outside)", [](Fixture& f, CUstream) { return cuEventQuery(f.done); }},
      {"cuEventRecord(other stream)",
       [](Fixture& f, CUstream) { return cuEventRecord(f.spare, f.other); }},
      {"cuEventElapsedTime(outside events)",
       [](Fixture& f, CUstream) {
         float ms;
         return cuEventElapsedTime(&ms, f.done, f.done2);
       }},
      {"cuStreamQuery(other)", [](Fixture& f, CUstream) { return cuStreamQuery(f.other); }},
      {"cuMemCreate+cuMemRelease",
       [](Fixture&, CUstream) {
         CUmemAllocationProp prop{};
         prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
         prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, g_dev};
         CUmemGenericAllocationHandle h;
         CUresult rc = cuMemCreate(&h, 2 << 20, &prop, 0);
         if (rc != CUDA_SUCCESS) return rc;
         return cuMemRelease(h);
       }},
      {"cuMemPoolTrimTo", [](Fixture& f, CUstream) { return cuMemPoolTrimTo(f.pool, 0); }},
      {"cuDeviceGetGraphMemAttribute",
       [](Fixture&, CUstream) {
         cuuint64_t v;
         return cuDeviceGetGraphMemAttribute(g_dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &v);
       }},
      {"cuCtxGetLimit(stack)",
       [](Fixture&, CUstream) {
         size_t v;
         return cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE);
       }},
      {"cuCtxSetLimit(stack, same)",
       [](Fixture&, CUstream) {
         size_t v = 0;
         cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE);
         return cuCtxSetLimit(CU_LIMIT_STACK_SIZE, v);
       }},
      {"cuArrayCreate+destroy",
       [](Fixture&, CUstream) {
         CUDA_ARRAY_DESCRIPTOR d{256, 256, CU_AD_FORMAT_FLOAT, 1};
         CUarray a;
         CUresult rc = cuArrayCreate_v2(&a, &d);
         if (rc != CUDA_SUCCESS) return rc;
         return cuArrayDestroy(a);
       }},
      {"cuCtxSynchronize", [](Fixture&, CUstream) { return cuCtxSynchronize(); }},
      {"cuGraphLaunch(other stream)",
       [](Fixture& f, CUstream) { return cuGraphLaunch(f.exec, f.other); }},
      {"cuLaunchKernel(other stream)",
       [](Fixture& f, CUstream) {
         nop<<<1, 1, 0, f.other>>>();
         return static_cast<CUresult>(cudaGetLastError());
       }},
      {"cuEventCreate+destroy",
       [](Fixture&, CUstream) {
         CUevent e;
         CUresult rc = cuEventCreate(&e, 0);
         if (rc != CUDA_SUCCESS) return rc;
         return cuEventDestroy_v2(e);
       }},
      {"nvmlDeviceGetComputeRunningProcesses",
       [](Fixture&, CUstream) {
         proc_mib();
         return CUDA_SUCCESS;
       }},
  };
  for (auto& [name, op] : ops) {
    for (int mode : {CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                     CU_STREAM_CAPTURE_MODE_RELAXED}) {
      capture_case(name, op, mode, false, f);
      capture_case(name, op, mode, true, f);
    }
  }
  // The calling thread's own mode: relaxed lets it make unsafe calls during
  // another thread's global capture (PyTorch wraps cudaMalloc so).
  for (int mode : {CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_RELAXED}) {
    capture_case(mode == CU_STREAM_CAPTURE_MODE_RELAXED ? "cuMemAlloc (caller relaxed)"
                                                        : "cuMemAlloc (caller global)",
                 [mode](Fixture&, CUstream) {
                   CUstreamCaptureMode m = static_cast<CUstreamCaptureMode>(mode);
                   cuThreadExchangeStreamCaptureMode(&m);
                   CUdeviceptr p = 0;
                   CUresult rc = cuMemAlloc_v2(&p, 2 << 20);
                   if (rc == CUDA_SUCCESS) cuMemFree_v2(p);
                   cuThreadExchangeStreamCaptureMode(&m);
                   return rc;
                 },
                 CU_STREAM_CAPTURE_MODE_GLOBAL, false, f);
  }
}

// A captured step that allocates (and optionally frees) `bytes`, as PyTorch's
// cudaMallocAsync backend records one.
void graph_memory_facts() {
  std::printf("\n## graph memory: a captured cuMemAllocAsync of 512 MiB\n");
  for (int variant = 0; variant < 3; ++variant) {
    const char* what = variant == 0   ? "alloc+free inside the graph"
                       : variant == 1 ? "alloc inside, freed after the launch"
                                      : "cuGraphAddMemAllocNode, no free";
    std::printf(" %s\n", what);
    mem_line("before");
    CUstream s;
    cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    CUgraph g = nullptr;
    CUdeviceptr p = 0;
    if (variant < 2) {
      cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
      CUresult rc = cuMemAllocAsync(&p, 512ull << 20, s);
      cuMemsetD8Async(p, 1, 512ull << 20, s);
      if (variant == 0) cuMemFreeAsync(p, s);
      CUresult end = cuStreamEndCapture(s, &g);
      std::printf("  capture alloc rc=%d end=%d\n", rc, end);
    } else {
      cuGraphCreate(&g, 0);
      CUDA_MEM_ALLOC_NODE_PARAMS params{};
      params.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
      params.poolProps.location = {CU_MEM_LOCATION_TYPE_DEVICE, g_dev};
      params.bytesize = 512ull << 20;
      CUgraphNode n;
      CUresult rc = cuGraphAddMemAllocNode(&n, g, nullptr, 0, &params);
      p = params.dptr;
      std::printf("  cuGraphAddMemAllocNode rc=%d\n", rc);
    }
    mem_line("after capture");
    size_t count = 0;
    cuGraphGetNodes(g, nullptr, &count);
    std::vector<CUgraphNode> nodes(count);
    cuGraphGetNodes(g, nodes.data(), &count);
    for (CUgraphNode n : nodes) {
      CUgraphNodeType t;
      cuGraphNodeGetType(n, &t);
      if (t == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
        CUDA_MEM_ALLOC_NODE_PARAMS mp{};
        cuGraphMemAllocNodeGetParams(n, &mp);
        std::printf("  node: mem alloc %zu MiB\n", mp.bytesize >> 20);
      }
    }
    CUgraphExec e = nullptr;
    CUresult irc = cuGraphInstantiateWithFlags(&e, g, 0);
    std::printf("  instantiate rc=%d\n", irc);
    mem_line("after instantiate");
    cuGraphUpload(e, s);
    cuStreamSynchronize(s);
    mem_line("after upload");
    cuGraphLaunch(e, s);
    cuStreamSynchronize(s);
    mem_line("after first launch");
    if (variant >= 1) {
      cuMemFreeAsync(p, s);
      cuStreamSynchronize(s);
      mem_line("after freeing the graph's allocation");
    }
    cuGraphLaunch(e, s);
    cuStreamSynchronize(s);
    mem_line("after second launch");
    if (variant >= 1) {
      cuMemFreeAsync(p, s);
      cuStreamSynchronize(s);
    }
    cuGraphExecDestroy(e);
    cuGraphDestroy(g);
    mem_line("after destroying exec and graph");
    cuDeviceGraphMemTrim(g_dev);
    mem_line("after cuDeviceGraphMemTrim");
    cuStreamDestroy(s);
  }
}

void vmm_facts() {
  std::printf("\n## VMM: release before unmap\n");
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, g_dev};
  const size_t size = 1ull << 30;
  mem_line("before");
  CUmemGenericAllocationHandle h;
  std::printf("  create rc=%d\n", cuMemCreate(&h, size, &prop, 0));
  CUdeviceptr va;
  cuMemAddressReserve(&va, 2 * size, 0, 0, 0);
  std::printf("  map rc=%d\n", cuMemMap(va, size, 0, h, 0));
  std::printf("  second map of the same handle rc=%d\n", cuMemMap(va + size, size, 0, h, 0));
  mem_line("created, mapped twice");
  std::printf("  release rc=%d\n", cuMemRelease(h));
  mem_line("after cuMemRelease (still mapped)");
  cuMemUnmap(va, size);
  mem_line("after unmapping one mapping");
  cuMemUnmap(va + size, size);
  mem_line("after unmapping both");
  cuMemAddressFree(va, 2 * size);
  // Partial mapping with an offset.
  cuMemCreate(&h, size, &prop, 0);
  cuMemAddressReserve(&va, size, 0, 0, 0);
  std::printf("  map of the second half (offset %zu) rc=%d\n", size / 2,
              cuMemMap(va, size / 2, size / 2, h, 0));
  cuMemUnmap(va, size / 2);
  cuMemRelease(h);
  cuMemAddressFree(va, size);
}

void limit_facts() {
  std::printf("\n## cuCtxSetLimit: what is committed, and when\n");
  int sms = 0, threads = 0;
  cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, g_dev);
  cuDeviceGetAttribute(&threads, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, g_dev);
  std::printf("  SMs %d, threads per SM %d\n", sms, threads);
  int* out;
  cudaMalloc(&out, 4);
  struct L {
    CUlimit limit;
    const char* name;
    size_t value;
  } limits[] = {{CU_LIMIT_STACK_SIZE, "stack 32 KiB", 32768},
                {CU_LIMIT_MALLOC_HEAP_SIZE, "malloc heap 1 GiB", 1ull << 30},
                {CU_LIMIT_PRINTF_FIFO_SIZE, "printf fifo 256 MiB", 256ull << 20},
                {CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT, "pending launches 65536", 65536}};
  for (const L& l : limits) {
    size_t old = 0;
    cuCtxGetLimit(&old, l.limit);
    mem_line((std::string(l.name) + ": before (was " + std::to_string(old) + ")").c_str());
    CUresult rc = cuCtxSetLimit(l.limit, l.value);
    size_t now = 0;
    cuCtxGetLimit(&now, l.limit);
    std::printf("  set rc=%d, reads back %zu\n", rc, now);
    mem_line("after cuCtxSetLimit");
    if (l.limit == CU_LIMIT_STACK_SIZE) deep_stack<<<1, 1>>>(3, out);
    if (l.limit == CU_LIMIT_MALLOC_HEAP_SIZE) heap_user<<<1, 1>>>(1 << 20, out);
    if (l.limit != CU_LIMIT_STACK_SIZE && l.limit != CU_LIMIT_MALLOC_HEAP_SIZE) nop<<<1, 1>>>();
    std::printf("  kernel rc=%d\n", cudaDeviceSynchronize());
    mem_line("after a kernel");
    cuCtxSetLimit(l.limit, old);
    nop<<<1, 1>>>();
    cudaDeviceSynchronize();
    mem_line("after setting it back and a kernel");
  }
  // Past what the GPU can hold.
  CUresult big = cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 512 * 1024);
  std::printf("  stack 512 KiB: rc=%d\n", big);
  mem_line("after stack 512 KiB");
  cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1024);
  cudaFree(out);
}

void module_facts(const char* cubin) {
  std::printf("\n## module globals: a cubin with 1 GiB of __device__ data\n");
  std::printf("  CUDA_MODULE_LOADING=%s\n",
              std::getenv("CUDA_MODULE_LOADING") ? std::getenv("CUDA_MODULE_LOADING") : "(unset)");
  mem_line("before");
  CUmodule m;
  CUresult rc = cuModuleLoad(&m, cubin);
  std::printf("  cuModuleLoad rc=%d\n", rc);
  mem_line("after cuModuleLoad");
  if (rc == CUDA_SUCCESS) {
    CUdeviceptr p;
    size_t bytes;
    std::printf("  cuModuleGetGlobal rc=%d size %zu MiB\n", cuModuleGetGlobal(&p, &bytes, m, "g_big"),
                bytes >> 20);
    mem_line("after cuModuleGetGlobal");
    cuModuleUnload(m);
    mem_line("after cuModuleUnload");
  }
  CUlibrary lib;
  rc = cuLibraryLoadFromFile(&lib, cubin, nullptr, nullptr, 0, nullptr, nullptr, 0);
  std::printf("  cuLibraryLoadFromFile rc=%d\n", rc);
  mem_line("after cuLibraryLoadFromFile");
  if (rc == CUDA_SUCCESS) {
    CUkernel k;
    std::printf("  cuLibraryGetKernel rc=%d\n", cuLibraryGetKernel(&k, lib, "touch_big"));
    mem_line("after cuLibraryGetKernel");
    CUfunction fn;
    std::printf("  cuKernelGetFunction rc=%d\n", cuKernelGetFunction(&fn, k));
    mem_line("after cuKernelGetFunction");
    std::printf("  launch rc=%d\n",
                cuLaunchKernel(reinterpret_cast<CUfunction>(k), 1, 1, 1, 32, 1, 1, 0, 0, nullptr,
                               nullptr));
    cuCtxSynchronize();
    mem_line("after a launch");
    cuLibraryUnload(lib);
    mem_line("after cuLibraryUnload");
  }
}

}  // namespace

int main(int argc, char** argv) {
  nvmlInit_v2();
  cudaFree(nullptr);
  cuCtxGetCurrent(&g_ctx);
  cuCtxGetDevice(&g_dev);
  nvmlDeviceGetHandleByIndex_v2(0, &g_nvml);
  int drv = 0;
  cuDriverGetVersion(&drv);
  char name[96];
  cuDeviceGetName(name, sizeof name, g_dev);
  std::printf("# driver_facts: %s, CUDA driver %d\n", name, drv);
  mem_line("context created");

  Fixture f;
  cuStreamCreate(&f.other, CU_STREAM_NON_BLOCKING);
  cuEventCreate(&f.done, 0);
  cuEventCreate(&f.done2, 0);
  cuEventCreate(&f.spare, 0);
  cuEventRecord(f.done, f.other);
  cuEventRecord(f.done2, f.other);
  cuMemAlloc_v2(&f.ptr, 2 << 20);
  cuDeviceGetMemPool(&f.pool, g_dev);
  {
    CUstream s;
    cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    nop<<<1, 1, 0, s>>>();
    CUgraph g;
    cuStreamEndCapture(s, &g);
    cuGraphInstantiateWithFlags(&f.exec, g, 0);
    cuStreamDestroy(s);
  }
  cuCtxSynchronize();
  const std::string only = argc > 2 ? argv[2] : "";
  if (only.empty() || only == "capture") capture_facts(f);
  if (only.empty() || only == "graphmem") graph_memory_facts();
  if (only.empty() || only == "vmm") vmm_facts();
  if (only.empty() || only == "limits") limit_facts();
  if (only.empty() || only == "module") module_facts(argc > 1 ? argv[1] : "globals.cubin");
  return 0;
}
#endif
