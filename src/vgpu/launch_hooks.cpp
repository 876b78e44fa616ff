// Launch hooks: every way a kernel reaches the GPU (cuLaunchKernel, Ex,
// cooperative, CUDA graphs, and their per-thread-default-stream forms) is
// charged to the container's SM share (sm_control.hpp, limiter/), and paced
// while the share is enforced. Launches into a capturing stream run nothing
// and pass straight through; so does every launch of a process with no share,
// after marking the container active.
#include <time.h>

#include <new>

#include "vgpu/capture_state.hpp"
#include "vgpu/graph_memory.hpp"
#include "vgpu/hook_decls.hpp"
#include "vgpu/limiter/collective_kernels.hpp"
#include "vgpu/real_driver.hpp"
#include "vgpu/runtime.hpp"

namespace hami::cuda {
namespace {

using vgpu::call_real;
using vgpu::real_cuda;
using vgpu::Runtime;
using vgpu::limiter::LaunchLimiter;
using vgpu::limiter::LaunchPath;
using vgpu::limiter::SampleWindow;

// Waits shorter than this are let through: a sleep cannot be that short, and
// the pacer's books stay exact (the next launch waits the longer).
constexpr int64_t kMinWaitNs = 50'000;
// While waiting, finished samples are collected at least this often.
constexpr int64_t kWaitSliceNs = 2'000'000;
// A launch the gate holds (a container on several GPUs) looks this often
// whether a peer's kernel waits for it: that kernel spins meanwhile.
constexpr int64_t kGateSliceNs = 200'000;
// A wait lasts this much longer than needed, so the launches after it go
// back to back: fewer sleeps, and the GPU's busy time comes in spells of a
// few milliseconds rather than a kernel at a time (what NVML's utilisation
// samples sees as the busy time it is). The pacer's books are unchanged.
constexpr int64_t kBatchNs = 2'000'000;
// A thread's sample or batch in flight; a batch is charged if the thread
// exits mid-batch.
struct ThreadWindow {
  SampleWindow w;
  ~ThreadWindow() { LaunchLimiter::abandon_window(w); }
};
thread_local ThreadWindow t_window;

int64_t mono_ns() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void wait_until(LaunchLimiter& lim, int64_t go, bool harvest, bool gated) {
  const int64_t slice = gated ? kGateSliceNs : kWaitSliceNs;
  for (;;) {
    const int64_t now = mono_ns();
    if (now >= go || (gated && lim.may_go_early(now))) return;
    const int64_t until = go - now > slice ? now + slice : go;
    const timespec ts{static_cast<time_t>(until / 1'000'000'000),
                      static_cast<long>(until % 1'000'000'000)};
    ::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
    if (harvest) lim.harvest(mono_ns());
  }
}

uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

uint64_t kernel_key(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                    unsigned bz, unsigned shmem) {
  uint64_t h = mix(reinterpret_cast<uintptr_t>(f));
  h = mix(h ^ (uint64_t{gx} | uint64_t{gy} << 32));
  h = mix(h ^ (uint64_t{gz} | uint64_t{bx} << 32));
  return mix(h ^ (uint64_t{by} | uint64_t{bz} << 16 | uint64_t{shmem} << 32));
}

const char* driver_name_of(uintptr_t handle) {
  const vgpu::RealCuda& cu = real_cuda();
  const char* name = nullptr;
  if (cu.cuFuncGetName != nullptr &&
      cu.cuFuncGetName(&name, reinterpret_cast<CUfunction>(handle)) == CUDA_SUCCESS &&
      name != nullptr) {
    return name;
  }
  name = nullptr;
  // A library's kernel launched as a function (the runtime's lazy loading).
  if (cu.cuKernelGetName != nullptr &&
      cu.cuKernelGetName(&name, reinterpret_cast<CUkernel>(handle)) == CUDA_SUCCESS) {
    return name;
  }
  return nullptr;
}

// Whether `f` is a collective's kernel; asked only on a device whose
// container runs on other GPUs too, so a program on one GPU never pays.
// Never destroyed: threads may still launch while the process exits.
bool collective_kernel(CUfunction f) {
  static auto* kinds = new (std::nothrow) vgpu::limiter::CollectiveKernels(&driver_name_of);
  return kinds != nullptr && kinds->is_collective(reinterpret_cast<uintptr_t>(f));
}

uint64_t graph_key(CUgraphExec exec) {
  return mix(reinterpret_cast<uintptr_t>(exec) ^ 0x6772617068ull);
}

// The stream events must be recorded on to follow the launch: a per-thread
// launch on stream 0 runs on the thread's own default stream.
uintptr_t event_stream(CUstream s, bool ptsz) {
  const auto v = reinterpret_cast<uintptr_t>(s);
  return ptsz && v == 0 ? CU_STREAM_PER_THREAD_VALUE : v;
}

// `shape` computes the launch's key; it is only called when a share applies,
// so a pass-through launch does not pay for the hashing. `collective` says
// whether the launch is of a collective's kernel; only asked while the
// device has peers (a container on several GPUs).
template <class Shape, class Collective, class Call>
[[gnu::always_inline]] inline CUresult paced(Shape&& shape, Collective&& collective,
                                             LaunchPath path, CUstream stream, bool ptsz,
                                             Call&& call) {
  Runtime* rt = Runtime::accounting();
  if (rt == nullptr) return call();
  vgpu::SmControl& sm = rt->sm();
  sm.on_launch(rt->region(), rt->control());
  LaunchLimiter* lim = sm.limiter_for_current(*rt);
  if (lim == nullptr) return call();
  // While captures are under way no samples are taken: an event query then
  // could invalidate a global-mode capture (capture_state.hpp).
  const bool captures = vgpu::capture::active();
  if (captures && vgpu::capture::stream_capturing(stream, ptsz)) return call();

  const uint64_t key = shape();
  ThreadWindow& tw = t_window;
  const uintptr_t on = event_stream(stream, ptsz);
  if (!captures && lim->light_launch(tw.w, key, on)) {
    // Inside a batch: no clock, no pacer until it ends.
    const CUresult rc = call();
    if (rc != CUDA_SUCCESS) lim->light_launch_failed(tw.w);
    return rc;
  }
  // The clock is read once per launch that is not light.
  int64_t now = mono_ns();
  // Charged and published always; paced only while the share is enforced.
  const bool enforced = sm.enforced(rt->utilization_switch());
  const bool pairs = lim->peer_count() != 0 && collective();
  const int64_t go = lim->admit(key, path, now, 1, enforced, pairs);
  if (go - now >= kMinWaitNs) {
    // A sample must not contain our own wait. While a capture is under way the
    // GPU is not touched at all (an event recorded on the legacy stream would
    // invalidate a global-mode capture), so the sample is given up instead.
    if (captures) {
      LaunchLimiter::abandon_window(tw.w);
    } else {
      LaunchLimiter::end_window(tw.w, now);
    }
    // The gate's windows start together on every GPU of the container: no
    // batching past them.
    const bool gated = lim->gated(now);
    wait_until(*lim, gated ? go : go + kBatchNs, !captures, gated);
    const int64_t after = mono_ns();
    lim->went(after);
    lim->note_wait(after - now);
    now = after;
  } else if (go > now) {
    lim->went(now);  // too close to sleep for: it goes now
  }
  if (captures) {
    LaunchLimiter::abandon_window(tw.w);
    return call();
  }
  const bool sampled = lim->before_launch(tw.w, key, on, now, path, enforced, pairs);
  if (sampled) LaunchLimiter::start_clock(tw.w, mono_ns());
  const CUresult rc = call();
  lim->after_launch(tw.w, rc == CUDA_SUCCESS, sampled ? mono_ns() : now);
  lim->harvest(now);
  return rc;
}

// One body per kind of launch, shared by the plain and the per-thread
// (_ptsz) entry point, which differ only in the driver function and in which
// stream 0 means.
[[gnu::always_inline]] inline CUresult launch_kernel(decltype(vgpu::RealCuda::cuLaunchKernel) real,
                                                     bool ptsz, CUfunction f, unsigned gx,
                                                     unsigned gy, unsigned gz, unsigned bx,
                                                     unsigned by, unsigned bz, unsigned shmem,
                                                     CUstream stream, void** params, void** extra) {
  return paced(
      [=] { return kernel_key(f, gx, gy, gz, bx, by, bz, shmem); },
      [=] { return collective_kernel(f); }, LaunchPath::kKernel, stream, ptsz,
      [=] { return call_real(real, f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra); });
}

[[gnu::always_inline]] inline CUresult launch_kernel_ex(
    decltype(vgpu::RealCuda::cuLaunchKernelEx) real, bool ptsz, const CUlaunchConfig* config,
    CUfunction f, void** params, void** extra) {
  if (config == nullptr) return call_real(real, config, f, params, extra);
  const CUlaunchConfig& c = *config;
  return paced(
      [&] {
        return kernel_key(f, c.gridDimX, c.gridDimY, c.gridDimZ, c.blockDimX, c.blockDimY,
                          c.blockDimZ, c.sharedMemBytes);
      },
      [=] { return collective_kernel(f); }, LaunchPath::kKernelEx, c.hStream, ptsz,
      [=] { return call_real(real, config, f, params, extra); });
}

[[gnu::always_inline]] inline CUresult launch_cooperative(
    decltype(vgpu::RealCuda::cuLaunchCooperativeKernel) real, bool ptsz, CUfunction f, unsigned gx,
    unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shmem,
    CUstream stream, void** params) {
  return paced([=] { return kernel_key(f, gx, gy, gz, bx, by, bz, shmem); },
               [=] { return collective_kernel(f); }, LaunchPath::kCooperative, stream, ptsz,
               [=] { return call_real(real, f, gx, gy, gz, bx, by, bz, shmem, stream, params); });
}

// A graph that allocates memory is charged for it before it is first made
// real (graph_memory.hpp); then the launch is paced like any other.
[[gnu::always_inline]] inline CUresult launch_graph(decltype(vgpu::RealCuda::cuGraphLaunch) real,
                                                    bool ptsz, CUgraphExec exec, CUstream stream) {
  auto launch = [=] {
    // The ranks of a multi-GPU program replay the same graphs in step (the
    // decode step of a tensor-parallel server, its all-reduces inside): a
    // graph launch counts as a collective.
    return paced([=] { return graph_key(exec); }, [] { return true; }, LaunchPath::kGraph, stream,
                 ptsz, [=] { return call_real(real, exec, stream); });
  };
  Runtime* rt = Runtime::accounting();
  if (rt == nullptr || !rt->graph_memory().any()) [[likely]]
    return launch();
  return rt->graph_memory().making_real(*rt, exec, stream, ptsz, launch);
}

CUresult begin_capture(CUresult rc) {
  return vgpu::capture::begun(rc);
}

CUresult end_capture(CUresult rc) {
  return vgpu::capture::ended(rc);
}

}  // namespace

extern "C" {

CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                        unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                        unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                        void** kernelParams, void** extra) noexcept {
  return launch_kernel(real_cuda().cuLaunchKernel, false, f, gridDimX, gridDimY, gridDimZ,
                       blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams,
                       extra);
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                             unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                             unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                             void** kernelParams, void** extra) noexcept {
  return launch_kernel(real_cuda().cuLaunchKernel_ptsz, true, f, gridDimX, gridDimY, gridDimZ,
                       blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams,
                       extra);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** kernelParams,
                          void** extra) noexcept {
  return launch_kernel_ex(real_cuda().cuLaunchKernelEx, false, config, f, kernelParams, extra);
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** kernelParams,
                               void** extra) noexcept {
  return launch_kernel_ex(real_cuda().cuLaunchKernelEx_ptsz, true, config, f, kernelParams, extra);
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                   unsigned int gridDimZ, unsigned int blockDimX,
                                   unsigned int blockDimY, unsigned int blockDimZ,
                                   unsigned int sharedMemBytes, CUstream hStream,
                                   void** kernelParams) noexcept {
  return launch_cooperative(real_cuda().cuLaunchCooperativeKernel, false, f, gridDimX, gridDimY,
                            gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,
                            kernelParams);
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                        unsigned int gridDimZ, unsigned int blockDimX,
                                        unsigned int blockDimY, unsigned int blockDimZ,
                                        unsigned int sharedMemBytes, CUstream hStream,
                                        void** kernelParams) noexcept {
  return launch_cooperative(real_cuda().cuLaunchCooperativeKernel_ptsz, true, f, gridDimX, gridDimY,
                            gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,
                            kernelParams);
}

CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) noexcept {
  return launch_graph(real_cuda().cuGraphLaunch, false, hGraphExec, hStream);
}

CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) noexcept {
  return launch_graph(real_cuda().cuGraphLaunch_ptsz, true, hGraphExec, hStream);
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) noexcept {
  const CUresult rc = call_real(real_cuda().cuGraphExecDestroy, hGraphExec);
  if (Runtime* rt = Runtime::accounting(); rt != nullptr && rc == CUDA_SUCCESS) {
    rt->sm().forget(graph_key(hGraphExec));
    rt->graph_memory().forget(hGraphExec);
  }
  return rc;
}

CUresult cuStreamBeginCapture(CUstream hStream) noexcept {
  return begin_capture(call_real(real_cuda().cuStreamBeginCapture, hStream));
}

CUresult cuStreamBeginCapture_ptsz(CUstream hStream) noexcept {
  return begin_capture(call_real(real_cuda().cuStreamBeginCapture_ptsz, hStream));
}

CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode) noexcept {
  return begin_capture(call_real(real_cuda().cuStreamBeginCapture_v2, hStream, mode));
}

CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode) noexcept {
  return begin_capture(call_real(real_cuda().cuStreamBeginCapture_v2_ptsz, hStream, mode));
}

CUresult cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph,
                                     const CUgraphNode* dependencies,
                                     const CUgraphEdgeData* dependencyData, size_t numDependencies,
                                     CUstreamCaptureMode mode) noexcept {
  return begin_capture(call_real(real_cuda().cuStreamBeginCaptureToGraph, hStream, hGraph,
                                 dependencies, dependencyData, numDependencies, mode));
}

CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph,
                                          const CUgraphNode* dependencies,
                                          const CUgraphEdgeData* dependencyData,
                                          size_t numDependencies,
                                          CUstreamCaptureMode mode) noexcept {
  return begin_capture(call_real(real_cuda().cuStreamBeginCaptureToGraph_ptsz, hStream, hGraph,
                                 dependencies, dependencyData, numDependencies, mode));
}

CUresult cuStreamEndCapture(CUstream hStream, CUgraph* phGraph) noexcept {
  return end_capture(call_real(real_cuda().cuStreamEndCapture, hStream, phGraph));
}

CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph* phGraph) noexcept {
  return end_capture(call_real(real_cuda().cuStreamEndCapture_ptsz, hStream, phGraph));
}

}  // extern "C"
}  // namespace hami::cuda
