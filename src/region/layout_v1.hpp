#pragma once
// The state file's byte layout, exactly as upstream HAMi-core v1.2 lays it out on
// x86-64 (docs/state-file.md), so HAMi's Go monitor and
// existing tools read our files and we read theirs. These are plain structs for
// mmap: every counter is accessed through std::atomic_ref, never as a plain field
// from two processes at once.
//
// Fields that upstream leaves as padding carry our slot ownership
// (ProcSlot::owner_start_time and ProcSlot::owner_tag) and each process's GPU
// time (DeviceUtil::gpu_time_ns, gpu_time_tag); see docs/state-file.md. The two
// semaphores are initialised (unlocked) for upstream readers but never used by us.
//
//   auto* r = static_cast<hami::region::SharedRegion*>(mapped);
//   if (r->initialized_flag == hami::region::kMagic) { ... }

#include <cstddef>
#include <cstdint>

namespace hami::region {

inline constexpr int32_t kMagic = 19920718;
inline constexpr uint32_t kMajorVersion = 1;
inline constexpr uint32_t kMinorVersion = 2;
inline constexpr int kMaxDevices = 16;
inline constexpr int kMaxProcesses = 1024;
inline constexpr size_t kUuidSize = 96;

// "HAMICPP1" little-endian: a slot whose owner holds its liveness lock (our protocol).
inline constexpr uint64_t kOwnerTag = 0x31505043494D4148ull;

// "HAMIGPUT" little-endian: DeviceUtil::gpu_time_ns is published by libvgpu.
inline constexpr uint64_t kGpuTimeTag = 0x54555047494D4148ull;

// Values of ProcSlot::status.
enum SlotStatus : int32_t {
  kSlotFree = 0,  // upstream: "exited"
  kSlotRunning = 1,
  kSlotSuspended = 2,
};

// glibc's sem_t is 32 bytes, 8-aligned; we keep the bytes without using them.
struct alignas(8) SemaphoreStorage {
  unsigned char bytes[32];
};

struct DeviceMemory {
  uint64_t context_size;  // "context" charges
  uint64_t module_size;   // never written upstream
  uint64_t data_size;     // buffers
  uint64_t offset;        // never written upstream
  uint64_t total;         // what limit checks sum
  // Ours, in upstream's unused[0]: of data_size, the bytes libvgpu placed in
  // host memory under CUDA_OVERSUBSCRIBE (vgpu/spill.hpp); 0 upstream.
  uint64_t spilled_size;
  uint64_t unused[2];
};

struct DeviceUtil {
  uint64_t dec_util;
  uint64_t enc_util;
  uint64_t sm_util;  // percent, written by the node agent
  // Ours, in upstream's unused[0..1]: the GPU time (ns) libvgpu charged this
  // process's launches on the device, only ever growing while the slot's
  // owner lives, and kGpuTimeTag once it publishes that counter.
  uint64_t gpu_time_ns;
  uint64_t gpu_time_tag;
  uint64_t unused;
};

struct ProcSlot {
  int32_t pid;      // PID in the container's namespace; 0 = free
  int32_t hostpid;  // PID as NVML sees it; 0 = unknown
  DeviceMemory used[kMaxDevices];
  uint64_t monitorused[kMaxDevices];  // NVML-measured bytes for this process
  DeviceUtil device_util[kMaxDevices];
  int32_t status;  // SlotStatus
  int32_t padding;
  uint64_t seqlock;           // upstream 1.2 seqlock; we keep it even (0)
  uint64_t owner_start_time;  // upstream unused[0]: /proc/<pid>/stat starttime
  uint64_t owner_tag;         // upstream unused[1]: kOwnerTag when we own the slot
};

struct SharedRegion {
  int32_t initialized_flag;  // kMagic once initialised
  uint32_t major_version;
  uint32_t minor_version;
  int32_t sm_init_flag;
  uint64_t owner_pid;  // upstream's semaphore owner; always 0 here
  SemaphoreStorage sem;
  uint64_t device_num;
  char uuids[kMaxDevices][kUuidSize];
  uint64_t limit[kMaxDevices];     // bytes, 0 = unlimited
  uint64_t sm_limit[kMaxDevices];  // percent
  ProcSlot procs[kMaxProcesses];
  int32_t proc_num;  // one past the highest slot in use
  int32_t utilization_switch;
  int32_t recent_kernel;
  int32_t priority;           // 0 high, 1 low
  uint64_t last_kernel_time;  // Unix seconds
  SemaphoreStorage sem_postinit;
};

// Upstream creates the file one byte longer than the struct (a byte written at
// offset sizeof(SharedRegion) to size it); we do the same so sizes match.
inline constexpr size_t kRegionSize = 2008952;
inline constexpr size_t kFileSize = kRegionSize + 1;

static_assert(sizeof(DeviceMemory) == 64);
static_assert(sizeof(DeviceUtil) == 48);
static_assert(sizeof(ProcSlot) == 1960);
static_assert(sizeof(SharedRegion) == kRegionSize);

}  // namespace hami::region
