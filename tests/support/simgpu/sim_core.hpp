#pragma once
// Shared core of the simulated NVIDIA driver (libcuda.so.1 + libnvidia-ml.so.1
// doubles) that CI runs the real libvgpu.so against. One instance per process
// (libsimgpu_core.so), with GPU state shared by every process through a mapped
// file, as a real GPU is shared:
//
//   SIMGPU_STATE=/tmp/x.state     file holding the GPUs' state (required for
//                                 several processes; private memory otherwise)
//   SIMGPU_DEVICES=GPU-<uuid>:80g[,GPU-<uuid>:40g]   devices (default: two 80 GiB)
//   SIMGPU_CONTEXT_SIZE=300m      device memory a context takes
//   SIMGPU_FAIL=cuMemAlloc_v2:3[,name:always]   the 3rd call (or every call) fails
//                                 with CUDA_ERROR_OUT_OF_MEMORY / NVML_ERROR_UNKNOWN
//                                 (launches: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES; name
//                                 the variant called, e.g. cuLaunchKernel_ptsz)
//   SIMGPU_NVML_PID_OFFSET=100000 NVML reports PIDs shifted, as a driver that does
//                                 not translate PID namespaces would
//   SIMGPU_KERNEL_NS=20000        GPU time of one kernel launch (any launch function)
//   SIMGPU_GRAPH_NS=1000000       GPU time of one CUDA graph launch
//
// Memory is granted at the real driver's granularity (2 MiB pages for
// allocations of 1 MiB and more) and returned when a process exits.
//
// Each process has one GPU engine on a real-time (CLOCK_MONOTONIC) timeline:
// launches queue on it, events complete when the engine reaches them
// (sim_cuda.cpp). What a process called is counted, for tests to read through
// the exported C function
//
//   uint64_t simgpu_calls(const char* name);   // e.g. "cuEventRecord"
//
// which also answers the pseudo-names "gpu:ran" (launches that ran on the
// engine) and "gpu:captured" (launches recorded into a stream capture).

#include <atomic>
#include <cstdint>
#include <string>

namespace simgpu {

inline constexpr int kMaxDevices = 8;
inline constexpr int kMaxProcs = 256;

struct Device {
  char uuid[96];
  char name[64];
  uint64_t total;
};

struct Proc {
  std::atomic<int32_t> pid;
  std::atomic<uint64_t> used[kMaxDevices];
};

struct State {
  uint32_t magic;
  uint32_t device_count;
  uint64_t context_size;
  Device devices[kMaxDevices];
  Proc procs[kMaxProcs];
  std::atomic<uint64_t> next_address;
};

State& state();
// 16 UUID bytes parsed from "GPU-xxxxxxxx-...".
void uuid_bytes(const Device& d, unsigned char out[16]);

// Physical granularity of a linear allocation.
uint64_t granule(uint64_t bytes);
// Takes `bytes` of device `dev` for this process; false when the GPU is full.
bool take(int dev, uint64_t bytes);
void give(int dev, uint64_t bytes);
uint64_t process_usage(int pid, int dev);
// What all live processes use on `dev`. Derived, never stored, so a process
// killed half-way through an update cannot leave it wrong.
uint64_t device_used(int dev);
// Unique device addresses, 2 MiB aligned.
uint64_t next_address(uint64_t bytes);

// Whether this call of `fn` is one SIMGPU_FAIL says must fail.
bool should_fail(const char* fn);
int nvml_pid_offset();

// Counts one call of `name` in this process (simgpu_calls reads it back).
void count(const char* name);
uint64_t calls(const char* name);

}  // namespace simgpu

extern "C" uint64_t simgpu_calls(const char* name);
