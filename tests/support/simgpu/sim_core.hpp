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
//   SIMGPU_NUMA=0,1,-1            NUMA node per device (nvmlDeviceGetNumaNodeId; -1:
//                                 NVML_ERROR_NOT_SUPPORTED; default 0). Like
//                                 SIMGPU_DEVICES, read when the state file is created.
//   SIMGPU_NAMES=NVIDIA A100-SXM4-40GB,Tesla T4   model name per device (default
//                                 "Simulated GPU <i>"); read with SIMGPU_DEVICES.
//   SIMGPU_DRIVER_VERSION=550.127.05   what nvmlSystemGetDriverVersion reports
//   SIMGPU_COMPUTE_MODE=0,2      nvmlDeviceGetComputeMode per device (0 DEFAULT,
//                                 1 EXCLUSIVE_THREAD, 2 PROHIBITED, 3 EXCLUSIVE_PROCESS;
//                                 default 0); read at every call.
//   SIMGPU_NVML_SCRIPT=/tmp/x.nvml     scripted NVML, for daemons' tests (below)
//   SIMGPU_MIG=0:3g.40gb@4,2g.20gb,1g.10gb;1:on   MIG per device index, read
//                                 with SIMGPU_DEVICES (MIG below)
//
// MIG (sim_mig.hpp, and nvml.h for each call): a device whose SIMGPU_NAMES
// name contains "H200" has an H200's MIG geometry (1g.18gb ... 7g.141gb, as
// tests/gpu/results/mig-profiles-h200.txt recorded it), one with "H100" and
// "80GB" an H100 80GB's (1g.10gb ... 7g.80gb, NVIDIA's table); any other has
// no MIG (nvmlDeviceGetMigMode: NVML_ERROR_NOT_SUPPORTED). MIG starts off on
// every GPU. SIMGPU_MIG turns it on for the devices it names, ';' between
// them: `<i>:on` (no instances), `<i>:off`, or `<i>:<profiles>`, GPU-instance
// profile names in creation order, each at its first free placement or at
// `@<start>` (a memory slice of 8), each with one compute instance of all its
// slices (nvidia-smi mig -cgi <profiles> -C). What cannot be made is reported
// on stderr. Instances live in the state file: every process sees the
// nvmlDeviceCreateGpuInstance / nvmlGpuInstanceCreateComputeInstance of any
// other, and the `fail` / `gpu_lost` script lines fail MIG calls like others
// (a GPU or compute instance's device index is its GPU's).
//   - A compute instance is a MIG device: nvmlDeviceGetMigDeviceHandleByIndex
//     (0..n-1 in GI ID, then CI ID order; NOT_FOUND up to 7), a MIG-<uuid>
//     (the same for the same sequence of creations, new for each creation),
//     name "<GPU name> MIG <profile>", memory its GPU instance's. MIG handles
//     answer nvmlDeviceGetUUID, GetName, GetMemoryInfo(_v2),
//     GetComputeRunningProcesses*, GetCudaComputeCapability, GetHandleByUUID
//     and the MIG ID calls; any other device call: NVML_ERROR_NOT_SUPPORTED.
//   - CUDA_VISIBLE_DEVICES=MIG-<uuid> is that MIG device: its GPU instance's
//     memory (cuDeviceTotalMem, cuMemGetInfo; allocations beyond it fail, and
//     count against the GPU too) and its compute instance's SMs
//     (CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT). A MIG-enabled GPU, named
//     by index or GPU- UUID or enumerated without CUDA_VISIBLE_DEVICES, is
//     its first MIG device (none: not a CUDA device), and a process sees one
//     MIG device at most, as the MIG user guide says of CUDA.
//   - nvmlDeviceSetMigMode applies at once when the GPU has no instances and
//     no memory in use, else leaves the mode pending (activationStatus
//     NVML_ERROR_IN_USE); root is not required. Destroying a GPU instance
//     with compute instances, or a compute instance a live process has
//     memory on, is NVML_ERROR_IN_USE; one that does not fit is
//     NVML_ERROR_INSUFFICIENT_RESOURCES. On a MIG-capable GPU with MIG off,
//     profile info, placements and remaining capacity (every instance free)
//     answer as with MIG on, as driver 580 did on an H200
//     (tests/gpu/results/mig-probe-h200.txt); creating an instance is
//     NVML_ERROR_NOT_SUPPORTED.
//
// Memory is granted at the real driver's granularity (2 MiB pages for
// allocations of 1 MiB and more) and returned when a process exits.
//
// Each process has one GPU engine on a real-time (CLOCK_MONOTONIC) timeline:
// launches queue on it, events complete when the engine reaches them
// (sim_cuda.cpp). The engine's busy time is recorded per process and device
// in the shared state (Busy below), so NVML reports what really ran:
// nvmlDeviceGetProcessUtilization gives each process busy in the window after
// lastSeenTimeStamp (the last second when it is 0) smUtil = its busy percent
// of that window (at least 1 when it ran at all; memUtil, encUtil, decUtil 0),
// timeStamp = now in microseconds of CLOCK_REALTIME, or NVML_ERROR_NOT_FOUND
// when no process ran; nvmlDeviceGetUtilizationRates gives gpu = the sum over
// processes for the last second, capped at 100 (memory 0). Resolution is one
// 16.8 ms bucket at each end of the window; history reaches ~2 s back.
//
// Scripted NVML (SIMGPU_NVML_SCRIPT): a text file a test may rewrite at any
// time; it is re-read by every NVML call that finds its inode, size or mtime
// changed (so rewrite it by rename, or make sure one of those changes). Lines:
//   process <device-index> <pid> <used-bytes> <sm-percent>
//       a process NVML reports in addition to the live simulated ones: in the
//       compute process lists (usedGpuMemory), in memory used, and, when
//       sm-percent > 0, in process utilisation and device utilisation. Its PID
//       is reported as written (SIMGPU_NVML_PID_OFFSET applies to live ones).
//   fail <function-name> [<device-index>]
//       that NVML function returns NVML_ERROR_UNKNOWN (for that device only)
//   gpu_lost <function-name> [<device-index>]
//       the same with NVML_ERROR_GPU_IS_LOST
//   xid <device-index> <code> [<gpu-instance-id> [<compute-instance-id>]]
//       one Xid critical-error event (nvmlEventTypeXidCriticalError, eventData
//       = code; _v2's MIG instance IDs as given, else 0xFFFFFFFF, "none") for
//       nvmlEventSetWait_v2 / nvmlEventSetWait, which poll the
//       script every 2 ms until their timeout (then NVML_ERROR_TIMEOUT). Lines
//       are delivered once each, in file order, to the event set that waits
//       first; each process counts the xid lines it has taken, so a rewritten
//       script with more xid lines delivers only the new ones, and one with
//       fewer sets the count back (an emptied script starts over). A line for
//       a device not registered on the waiting set is dropped. Without
//       SIMGPU_NVML_SCRIPT, nvmlEventSetCreate answers NVML_ERROR_NOT_SUPPORTED.
//       The same library built as libnvidia-ml-noevents.so.1 has no event
//       functions at all (a driver too old for them).
//   topology / nvlink / nvswitch / p2p ...
//       how the devices connect (common PCIe ancestor, NVLinks, P2P status);
//       sim_nvml.cpp describes these lines
// Blank lines and lines starting with '#' are ignored; a malformed line is
// reported on stderr and ignored. A missing file is an empty script.
//
// What a process called is counted, for tests to read through the exported C
// function
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
// MIG: seven one-slice GPU instances fill a GPU, and a GPU has seven compute
// slices, so at most seven of each.
inline constexpr int kMaxGis = 7;
inline constexpr int kMaxCis = 7;

struct Device {
  char uuid[96];
  char name[64];
  uint64_t total;
  int32_t numa_node;  // -1: unknown
  int32_t cc_major;
  int32_t cc_minor;
};

// One GPU's MIG state (sim_mig.cpp). Slots are free while id < 0; a slot's
// address is the NVML handle (nvmlGpuInstance_t; nvmlComputeInstance_t and
// the MIG device's nvmlDevice_t), so a handle stays put while its instance
// lives, as NVML's do.
struct MigGi {
  int32_t id;        // GI ID, unique within the GPU
  uint32_t profile;  // NVML_GPU_INSTANCE_PROFILE_*
  uint32_t start;    // memory slices
  uint32_t size;
};
struct MigCi {
  int32_t id;        // CI ID, unique within its GI
  int32_t gi;        // slot in Mig::gis
  uint32_t profile;  // NVML_COMPUTE_INSTANCE_PROFILE_*
  uint32_t start;    // compute slices within the GI
  uint32_t size;
  char uuid[48];  // "MIG-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
};
struct Mig {
  uint32_t geometry;  // sim_mig.cpp's table; 0: the GPU has no MIG
  uint32_t mode;      // NVML_DEVICE_MIG_ENABLE / _DISABLE
  uint32_t pending;
  uint32_t serial;  // instances created so far: a recreated one gets a new UUID
  MigGi gis[kMaxGis];
  MigCi cis[kMaxCis];
};

// GPU time one process's engine ran on one device, on CLOCK_REALTIME ns. Work
// queued back to back extends the open run [run_start, run_end), which may
// reach into the future; when a launch leaves a gap, the run is spread over
// time buckets of 2^kBusyBucketShift ns, a ring of kBusyBuckets each holding
// (bucket number << 25) | busy ns. Written only by the owning process, under
// the seqlock `seq` (odd while an update is in progress).
inline constexpr int kBusyBuckets = 128;
inline constexpr int kBusyBucketShift = 24;  // 16.8 ms
struct Busy {
  std::atomic<uint32_t> seq;
  std::atomic<int64_t> run_start;
  std::atomic<int64_t> run_end;
  std::atomic<uint64_t> buckets[kBusyBuckets];
};

struct Proc {
  std::atomic<int32_t> pid;
  std::atomic<uint64_t> used[kMaxDevices];  // on the GPU, MIG devices included
  Busy busy[kMaxDevices];
  std::atomic<uint64_t> mig_used[kMaxDevices][kMaxCis];  // on each MIG device (Mig::cis)
};

struct State {
  uint32_t magic;
  uint32_t device_count;
  uint64_t context_size;
  Device devices[kMaxDevices];
  Proc procs[kMaxProcs];
  std::atomic<uint64_t> next_address;
  Mig mig[kMaxDevices];
};

State& state();
// 16 UUID bytes parsed from "GPU-xxxxxxxx-..." or "MIG-xxxxxxxx-...".
void uuid_bytes(const char* uuid, unsigned char out[16]);

// Where CUDA memory lives, a "device id": a GPU's index, or for a MIG device
// (compute instance slot `ci` of GPU `gpu`) mig_device(gpu, ci).
inline constexpr int kMigDeviceBase = 64;
constexpr int mig_device(int gpu, int ci) {
  return kMigDeviceBase + gpu * kMaxCis + ci;
}
constexpr bool is_mig_device(int dev) {
  return dev >= kMigDeviceBase;
}
// The GPU a device id is on.
constexpr int gpu_of(int dev) {
  return is_mig_device(dev) ? (dev - kMigDeviceBase) / kMaxCis : dev;
}

// Physical granularity of a linear allocation.
uint64_t granule(uint64_t bytes);
// Takes `bytes` of device id `dev` for this process; false when the GPU, or
// for a MIG device its GPU instance, is full (or the MIG device is gone).
bool take(int dev, uint64_t bytes);
void give(int dev, uint64_t bytes);
// What all live processes use on device id `dev` (a MIG device: its GPU
// instance, whose memory its compute instances share). Derived, never
// stored, so a process killed half-way through an update cannot leave it wrong.
uint64_t device_used(int dev);
// Memory of device id `dev`: the GPU's, or its GPU instance's.
uint64_t device_total(int dev);
// Frees the slots (and memory) of processes that died, as a GPU does.
void reap_dead_processes();
// Unique device addresses, 2 MiB aligned.
uint64_t next_address(uint64_t bytes);

// CLOCK_REALTIME in ns, the clock NVML's timestamps use.
int64_t realtime_ns();
// Records that this process's engine ran work on `dev` over [start, end),
// CLOCK_MONOTONIC ns (the engine's clock). Calls come in time order (the
// engine runs one thing at a time); the caller serialises them.
void record_busy(int dev, int64_t start_mono_ns, int64_t end_mono_ns);
// GPU time process `p` ran on `dev` within [from, to), CLOCK_REALTIME ns.
uint64_t busy_ns(const Proc& p, int dev, int64_t from, int64_t to);

// Whether this call of `fn` is one SIMGPU_FAIL says must fail.
bool should_fail(const char* fn);
int nvml_pid_offset();

// Serialises changes to the MIG state across threads and processes (an
// flock of the state file, which the kernel releases if the holder dies).
class MigLock {
 public:
  MigLock();
  ~MigLock();
  MigLock(const MigLock&) = delete;
  MigLock& operator=(const MigLock&) = delete;
};

// Counts one call of `name` in this process (simgpu_calls reads it back).
void count(const char* name);
uint64_t calls(const char* name);

}  // namespace simgpu

extern "C" uint64_t simgpu_calls(const char* name);
