// cuda-client: a scripted user of the driver API and NVML, run under
// LD_PRELOAD=libvgpu.so against the simulated driver by tests/vgpu. It reaches
// the driver the way real programs do, chosen with --via:
//   link          calls the functions it links against (symbol interposition)
//   dlsym         dlopen("libcuda.so.1") + dlsym (the CUDA runtime before 11.3)
//   procaddr      cuGetProcAddress_v2 at CUDA 13.0 (the CUDA runtime today)
//   procaddr-ptds the same with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
// and the ways around an interposer's dlsym a hostile program tries:
//   dlvsym        glibc's own dlsym, fetched with dlvsym(RTLD_DEFAULT, "dlsym",
//                 "GLIBC_2.34"), then used on the libcuda.so.1 handle
//   next          dlsym(RTLD_NEXT, name) from libnext_cuda.so, a library linked
//                 before libcuda.so.1
// Each operation prints one line "op=<name> rc=<CUresult> key=value...".
//
//   cuda-client --via=procaddr init ctx:0 alloc:64m meminfo free:0 hold
//
// Operations: init | ctx:<ord> (retain primary, make current) | ctxcreate:<ord> |
//   ctxdestroy | release:<ord> | reset:<ord> | alloc:<size> | alloc-v1:<size> |
//   pitch:<w>x<h> | managed:<size> | async:<size> | pool:<ord>:<size> |
//   vmm:<ord>:<size> | vmm-host:<size> | expand:<ord>:<chunk>:<n> (reserve n
//   chunks of address space, then cuMemCreate + cuMemMap + cuMemSetAccess each,
//   as PyTorch's expandable segments do; each mapping is one for unmap:<k>) | simcalls:<name>
//   (simgpu_calls(name)) | array:<w>x<h> | array3d:<w>x<h>x<d> | mipmap:<w>x<h>:<levels> | free:<n>
//   (the n-th allocation, any kind) | freeptr:<hex> | meminfo | totalmem:<ord> | nvml:<index> |
//   nvml2:<index> | fill:<size> (allocate <size> chunks until refused) | launch | sleep:<ms> | hold
//   (until stdin closes) | exit:<code> | crash (exit without cleanup) | mark (prints at once) |
//   fork ... join (the child runs the ops in between, the parent waits for it) | whois:<name>
//   (which library the lookup of <name> answered) | umask | signals | churn:<size>:<n> (alloc/free
//   n times) | await:<path> (until the file exists) | procmem:<nvml index> (this process's device
//   memory as NVML reports it) | charged:<dev> (what the state file charges this process on
//   state-file device <dev>) | poolnew:<ord> (create a pool; later "poolnew" allocations use it) |
//   poolalloc:<size> | pooldestroy | infoloop:<n> (cuMemGetInfo n times) | waittotal:<size>:<ms>
//   (cuMemGetInfo until its total is <size>, rc=999 after <ms>: a resize's bounded wait) |
//   launchpath:<path>:<n> (n launches through one launch function, path one of kernel, kernel_ptsz,
//   ex, ex_ptsz, coop, coop_ptsz, graph, graph_ptsz; a _ptsz path is the _ptsz export for link and
//   dlsym, and the base name with the per-thread flag for procaddr; each path has its own kernel
//   function, a graph path a fresh CUDA graph) | stream[:nb] (create a stream, blocking or not, for
//   later launchpath ops) | stream:0 (back to the default stream) | sync (cuCtxSynchronize) |
//   capture:<n>[:<begin>[:<m>]] (on a new stream: begin a capture with begin = v1, v2 (default) or
//   tograph, n kernel launches into it, m into another new stream, end the capture)
// Graph memory and captures that allocate, on one capture stream of their own:
//   gbegin[:global|thread|relaxed] (begin a capture, mode global by default) |
//   galloc:<size> (cuMemAllocAsync into it) | gfree (cuMemFreeAsync of the last) |
//   gstatus | gend | gnode:<ord>:<size> (cuGraphAddMemAllocNode, on a new graph
//   if none) | ginst[:upload] (WithFlags, or WithParams uploading) | gupload |
//   glaunch[:n] | gexecdestroy | gtrim:<ord> | graphmem:<ord> (the graph pool's
//   used= and reserved=) | threadmode:<mode> (cuThreadExchangeStreamCaptureMode)
// VMM lifetimes: vmmmap:<ord>:<size> (create, reserve, map, set access) |
//   unmap:<k> (the k-th mapping) | export (the last handle, as a file
//   descriptor) | importmap:<size> (import that descriptor and map it); a
//   handle is released with free:<n> | sendfd:<socket path> (serve the exported
//   descriptor to one connection on a unix socket, SCM_RIGHTS) |
//   recvfd:<socket path> (take it from there, for importmap: another process
//   importing, as NCCL's ranks do)
// Limits and modules: setlimit:<stack|heap|printf>:<value> | modload:<bytes>
//   (a simulated image) | modfile:<path> | modunload | libload:<bytes> |
//   libfile:<path> | libkernel:<name> (cuLibraryGetKernel + cuKernelGetFunction) |
//   liblaunch:<name> (cuLibraryGetKernel, then cuLaunchKernel of the kernel) |
//   libmodule | libunload
// Every line carries ms=<wall time of the op>. Launch and capture lines also
// say what the simulated driver saw during the op: plain= / ptsz= (calls of
// the path's two driver functions), ran= (launches run on the GPU),
// captured= (launches recorded into a capture), records= (cuEventRecord
// calls: libvgpu sampling), queries= (cuEventQuery calls); launchpath lines
// name the function the lookup returned: lib=<library> fn=<symbol>.
#include <dlfcn.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <fstream>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "nvml/nvml_abi.hpp"
#include "region/snapshot.hpp"
#include "vgpu/cuda_abi.hpp"

using namespace hami::cuda;  // NOLINT

struct CUfunc_st;

extern "C" {
// libnext_cuda.so (next_cuda.cpp): dlsym(RTLD_NEXT, name) from a library that
// comes before libcuda.so.1 in the search order. Weak: builds without it (the
// real-GPU suite's) have no --via=next.
__attribute__((weak)) void* hami_next_lookup(const char* name);
// Prototypes of the (simulated) libcuda.so.1 this program links against.
CUresult cuInit(unsigned int);
CUresult cuGetProcAddress_v2(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
}

namespace {

struct Api {
  CUresult (*cuInit)(unsigned int);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
  CUresult (*cuDevicePrimaryCtxReset)(CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxCreate)(CUcontext*, CUctxCreateParams*, unsigned int, CUdevice);
  CUresult (*cuCtxDestroy)(CUcontext);
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
  CUresult (*cuMemAllocV1)(unsigned int*, unsigned int);
  CUresult (*cuMemAllocPitch)(CUdeviceptr*, size_t*, size_t, size_t, unsigned int);
  CUresult (*cuMemAllocManaged)(CUdeviceptr*, size_t, unsigned int);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemAllocAsync)(CUdeviceptr*, size_t, CUstream);
  CUresult (*cuMemFreeAsync)(CUdeviceptr, CUstream);
  CUresult (*cuMemAllocFromPoolAsync)(CUdeviceptr*, size_t, CUmemoryPool, CUstream);
  CUresult (*cuDeviceGetDefaultMemPool)(CUmemoryPool*, CUdevice);
  CUresult (*cuMemPoolCreate)(CUmemoryPool*, const CUmemAllocationProp*);
  CUresult (*cuMemPoolDestroy)(CUmemoryPool);
  CUresult (*cuMemCreate)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                          unsigned long long);
  CUresult (*cuMemRelease)(CUmemGenericAllocationHandle);
  CUresult (*cuMemAddressReserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long);
  CUresult (*cuMemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                       unsigned long long);
  CUresult (*cuMemSetAccess)(CUdeviceptr, size_t, const void*, size_t);
  CUresult (*cuArrayCreate)(CUarray*, const CUDA_ARRAY_DESCRIPTOR*);
  CUresult (*cuArray3DCreate)(CUarray*, const CUDA_ARRAY3D_DESCRIPTOR*);
  CUresult (*cuArrayDestroy)(CUarray);
  CUresult (*cuMipmappedArrayCreate)(CUmipmappedArray*, const CUDA_ARRAY3D_DESCRIPTOR*, unsigned);
  CUresult (*cuMipmappedArrayDestroy)(CUmipmappedArray);
  CUresult (*cuMemGetInfo)(size_t*, size_t*);
  CUresult (*cuDeviceTotalMem)(size_t*, CUdevice);
  CUresult (*cuLaunchKernel)(CUfunc_st*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuStreamCreate)(CUstream*, unsigned int);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuGraphCreate)(CUgraph*, unsigned int);
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec*, CUgraph, unsigned long long);
  CUresult (*cuGraphDestroy)(CUgraph);
  CUresult (*cuGraphExecDestroy)(CUgraphExec);
  nvmlReturn_t (*nvmlInit)();
  nvmlReturn_t (*nvmlDeviceGetHandleByIndex)(unsigned, nvmlDevice_t*);
  nvmlReturn_t (*nvmlDeviceGetMemoryInfo)(nvmlDevice_t, nvmlMemory_t*);
  nvmlReturn_t (*nvmlDeviceGetMemoryInfo_v2)(nvmlDevice_t, nvmlMemory_v2_t*);
  nvmlReturn_t (*nvmlDeviceGetComputeRunningProcesses)(nvmlDevice_t, unsigned*, nvmlProcessInfo_t*);
  void* launch_kernel_raw;  // what the lookup returned, for "not wrapped" checks
};

template <class T>
void set(T& slot, void* p) {
  slot = reinterpret_cast<T>(p);
}

// Resolves every function by name through one of the lookup paths.
template <class Lookup>
void resolve(Api& a, Lookup&& cu, void* nvml) {
  set(a.cuInit, cu("cuInit", "cuInit"));
  set(a.cuDevicePrimaryCtxRetain, cu("cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain"));
  set(a.cuDevicePrimaryCtxRelease, cu("cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2"));
  set(a.cuDevicePrimaryCtxReset, cu("cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxReset_v2"));
  set(a.cuCtxSetCurrent, cu("cuCtxSetCurrent", "cuCtxSetCurrent"));
  set(a.cuCtxCreate, cu("cuCtxCreate", "cuCtxCreate_v4"));
  set(a.cuCtxDestroy, cu("cuCtxDestroy", "cuCtxDestroy_v2"));
  set(a.cuMemAlloc, cu("cuMemAlloc", "cuMemAlloc_v2"));
  set(a.cuMemAllocV1, cu("cuMemAlloc@2000", "cuMemAlloc"));
  set(a.cuMemAllocPitch, cu("cuMemAllocPitch", "cuMemAllocPitch_v2"));
  set(a.cuMemAllocManaged, cu("cuMemAllocManaged", "cuMemAllocManaged"));
  set(a.cuMemFree, cu("cuMemFree", "cuMemFree_v2"));
  set(a.cuMemAllocAsync, cu("cuMemAllocAsync", "cuMemAllocAsync"));
  set(a.cuMemFreeAsync, cu("cuMemFreeAsync", "cuMemFreeAsync"));
  set(a.cuMemAllocFromPoolAsync, cu("cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync"));
  set(a.cuDeviceGetDefaultMemPool, cu("cuDeviceGetDefaultMemPool", "cuDeviceGetDefaultMemPool"));
  set(a.cuMemPoolCreate, cu("cuMemPoolCreate", "cuMemPoolCreate"));
  set(a.cuMemPoolDestroy, cu("cuMemPoolDestroy", "cuMemPoolDestroy"));
  set(a.cuMemCreate, cu("cuMemCreate", "cuMemCreate"));
  set(a.cuMemRelease, cu("cuMemRelease", "cuMemRelease"));
  set(a.cuMemAddressReserve, cu("cuMemAddressReserve", "cuMemAddressReserve"));
  set(a.cuMemMap, cu("cuMemMap", "cuMemMap"));
  set(a.cuMemSetAccess, cu("cuMemSetAccess", "cuMemSetAccess"));
  set(a.cuArrayCreate, cu("cuArrayCreate", "cuArrayCreate_v2"));
  set(a.cuArray3DCreate, cu("cuArray3DCreate", "cuArray3DCreate_v2"));
  set(a.cuArrayDestroy, cu("cuArrayDestroy", "cuArrayDestroy"));
  set(a.cuMipmappedArrayCreate, cu("cuMipmappedArrayCreate", "cuMipmappedArrayCreate"));
  set(a.cuMipmappedArrayDestroy, cu("cuMipmappedArrayDestroy", "cuMipmappedArrayDestroy"));
  set(a.cuMemGetInfo, cu("cuMemGetInfo", "cuMemGetInfo_v2"));
  set(a.cuDeviceTotalMem, cu("cuDeviceTotalMem", "cuDeviceTotalMem_v2"));
  set(a.cuCtxSynchronize, cu("cuCtxSynchronize", "cuCtxSynchronize"));
  set(a.cuStreamCreate, cu("cuStreamCreate", "cuStreamCreate"));
  set(a.cuStreamDestroy, cu("cuStreamDestroy", "cuStreamDestroy_v2"));
  set(a.cuGraphCreate, cu("cuGraphCreate", "cuGraphCreate"));
  set(a.cuGraphInstantiateWithFlags,
      cu("cuGraphInstantiateWithFlags", "cuGraphInstantiateWithFlags"));
  set(a.cuGraphDestroy, cu("cuGraphDestroy", "cuGraphDestroy"));
  set(a.cuGraphExecDestroy, cu("cuGraphExecDestroy", "cuGraphExecDestroy"));
  a.launch_kernel_raw = cu("cuLaunchKernel", "cuLaunchKernel");
  set(a.cuLaunchKernel, a.launch_kernel_raw);
  set(a.nvmlInit, dlsym(nvml, "nvmlInit_v2"));
  set(a.nvmlDeviceGetHandleByIndex, dlsym(nvml, "nvmlDeviceGetHandleByIndex_v2"));
  set(a.nvmlDeviceGetMemoryInfo, dlsym(nvml, "nvmlDeviceGetMemoryInfo"));
  set(a.nvmlDeviceGetMemoryInfo_v2, dlsym(nvml, "nvmlDeviceGetMemoryInfo_v2"));
  set(a.nvmlDeviceGetComputeRunningProcesses,
      dlsym(nvml, "nvmlDeviceGetComputeRunningProcesses_v3"));
}

uint64_t size_arg(const std::string& s) {
  char* end = nullptr;
  uint64_t v = std::strtoull(s.c_str(), &end, 10);
  switch (*end) {
    case 'k':
      return v << 10;
    case 'm':
      return v << 20;
    case 'g':
      return v << 30;
    default:
      return v;
  }
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  for (;;) {
    size_t end = s.find(sep, pos);
    out.push_back(s.substr(pos, end == std::string::npos ? std::string::npos : end - pos));
    if (end == std::string::npos) return out;
    pos = end + 1;
  }
}

struct Held {
  char kind;  // p pointer, a async pointer, h vmm handle, r array, m mipmap
  uint64_t value;
};

double now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// The launch paths of "launchpath": which driver function, and how it is named.
enum class Kind { kKernel, kEx, kCoop, kGraph };
struct LaunchPathSpec {
  const char* name;   // as on the command line
  const char* base;   // cuGetProcAddress name
  const char* plain;  // exported names of the two variants
  const char* ptsz;
  bool per_thread;  // the _ptsz variant
  Kind kind;
};
const LaunchPathSpec kLaunchPaths[] = {
    {"kernel", "cuLaunchKernel", "cuLaunchKernel", "cuLaunchKernel_ptsz", false, Kind::kKernel},
    {"kernel_ptsz", "cuLaunchKernel", "cuLaunchKernel", "cuLaunchKernel_ptsz", true, Kind::kKernel},
    {"ex", "cuLaunchKernelEx", "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz", false, Kind::kEx},
    {"ex_ptsz", "cuLaunchKernelEx", "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz", true, Kind::kEx},
    {"coop", "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel",
     "cuLaunchCooperativeKernel_ptsz", false, Kind::kCoop},
    {"coop_ptsz", "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel",
     "cuLaunchCooperativeKernel_ptsz", true, Kind::kCoop},
    {"graph", "cuGraphLaunch", "cuGraphLaunch", "cuGraphLaunch_ptsz", false, Kind::kGraph},
    {"graph_ptsz", "cuGraphLaunch", "cuGraphLaunch", "cuGraphLaunch_ptsz", true, Kind::kGraph},
};

// A kernel "function" of its own per launch path, so each path is a shape of
// its own to libvgpu (the simulated driver runs any handle).
CUfunc_st* kernel_of(size_t path_index) {
  return reinterpret_cast<CUfunc_st*>(uintptr_t{0x5100} + 0x100 * path_index);
}

using LaunchKernelFn = CUresult (*)(CUfunc_st*, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    unsigned, unsigned, CUstream, void**, void**);
using LaunchExFn = CUresult (*)(const CUlaunchConfig*, CUfunc_st*, void**, void**);
using LaunchCoopFn = CUresult (*)(CUfunc_st*, unsigned, unsigned, unsigned, unsigned, unsigned,
                                  unsigned, unsigned, CUstream, void**);
using GraphLaunchFn = CUresult (*)(CUgraphExec, CUstream);

CUresult launch_once(Kind kind, void* fn, CUfunc_st* f, CUstream s, CUgraphExec exec) {
  switch (kind) {
    case Kind::kKernel:
      return reinterpret_cast<LaunchKernelFn>(fn)(f, 4, 1, 1, 128, 1, 1, 0, s, nullptr, nullptr);
    case Kind::kEx: {
      const CUlaunchConfig c{4, 1, 1, 128, 1, 1, 0, s, nullptr, 0};
      return reinterpret_cast<LaunchExFn>(fn)(&c, f, nullptr, nullptr);
    }
    case Kind::kCoop:
      return reinterpret_cast<LaunchCoopFn>(fn)(f, 4, 1, 1, 128, 1, 1, 0, s, nullptr);
    case Kind::kGraph:
      return reinterpret_cast<GraphLaunchFn>(fn)(exec, s);
  }
  return CUDA_ERROR_INVALID_VALUE;
}

// What the simulated driver counted (simgpu_calls of libsimgpu_core).
uint64_t sim_calls(const char* name) {
  using CallsFn = uint64_t (*)(const char*);
  static auto fn = reinterpret_cast<CallsFn>(dlsym(RTLD_DEFAULT, "simgpu_calls"));
  return fn != nullptr ? fn(name) : 0;
}

struct SimCounts {
  uint64_t plain, ptsz, ran, captured, records, queries;
};
SimCounts sim_counts(const char* plain, const char* ptsz) {
  return {plain ? sim_calls(plain) : 0,
          ptsz ? sim_calls(ptsz) : 0,
          sim_calls("gpu:ran"),
          sim_calls("gpu:captured"),
          sim_calls("cuEventRecord") + sim_calls("cuEventRecord_ptsz"),
          sim_calls("cuEventQuery")};
}
std::string sim_delta(const SimCounts& a, const SimCounts& b) {
  return " plain=" + std::to_string(b.plain - a.plain) +
         " ptsz=" + std::to_string(b.ptsz - a.ptsz) + " ran=" + std::to_string(b.ran - a.ran) +
         " captured=" + std::to_string(b.captured - a.captured) +
         " records=" + std::to_string(b.records - a.records) +
         " queries=" + std::to_string(b.queries - a.queries);
}

// glibc's own dlsym, fetched past whatever dlsym the process's lookups reach:
// the first thing a program that wants the real driver tries.
void* glibc_dlsym(void* handle, const char* name) {
  using DlsymFn = void* (*)(void*, const char*);
  static auto fn = reinterpret_cast<DlsymFn>(dlvsym(RTLD_DEFAULT, "dlsym", "GLIBC_2.34"));
  return fn != nullptr ? fn(handle, name) : nullptr;
}

// Passes a descriptor to another process over a unix socket (SCM_RIGHTS).
bool send_fd(const std::string& path, int fd) {
  const int srv = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  ::unlink(path.c_str());
  if (srv < 0 || ::bind(srv, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(srv, 1) != 0)
    return false;
  const int c = ::accept(srv, nullptr, nullptr);
  char byte = 'f';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(cm), &fd, sizeof fd);
  const bool ok = c >= 0 && ::sendmsg(c, &msg, 0) == 1;
  if (c >= 0) ::close(c);
  ::close(srv);
  return ok;
}

int recv_fd(const std::string& path) {
  const int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  bool connected = false;
  for (int i = 0; s >= 0 && i < 500 && !connected; ++i) {
    connected = ::connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    if (!connected) ::usleep(10'000);
  }
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  int fd = -1;
  if (connected && ::recvmsg(s, &msg, 0) == 1) {
    cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    if (cm != nullptr && cm->cmsg_type == SCM_RIGHTS) std::memcpy(&fd, CMSG_DATA(cm), sizeof fd);
  }
  if (s >= 0) ::close(s);
  return fd;
}

std::string symbol_of(void* p) {
  Dl_info info{};
  if (p == nullptr || dladdr(p, &info) == 0 || info.dli_fname == nullptr)
    return " lib=none fn=none";
  const char* lib = std::strrchr(info.dli_fname, '/');
  return std::string(" lib=") + (lib ? lib + 1 : info.dli_fname) +
         " fn=" + (info.dli_sname ? info.dli_sname : "?");
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::string via = "link";
  int first = 1;
  if (argc > 1 && std::strncmp(argv[1], "--via=", 6) == 0) {
    via = argv[1] + 6;
    first = 2;
  }
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW);
  Api api{};
  if (via == "link") {
    // RTLD_DEFAULT: the global scope, where a preloaded library comes first,
    // exactly like the program's own calls to linked functions.
    resolve(
        api, [](const char*, const char* exported) { return dlsym(RTLD_DEFAULT, exported); }, nvml);
  } else if (via == "dlsym") {
    resolve(
        api, [&](const char*, const char* exported) { return dlsym(cuda, exported); }, nvml);
  } else if (via == "procaddr" || via == "procaddr-ptds") {
    auto gpa = reinterpret_cast<decltype(&cuGetProcAddress_v2)>(dlsym(cuda, "cuGetProcAddress_v2"));
    const cuuint64_t flags =
        via == "procaddr-ptds" ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0;
    resolve(
        api,
        [&](const char* base, const char*) -> void* {
          std::string name = base;
          int version = 13000;
          if (auto at = name.find('@'); at != std::string::npos) {
            version = std::atoi(name.c_str() + at + 1);
            name.resize(at);
          }
          void* p = nullptr;
          CUdriverProcAddressQueryResult st{};
          return gpa(name.c_str(), &p, version, flags, &st) == CUDA_SUCCESS ? p : nullptr;
        },
        nvml);
  } else if (via == "dlvsym") {
    resolve(
        api, [&](const char*, const char* exported) { return glibc_dlsym(cuda, exported); }, nvml);
  } else if (via == "next") {
    if (hami_next_lookup == nullptr) {
      std::fprintf(stderr, "cuda-client: built without libnext_cuda.so: no --via=next\n");
      return 2;
    }
    resolve(
        api, [](const char*, const char* exported) { return hami_next_lookup(exported); }, nvml);
  } else {
    std::fprintf(stderr, "cuda-client: unknown --via=%s\n", via.c_str());
    return 2;
  }

  if (via == "link") api.cuInit = &::cuInit;  // a real reference: libcuda is a DT_NEEDED

  // Named lookups for "whois", through the same path as everything else.
  auto lookup = [&](const std::string& n) -> void* {
    if (via == "link") return dlsym(RTLD_DEFAULT, n.c_str());
    if (via == "dlsym") return dlsym(cuda, n.c_str());
    if (via == "dlvsym") return glibc_dlsym(cuda, n.c_str());
    if (via == "next") return hami_next_lookup(n.c_str());
    auto gpa = reinterpret_cast<decltype(&cuGetProcAddress_v2)>(dlsym(cuda, "cuGetProcAddress_v2"));
    void* p = nullptr;
    gpa(n.c_str(), &p, 13000,
        via == "procaddr-ptds" ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0, nullptr);
    return p;
  };

  // A driver function through the chosen lookup path. `base` may carry the
  // CUDA version to ask for ("name@10000"); `ptsz`: the per-thread variant
  // (the _ptsz export, or the per-thread flag of cuGetProcAddress).
  auto route = [&](const std::string& base, const std::string& exported, bool ptsz) -> void* {
    const std::string name = ptsz ? exported + "_ptsz" : exported;
    if (via == "link") return dlsym(RTLD_DEFAULT, name.c_str());
    if (via == "dlsym") return dlsym(cuda, name.c_str());
    auto gpa = reinterpret_cast<decltype(&cuGetProcAddress_v2)>(dlsym(cuda, "cuGetProcAddress_v2"));
    std::string b = base;
    int version = 13000;
    if (auto at = b.find('@'); at != std::string::npos) {
      version = std::atoi(b.c_str() + at + 1);
      b.resize(at);
    }
    const cuuint64_t flags = via == "procaddr-ptds" || ptsz
                                 ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                 : CU_GET_PROC_ADDRESS_DEFAULT;
    void* p = nullptr;
    return gpa(b.c_str(), &p, version, flags, nullptr) == CUDA_SUCCESS ? p : nullptr;
  };

  // Graph memory and capture state, VMM mappings, modules (ops above).
  CUstream gstream = nullptr;
  CUgraph ggraph = nullptr;
  CUgraphExec gexec = nullptr;
  std::vector<CUdeviceptr> gptrs;
  std::vector<std::pair<CUdeviceptr, size_t>> mappings;
  CUmemGenericAllocationHandle last_handle = 0;
  int exported_fd = -1;
  std::vector<CUmodule> modules;
  std::vector<CUlibrary> libraries;
  auto drv = [&](const char* base, const char* exported) { return route(base, exported, false); };
  auto map_handle = [&](CUmemGenericAllocationHandle h, size_t size, int ord) -> CUresult {
    CUdeviceptr base = 0;
    CUresult r = api.cuMemAddressReserve(&base, size, 0, 0, 0);
    if (r == CUDA_SUCCESS) r = api.cuMemMap(base, size, 0, h, 0);
    if (r != CUDA_SUCCESS) return r;
    mappings.push_back({base, size});
    const CUmemAccessDesc access{{CU_MEM_LOCATION_TYPE_DEVICE, ord}, 3};
    return api.cuMemSetAccess(base, size, &access, 1);
  };

  std::vector<Held> held;
  std::vector<CUcontext> created;
  CUstream cur_stream = nullptr;
  pid_t forked = -1;
  CUmemoryPool own_pool = nullptr;
  for (int i = first; i < argc; ++i) {
    const std::string op = argv[i];
    const auto parts = split(op, ':');
    const std::string& name = parts[0];
    CUresult rc = CUDA_SUCCESS;
    std::string extra;
    const double started = now_ms();
    if (name == "init") {
      rc = api.cuInit(0);
      if (rc == CUDA_SUCCESS && api.nvmlInit) api.nvmlInit();
    } else if (name == "ctx") {
      CUcontext c = nullptr;
      rc = api.cuDevicePrimaryCtxRetain(&c, std::atoi(parts[1].c_str()));
      if (rc == CUDA_SUCCESS) api.cuCtxSetCurrent(c);
    } else if (name == "ctxcreate") {
      CUcontext c = nullptr;
      rc = api.cuCtxCreate(&c, nullptr, 0, std::atoi(parts[1].c_str()));
      if (rc == CUDA_SUCCESS) created.push_back(c);
    } else if (name == "ctxdestroy") {
      rc = api.cuCtxDestroy(created.back());
      created.pop_back();
    } else if (name == "release") {
      rc = api.cuDevicePrimaryCtxRelease(std::atoi(parts[1].c_str()));
    } else if (name == "reset") {
      rc = api.cuDevicePrimaryCtxReset(std::atoi(parts[1].c_str()));
    } else if (name == "alloc" || name == "managed" || name == "async") {
      CUdeviceptr p = 0;
      const uint64_t n = size_arg(parts[1]);
      rc = name == "alloc"     ? api.cuMemAlloc(&p, n)
           : name == "managed" ? api.cuMemAllocManaged(&p, n, 1)
                               : api.cuMemAllocAsync(&p, n, nullptr);
      if (rc == CUDA_SUCCESS) held.push_back({name == "async" ? 'a' : 'p', p});
      char b[64];
      std::snprintf(b, sizeof b, " ptr=0x%" PRIx64, static_cast<uint64_t>(p));
      extra = b;
    } else if (name == "alloc-v1") {
      unsigned p = 0;
      rc = api.cuMemAllocV1 ? api.cuMemAllocV1(&p, static_cast<unsigned>(size_arg(parts[1])))
                            : CUDA_ERROR_NOT_FOUND;
    } else if (name == "pitch") {
      const auto wh = split(parts[1], 'x');
      CUdeviceptr p = 0;
      size_t pitch = 0;
      rc = api.cuMemAllocPitch(&p, &pitch, size_arg(wh[0]), size_arg(wh[1]), 4);
      if (rc == CUDA_SUCCESS) held.push_back({'p', p});
      extra = " pitch=" + std::to_string(pitch);
    } else if (name == "pool") {
      CUmemoryPool pool = nullptr;
      rc = api.cuDeviceGetDefaultMemPool(&pool, std::atoi(parts[1].c_str()));
      CUdeviceptr p = 0;
      if (rc == CUDA_SUCCESS)
        rc = api.cuMemAllocFromPoolAsync(&p, size_arg(parts[2]), pool, nullptr);
      if (rc == CUDA_SUCCESS) held.push_back({'a', p});
    } else if (name == "poolnew") {
      // CUmemPoolProps begins like CUmemAllocationProp; the rest must be zero.
      unsigned char props[88] = {};
      CUmemAllocationProp head{};
      head.type = 1;
      head.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      head.location.id = std::atoi(parts[1].c_str());
      std::memcpy(props, &head, 16);
      rc = api.cuMemPoolCreate(&own_pool, reinterpret_cast<CUmemAllocationProp*>(props));
    } else if (name == "poolalloc") {
      CUdeviceptr p = 0;
      rc = api.cuMemAllocFromPoolAsync(&p, size_arg(parts[1]), own_pool, nullptr);
      if (rc == CUDA_SUCCESS) held.push_back({'a', p});
    } else if (name == "pooldestroy") {
      rc = api.cuMemPoolDestroy(own_pool);
    } else if (name == "vmm" || name == "vmm-host") {
      CUmemAllocationProp prop{};
      const bool host = name == "vmm-host";
      prop.type = 1;
      prop.location.type = host ? 2 : CU_MEM_LOCATION_TYPE_DEVICE;
      prop.location.id = host ? 0 : std::atoi(parts[1].c_str());
      CUmemGenericAllocationHandle h = 0;
      rc = api.cuMemCreate(&h, size_arg(parts[host ? 1 : 2]), &prop, 0);
      if (rc == CUDA_SUCCESS) held.push_back({'h', h});
    } else if (name == "expand") {
      // PyTorch's expandable segments: one address range, grown chunk by
      // chunk with cuMemCreate + cuMemMap + cuMemSetAccess for the device.
      const int ord = std::atoi(parts[1].c_str());
      const uint64_t chunk = size_arg(parts[2]);
      const int n = std::atoi(parts[3].c_str());
      CUdeviceptr base = 0;
      rc = api.cuMemAddressReserve(&base, chunk * static_cast<uint64_t>(n), 0, 0, 0);
      int mapped = 0;
      for (; rc == CUDA_SUCCESS && mapped < n; ++mapped) {
        CUmemAllocationProp prop{};
        prop.type = 1;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = ord;
        prop.requestedHandleTypes = 1;  // a POSIX file descriptor, as PyTorch asks
        CUmemGenericAllocationHandle h = 0;
        rc = api.cuMemCreate(&h, chunk, &prop, 0);
        if (rc != CUDA_SUCCESS) break;
        held.push_back({'h', h});
        const CUdeviceptr at = base + chunk * static_cast<uint64_t>(mapped);
        rc = api.cuMemMap(at, chunk, 0, h, 0);
        if (rc == CUDA_SUCCESS) mappings.push_back({at, chunk});
        struct {
          CUmemLocation location;
          int flags;
        } access{{CU_MEM_LOCATION_TYPE_DEVICE, ord}, 3};
        if (rc == CUDA_SUCCESS) rc = api.cuMemSetAccess(at, chunk, &access, 1);
      }
      extra = " mapped=" + std::to_string(mapped);
    } else if (name == "simcalls") {
      extra = " n=" + std::to_string(sim_calls(op.substr(op.find(':') + 1).c_str()));
    } else if (name == "array") {
      const auto wh = split(parts[1], 'x');
      CUDA_ARRAY_DESCRIPTOR d{size_arg(wh[0]), size_arg(wh[1]), 0x20, 1};
      CUarray a = nullptr;
      rc = api.cuArrayCreate(&a, &d);
      if (rc == CUDA_SUCCESS) held.push_back({'r', reinterpret_cast<uint64_t>(a)});
    } else if (name == "array3d") {
      const auto whd = split(parts[1], 'x');
      CUDA_ARRAY3D_DESCRIPTOR d{size_arg(whd[0]), size_arg(whd[1]), size_arg(whd[2]), 0x01, 4, 0};
      CUarray a = nullptr;
      rc = api.cuArray3DCreate(&a, &d);
      if (rc == CUDA_SUCCESS) held.push_back({'r', reinterpret_cast<uint64_t>(a)});
    } else if (name == "mipmap") {
      const auto wh = split(parts[1], 'x');
      CUDA_ARRAY3D_DESCRIPTOR d{size_arg(wh[0]), size_arg(wh[1]), 0, 0x20, 1, 0};
      CUmipmappedArray m = nullptr;
      rc = api.cuMipmappedArrayCreate(&m, &d, static_cast<unsigned>(std::atoi(parts[2].c_str())));
      if (rc == CUDA_SUCCESS) held.push_back({'m', reinterpret_cast<uint64_t>(m)});
    } else if (name == "free") {
      Held h = held.at(static_cast<size_t>(std::atoi(parts[1].c_str())));
      switch (h.kind) {
        case 'p':
          rc = api.cuMemFree(h.value);
          break;
        case 'a':
          rc = api.cuMemFreeAsync(h.value, nullptr);
          break;
        case 'h':
          rc = api.cuMemRelease(h.value);
          break;
        case 'r':
          rc = api.cuArrayDestroy(reinterpret_cast<CUarray>(h.value));
          break;
        case 'm':
          rc = api.cuMipmappedArrayDestroy(reinterpret_cast<CUmipmappedArray>(h.value));
          break;
      }
    } else if (name == "freeptr") {
      rc = api.cuMemFree(std::strtoull(parts[1].c_str(), nullptr, 16));
    } else if (name == "meminfo") {
      size_t f = 0, t = 0;
      rc = api.cuMemGetInfo(&f, &t);
      extra = " free=" + std::to_string(f) + " total=" + std::to_string(t);
    } else if (name == "totalmem") {
      size_t t = 0;
      rc = api.cuDeviceTotalMem(&t, std::atoi(parts[1].c_str()));
      extra = " total=" + std::to_string(t);
    } else if (name == "nvml" || name == "nvml2") {
      nvmlDevice_t d = nullptr;
      rc = api.nvmlDeviceGetHandleByIndex(static_cast<unsigned>(std::atoi(parts[1].c_str())), &d);
      if (rc == 0 && name == "nvml") {
        nvmlMemory_t m{};
        rc = api.nvmlDeviceGetMemoryInfo(d, &m);
        extra = " total=" + std::to_string(m.total) + " used=" + std::to_string(m.used) +
                " free=" + std::to_string(m.free);
      } else if (rc == 0) {
        nvmlMemory_v2_t m{};
        m.version = nvmlMemory_v2;
        rc = api.nvmlDeviceGetMemoryInfo_v2(d, &m);
        extra = " total=" + std::to_string(m.total) + " used=" + std::to_string(m.used) +
                " free=" + std::to_string(m.free) + " reserved=" + std::to_string(m.reserved);
      }
    } else if (name == "procmem") {
      nvmlDevice_t d = nullptr;
      rc = api.nvmlDeviceGetHandleByIndex(static_cast<unsigned>(std::atoi(parts[1].c_str())), &d);
      std::vector<nvmlProcessInfo_t> infos(256);
      unsigned n = static_cast<unsigned>(infos.size());
      if (rc == 0) rc = api.nvmlDeviceGetComputeRunningProcesses(d, &n, infos.data());
      uint64_t mine = 0;
      for (unsigned k = 0; rc == 0 && k < n; ++k) {
        if (infos[k].pid == static_cast<unsigned>(getpid())) mine += infos[k].usedGpuMemory;
      }
      extra = " used=" + std::to_string(mine);
    } else if (name == "charged") {
      const char* path = std::getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE");
      auto snap = hami::region::read_snapshot(path != nullptr ? path : "/tmp/cudevshr.cache");
      uint64_t mine = 0, ctx = 0;
      const int dev = std::atoi(parts[1].c_str());
      if (snap) {
        for (const auto& slot : snap->slots) {
          if (slot.pid == getpid()) {
            mine = slot.used[dev].total;
            ctx = slot.used[dev].context;
          }
        }
      }
      rc = snap ? 0 : 1;
      extra = " total=" + std::to_string(mine) + " context=" + std::to_string(ctx);
    } else if (name == "fill") {
      const uint64_t chunk = size_arg(parts[1]);
      uint64_t got = 0;
      CUdeviceptr p = 0;
      while ((rc = api.cuMemAlloc(&p, chunk)) == CUDA_SUCCESS) {
        held.push_back({'p', p});
        got += chunk;
      }
      extra = " allocated=" + std::to_string(got);
    } else if (name == "launch") {
      Dl_info info{};
      rc = api.cuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr);
      const bool ok = dladdr(api.launch_kernel_raw, &info) != 0 && info.dli_fname != nullptr;
      extra = std::string(" from=") + (ok ? info.dli_fname : "?");
    } else if (name == "launchpath") {
      size_t index = 0;
      while (index < std::size(kLaunchPaths) && parts[1] != kLaunchPaths[index].name)
        ++index;
      if (index == std::size(kLaunchPaths)) {
        std::fprintf(stderr, "cuda-client: unknown launch path %s\n", parts[1].c_str());
        return 2;
      }
      const LaunchPathSpec& path = kLaunchPaths[index];
      const int n = std::atoi(parts[2].c_str());
      void* fn = route(path.base, path.plain, path.per_thread);
      CUgraph graph = nullptr;
      CUgraphExec exec = nullptr;
      if (fn == nullptr) rc = CUDA_ERROR_NOT_FOUND;
      if (rc == CUDA_SUCCESS && path.kind == Kind::kGraph) {
        rc = api.cuGraphCreate(&graph, 0);
        if (rc == CUDA_SUCCESS) rc = api.cuGraphInstantiateWithFlags(&exec, graph, 0);
      }
      const SimCounts before = sim_counts(path.plain, path.ptsz);
      for (int k = 0; k < n && rc == CUDA_SUCCESS; ++k)
        rc = launch_once(path.kind, fn, kernel_of(index), cur_stream, exec);
      const SimCounts after = sim_counts(path.plain, path.ptsz);
      if (exec != nullptr) api.cuGraphExecDestroy(exec);
      if (graph != nullptr) api.cuGraphDestroy(graph);
      extra = symbol_of(fn) + sim_delta(before, after);
    } else if (name == "stream") {
      if (parts.size() > 1 && parts[1] == "0") {
        cur_stream = nullptr;
      } else {
        rc = api.cuStreamCreate(&cur_stream, parts.size() > 1 && parts[1] == "nb" ? 1 : 0);
      }
    } else if (name == "sync") {
      rc = api.cuCtxSynchronize();
    } else if (name == "capture") {
      const int n = std::atoi(parts[1].c_str());
      const std::string begin = parts.size() > 2 ? parts[2] : "v2";
      const int m = parts.size() > 3 ? std::atoi(parts[3].c_str()) : 0;
      void* begin_fn =
          begin == "v1" ? route("cuStreamBeginCapture@10000", "cuStreamBeginCapture", false)
          : begin == "tograph"
              ? route("cuStreamBeginCaptureToGraph", "cuStreamBeginCaptureToGraph", false)
              : route("cuStreamBeginCapture", "cuStreamBeginCapture_v2", false);
      auto end_fn = reinterpret_cast<CUresult (*)(CUstream, CUgraph*)>(
          route("cuStreamEndCapture", "cuStreamEndCapture", false));
      auto is_fn = reinterpret_cast<CUresult (*)(CUstream, CUstreamCaptureStatus*)>(
          route("cuStreamIsCapturing", "cuStreamIsCapturing", false));
      void* launch_fn = route("cuLaunchKernel", "cuLaunchKernel", false);
      CUstream cap = nullptr, other = nullptr;
      CUgraph target = nullptr, graph = nullptr;
      CUresult rb = api.cuStreamCreate(&cap, 0), rl = CUDA_SUCCESS, ro = CUDA_SUCCESS,
               re = CUDA_SUCCESS;
      if (rb == CUDA_SUCCESS && m > 0) rb = api.cuStreamCreate(&other, 0);
      if (rb == CUDA_SUCCESS && begin == "tograph") rb = api.cuGraphCreate(&target, 0);
      const SimCounts before = sim_counts(nullptr, nullptr);
      if (rb == CUDA_SUCCESS) {
        if (begin == "v1") {
          rb = reinterpret_cast<CUresult (*)(CUstream)>(begin_fn)(cap);
        } else if (begin == "tograph") {
          rb = reinterpret_cast<CUresult (*)(CUstream, CUgraph, const CUgraphNode*,
                                             const CUgraphEdgeData*, size_t, CUstreamCaptureMode)>(
              begin_fn)(cap, target, nullptr, nullptr, 0, 0);
        } else {
          rb = reinterpret_cast<CUresult (*)(CUstream, CUstreamCaptureMode)>(begin_fn)(cap, 0);
        }
      }
      CUstreamCaptureStatus status = -1;
      if (rb == CUDA_SUCCESS) {
        for (int k = 0; k < n && rl == CUDA_SUCCESS; ++k)
          rl = launch_once(Kind::kKernel, launch_fn, kernel_of(0), cap, nullptr);
        for (int k = 0; k < m && ro == CUDA_SUCCESS; ++k)
          ro = launch_once(Kind::kKernel, launch_fn, kernel_of(0), other, nullptr);
        is_fn(cap, &status);
        re = end_fn(cap, &graph);
      }
      const SimCounts after = sim_counts(nullptr, nullptr);
      rc = rb != CUDA_SUCCESS ? rb : rl != CUDA_SUCCESS ? rl : ro != CUDA_SUCCESS ? ro : re;
      extra = " begin=" + std::to_string(rb) + " launch=" + std::to_string(rl) +
              " other=" + std::to_string(ro) + " status=" + std::to_string(status) +
              " end=" + std::to_string(re) + sim_delta(before, after);
      if (graph != nullptr) api.cuGraphDestroy(graph);
      if (target != nullptr) api.cuGraphDestroy(target);
      if (other != nullptr) api.cuStreamDestroy(other);
      if (cap != nullptr) api.cuStreamDestroy(cap);
    } else if (name == "gbegin") {
      const std::string m = parts.size() > 1 ? parts[1] : "global";
      const CUstreamCaptureMode mode = m == "thread"    ? CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
                                       : m == "relaxed" ? CU_STREAM_CAPTURE_MODE_RELAXED
                                                        : CU_STREAM_CAPTURE_MODE_GLOBAL;
      if (gstream == nullptr) rc = api.cuStreamCreate(&gstream, 1);
      auto begin = reinterpret_cast<CUresult (*)(CUstream, CUstreamCaptureMode)>(
          drv("cuStreamBeginCapture", "cuStreamBeginCapture_v2"));
      if (rc == CUDA_SUCCESS) rc = begin(gstream, mode);
    } else if (name == "galloc") {
      CUdeviceptr p = 0;
      rc = api.cuMemAllocAsync(&p, size_arg(parts[1]), gstream);
      if (rc == CUDA_SUCCESS) gptrs.push_back(p);
    } else if (name == "gfree") {
      rc = api.cuMemFreeAsync(gptrs.back(), gstream);
      gptrs.pop_back();
    } else if (name == "gstatus") {
      CUstreamCaptureStatus st = -1;
      rc = reinterpret_cast<CUresult (*)(CUstream, CUstreamCaptureStatus*)>(
          drv("cuStreamIsCapturing", "cuStreamIsCapturing"))(gstream, &st);
      extra = " status=" + std::to_string(st);
    } else if (name == "gend") {
      rc = reinterpret_cast<CUresult (*)(CUstream, CUgraph*)>(
          drv("cuStreamEndCapture", "cuStreamEndCapture"))(gstream, &ggraph);
    } else if (name == "gnode") {
      if (ggraph == nullptr) rc = api.cuGraphCreate(&ggraph, 0);
      CUDA_MEM_ALLOC_NODE_PARAMS params{};
      params.poolProps.allocType = 1;
      params.poolProps.location = {CU_MEM_LOCATION_TYPE_DEVICE, std::atoi(parts[1].c_str())};
      params.bytesize = size_arg(parts[2]);
      CUgraphNode node = nullptr;
      if (rc == CUDA_SUCCESS)
        rc = reinterpret_cast<CUresult (*)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t,
                                           CUDA_MEM_ALLOC_NODE_PARAMS*)>(
            drv("cuGraphAddMemAllocNode", "cuGraphAddMemAllocNode"))(&node, ggraph, nullptr, 0,
                                                                     &params);
    } else if (name == "ginst") {
      if (parts.size() > 1 && parts[1] == "upload") {
        CUDA_GRAPH_INSTANTIATE_PARAMS params{2, gstream, nullptr, 0};
        rc = reinterpret_cast<CUresult (*)(CUgraphExec*, CUgraph, CUDA_GRAPH_INSTANTIATE_PARAMS*)>(
            drv("cuGraphInstantiateWithParams", "cuGraphInstantiateWithParams"))(&gexec, ggraph,
                                                                                 &params);
      } else {
        rc = api.cuGraphInstantiateWithFlags(&gexec, ggraph, 0);
      }
    } else if (name == "gupload") {
      rc = reinterpret_cast<CUresult (*)(CUgraphExec, CUstream)>(
          drv("cuGraphUpload", "cuGraphUpload"))(gexec, gstream);
    } else if (name == "glaunch") {
      auto launch = reinterpret_cast<GraphLaunchFn>(drv("cuGraphLaunch", "cuGraphLaunch"));
      const int n = parts.size() > 1 ? std::atoi(parts[1].c_str()) : 1;
      for (int k = 0; k < n && rc == CUDA_SUCCESS; ++k)
        rc = launch(gexec, gstream);
    } else if (name == "gexecdestroy") {
      rc = api.cuGraphExecDestroy(gexec);
      gexec = nullptr;
    } else if (name == "gtrim") {
      rc = reinterpret_cast<CUresult (*)(CUdevice)>(
          drv("cuDeviceGraphMemTrim", "cuDeviceGraphMemTrim"))(std::atoi(parts[1].c_str()));
    } else if (name == "graphmem") {
      auto attr = reinterpret_cast<CUresult (*)(CUdevice, CUgraphMem_attribute, void*)>(
          drv("cuDeviceGetGraphMemAttribute", "cuDeviceGetGraphMemAttribute"));
      cuuint64_t used = 0, reserved = 0;
      const int ord = std::atoi(parts[1].c_str());
      rc = attr(ord, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used);
      if (rc == CUDA_SUCCESS) rc = attr(ord, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &reserved);
      extra = " used=" + std::to_string(used) + " reserved=" + std::to_string(reserved);
    } else if (name == "threadmode") {
      CUstreamCaptureMode mode = parts[1] == "thread"    ? CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
                                 : parts[1] == "relaxed" ? CU_STREAM_CAPTURE_MODE_RELAXED
                                                         : CU_STREAM_CAPTURE_MODE_GLOBAL;
      rc = reinterpret_cast<CUresult (*)(CUstreamCaptureMode*)>(
          drv("cuThreadExchangeStreamCaptureMode", "cuThreadExchangeStreamCaptureMode"))(&mode);
    } else if (name == "vmmmap") {
      CUmemAllocationProp prop{};
      prop.type = 1;
      prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
      prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, std::atoi(parts[1].c_str())};
      const size_t size = size_arg(parts[2]);
      rc = api.cuMemCreate(&last_handle, size, &prop, 0);
      if (rc == CUDA_SUCCESS) {
        held.push_back({'h', last_handle});
        rc = map_handle(last_handle, size, prop.location.id);
      }
    } else if (name == "unmap") {
      const auto& m = mappings.at(static_cast<size_t>(std::atoi(parts[1].c_str())));
      rc = reinterpret_cast<CUresult (*)(CUdeviceptr, size_t)>(drv("cuMemUnmap", "cuMemUnmap"))(
          m.first, m.second);
    } else if (name == "export") {
      rc = reinterpret_cast<CUresult (*)(void*, CUmemGenericAllocationHandle,
                                         CUmemAllocationHandleType, unsigned long long)>(
          drv("cuMemExportToShareableHandle", "cuMemExportToShareableHandle"))(
          &exported_fd, last_handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    } else if (name == "sendfd") {
      rc = send_fd(op.substr(op.find(':') + 1), exported_fd) ? CUDA_SUCCESS
                                                             : CUDA_ERROR_INVALID_VALUE;
    } else if (name == "recvfd") {
      exported_fd = recv_fd(op.substr(op.find(':') + 1));
      rc = exported_fd >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    } else if (name == "importmap") {
      CUmemGenericAllocationHandle h = 0;
      rc = reinterpret_cast<CUresult (*)(CUmemGenericAllocationHandle*, void*,
                                         CUmemAllocationHandleType)>(
          drv("cuMemImportFromShareableHandle", "cuMemImportFromShareableHandle"))(
          &h, reinterpret_cast<void*>(static_cast<intptr_t>(exported_fd)),
          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
      if (rc == CUDA_SUCCESS) {
        held.push_back({'h', h});
        last_handle = h;
        rc = map_handle(h, size_arg(parts[1]), 0);
      }
    } else if (name == "setlimit") {
      const CUlimit limit = parts[1] == "stack"  ? CU_LIMIT_STACK_SIZE
                            : parts[1] == "heap" ? CU_LIMIT_MALLOC_HEAP_SIZE
                                                 : CU_LIMIT_PRINTF_FIFO_SIZE;
      rc = reinterpret_cast<CUresult (*)(CUlimit, size_t)>(drv("cuCtxSetLimit", "cuCtxSetLimit"))(
          limit, size_arg(parts[2]));
    } else if (name == "modload" || name == "modfile") {
      CUmodule m = nullptr;
      const std::string image = "simgpu-module globals=" + std::to_string(size_arg(parts[1]));
      rc = name == "modload"
               ? reinterpret_cast<CUresult (*)(CUmodule*, const void*)>(
                     drv("cuModuleLoadData", "cuModuleLoadData"))(&m, image.c_str())
               : reinterpret_cast<CUresult (*)(CUmodule*, const char*)>(
                     drv("cuModuleLoad", "cuModuleLoad"))(&m, op.substr(op.find(':') + 1).c_str());
      if (rc == CUDA_SUCCESS) modules.push_back(m);
    } else if (name == "modunload") {
      rc = reinterpret_cast<CUresult (*)(CUmodule)>(drv("cuModuleUnload", "cuModuleUnload"))(
          modules.back());
      modules.pop_back();
    } else if (name == "libload" || name == "libfile") {
      CUlibrary l = nullptr;
      if (name == "libload") {
        const std::string image = "simgpu-module globals=" + std::to_string(size_arg(parts[1]));
        rc = reinterpret_cast<CUresult (*)(CUlibrary*, const void*, CUjit_option*, void**, unsigned,
                                           CUlibraryOption*, void**, unsigned)>(
            drv("cuLibraryLoadData", "cuLibraryLoadData"))(&l, image.c_str(), nullptr, nullptr, 0,
                                                           nullptr, nullptr, 0);
      } else {
        rc = reinterpret_cast<CUresult (*)(CUlibrary*, const char*, CUjit_option*, void**, unsigned,
                                           CUlibraryOption*, void**, unsigned)>(
            drv("cuLibraryLoadFromFile", "cuLibraryLoadFromFile"))(
            &l, op.substr(op.find(':') + 1).c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0);
      }
      if (rc == CUDA_SUCCESS) libraries.push_back(l);
    } else if (name == "libkernel") {
      CUkernel k = nullptr;
      CUfunction f = nullptr;
      rc = reinterpret_cast<CUresult (*)(CUkernel*, CUlibrary, const char*)>(
          drv("cuLibraryGetKernel", "cuLibraryGetKernel"))(
          &k, libraries.back(), parts.size() > 1 ? parts[1].c_str() : "k");
      if (rc == CUDA_SUCCESS)
        rc = reinterpret_cast<CUresult (*)(CUfunction*, CUkernel)>(
            drv("cuKernelGetFunction", "cuKernelGetFunction"))(&f, k);
    } else if (name == "liblaunch") {
      // A library kernel launched as it is, as the CUDA runtime's lazy
      // loading does: the library loads inside the launch.
      CUkernel k = nullptr;
      rc = reinterpret_cast<CUresult (*)(CUkernel*, CUlibrary, const char*)>(
          drv("cuLibraryGetKernel", "cuLibraryGetKernel"))(
          &k, libraries.back(), parts.size() > 1 ? parts[1].c_str() : "k");
      if (rc == CUDA_SUCCESS)
        rc = api.cuLaunchKernel(reinterpret_cast<CUfunc_st*>(k), 1, 1, 1, 32, 1, 1, 0, nullptr,
                                nullptr, nullptr);
    } else if (name == "libmodule") {
      CUmodule m = nullptr;
      rc = reinterpret_cast<CUresult (*)(CUmodule*, CUlibrary)>(
          drv("cuLibraryGetModule", "cuLibraryGetModule"))(&m, libraries.back());
    } else if (name == "libunload") {
      rc = reinterpret_cast<CUresult (*)(CUlibrary)>(drv("cuLibraryUnload", "cuLibraryUnload"))(
          libraries.back());
      libraries.pop_back();
    } else if (name == "mark") {
    } else if (name == "fork") {
      std::fflush(stdout);
      forked = fork();
      if (forked > 0) {  // parent: skip to join
        while (i + 1 < argc && std::strcmp(argv[i + 1], "join") != 0)
          ++i;
        continue;
      }
      extra = " child=1";
    } else if (name == "join") {
      if (forked == 0) {
        std::printf("op=join rc=0 child=1\n");
        std::fflush(stdout);
        std::exit(0);  // a normal exit: libvgpu releases the child's slot
      }
      int status = 0;
      waitpid(forked, &status, 0);
      rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    } else if (name == "whois") {
      void* p = lookup(parts[1]);
      Dl_info info{};
      const bool ok = p != nullptr && dladdr(p, &info) != 0 && info.dli_fname != nullptr;
      const char* lib = ok ? std::strrchr(info.dli_fname, '/') : nullptr;
      extra = std::string(" lib=") + (lib ? lib + 1 : ok ? info.dli_fname : "none");
    } else if (name == "umask") {
      std::ifstream st("/proc/self/status");
      std::string line;
      while (std::getline(st, line)) {
        if (line.rfind("Umask:", 0) == 0)
          extra = " umask=" + line.substr(line.find_last_of(" \t") + 1);
      }
    } else if (name == "signals") {
      for (int sig : {SIGUSR1, SIGUSR2, SIGSEGV, SIGBUS, SIGCHLD}) {
        struct sigaction sa {};
        sigaction(sig, nullptr, &sa);
        extra +=
            " sig" + std::to_string(sig) + "=" + (sa.sa_handler == SIG_DFL ? "default" : "set");
      }
    } else if (name == "waittotal") {
      // Bounded polling for a resize: cuMemGetInfo until its total is <size>
      // or <ms> pass (then rc=999).
      const uint64_t want = size_arg(parts[1]);
      const double deadline = now_ms() + std::atof(parts[2].c_str());
      size_t f = 0, t = 0;
      for (;;) {
        rc = api.cuMemGetInfo(&f, &t);
        if (rc != CUDA_SUCCESS || t == want) break;
        if (now_ms() > deadline) {
          rc = 999;
          break;
        }
        usleep(2000);
      }
      extra = " free=" + std::to_string(f) + " total=" + std::to_string(t);
    } else if (name == "infoloop") {
      size_t f = 0, t = 0;
      const int n = std::atoi(parts[1].c_str());
      for (int k = 0; k < n && rc == CUDA_SUCCESS; ++k)
        rc = api.cuMemGetInfo(&f, &t);
    } else if (name == "churn") {
      const uint64_t chunk = size_arg(parts[1]);
      const int n = std::atoi(parts[2].c_str());
      for (int k = 0; k < n && rc == CUDA_SUCCESS; ++k) {
        CUdeviceptr p = 0;
        rc = api.cuMemAlloc(&p, chunk);
        if (rc == CUDA_SUCCESS) rc = api.cuMemFree(p);
      }
    } else if (name == "await") {
      while (access(parts[1].c_str(), F_OK) != 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    } else if (name == "sleep") {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(parts[1].c_str())));
    } else if (name == "hold") {
      char c;
      while (read(0, &c, 1) > 0) {
      }
    } else if (name == "exit") {
      std::printf("op=exit rc=0\n");
      return std::atoi(parts[1].c_str());
    } else if (name == "crash") {
      std::printf("op=crash rc=0\n");
      std::fflush(stdout);
      _exit(99);  // no exit handlers: like a process killed mid-run
    } else {
      std::fprintf(stderr, "cuda-client: unknown operation %s\n", op.c_str());
      return 2;
    }
    std::printf("op=%s rc=%d ms=%.3f%s\n", op.c_str(), rc, now_ms() - started, extra.c_str());
  }
  return 0;
}
