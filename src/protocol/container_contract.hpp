#pragma once
// The container contract: what a container running under libvgpu.so is
// given, in one place. The device plugin (Allocate), `vgpu run`, `vgpu
// resize`, libvgpu.so and the node agent all take their names, paths and the
// limits record from here, so a writer and a reader cannot drift apart. It
// depends on src/common alone: libvgpu.so links it.
//
// The limits record (ContainerLimits) is what the read-only limits file says:
// memory and SM share per device, the sharing mode (an MPS client carries its
// thread cap), the task priority and the core policy, plus the two facts the
// library must not take from the writable state file (which state file, and
// the GPUs in NVML order). The same KEY=VALUE names are upstream HAMi-core's
// environment variables, so the environment parses with the same rules.
//
//   ContainerSpec spec{.gpus = {{"GPU-a", 3000ull << 20, 30}}, .state_file = "/v/x.cache"};
//   Rendered r = render_contract(spec);     // r.env, r.limits_text
//   ContainerLimits back = parse_limits_file(r.limits_text, "/etc/vgpu/limits.d/limits");
//   back.memory_limit[0] == 3000ull << 20 && back.sm_limit[0] == 30;

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/log.hpp"

namespace hami::protocol {

// The devices one container's limits can name (the state file's table).
inline constexpr int kContainerMaxDevices = 16;
inline constexpr size_t kMaxLimitsFileSize = 64 * 1024;

// Environment variables, which are also the limits file's keys (upstream
// HAMi-core's names; the VGPU_* ones are ours).
inline constexpr const char* kEnvMemoryLimit = "CUDA_DEVICE_MEMORY_LIMIT";  // [_<i>]
inline constexpr const char* kEnvSmLimit = "CUDA_DEVICE_SM_LIMIT";          // [_<i>]
inline constexpr const char* kEnvPriority = "CUDA_TASK_PRIORITY";
inline constexpr const char* kEnvCorePolicy = "GPU_CORE_UTILIZATION_POLICY";
inline constexpr const char* kEnvStateFile = "CUDA_DEVICE_MEMORY_SHARED_CACHE";
inline constexpr const char* kEnvOversubscribe = "CUDA_OVERSUBSCRIBE";
inline constexpr const char* kEnvLogLevel = log::kLevelEnv;
inline constexpr const char* kEnvDisableControl = "CUDA_DISABLE_CONTROL";
// Read by earlier versions of this library only.
inline constexpr const char* kEnvSmSustain = "CUDA_DEVICE_SM_SUSTAIN_MS";
// Limits file only: the container's GPUs in NVML order, VGPU_DEVICE_UUID_<i>.
inline constexpr const char* kKeyDeviceUuid = "VGPU_DEVICE_UUID";
// An MPS client's thread cap: read by the MPS server from the environment;
// recorded in the limits file (100: none) for the node agent and `vgpu top`.
inline constexpr const char* kEnvMpsThreads = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE";
inline constexpr const char* kEnvMpsPipeDir = "CUDA_MPS_PIPE_DIRECTORY";
inline constexpr const char* kEnvMpsLogDir = "CUDA_MPS_LOG_DIRECTORY";
inline constexpr const char* kEnvMpsPinnedMemory = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT";
// Standalone use: a limits file or control file at a path of the user's choice.
inline constexpr const char* kEnvLimitsFile = "VGPU_LIMITS_FILE";
inline constexpr const char* kEnvControlFile = "VGPU_CONTROL_FILE";
inline constexpr const char* kEnvNvidiaVisible = "NVIDIA_VISIBLE_DEVICES";
inline constexpr const char* kEnvCudaVisible = "CUDA_VISIBLE_DEVICES";

// Paths inside the container. The limits file sits in a read-only directory
// mount, not a file mount: a file replaced by rename on the host stays the old
// file behind a file mount, and a resize replaces it so.
inline constexpr const char* kContainerLimitsDir = "/etc/vgpu/limits.d";
inline constexpr const char* kLimitsFileName = "limits";
inline constexpr const char* kContainerLimitsFile = "/etc/vgpu/limits.d/limits";
inline constexpr const char* kContainerControlFile = "/etc/vgpu/control";
inline constexpr const char* kContainerLockDir = "/tmp/vgpulock";
// CUDA's default CUDA_MPS_PIPE_DIRECTORY, so a client finds its server even
// where something clears the variable.
inline constexpr const char* kContainerMpsPipeDir = "/tmp/nvidia-mps";
inline constexpr const char* kContainerPreloadFile = "/etc/ld.so.preload";
// The state file when nothing names one (upstream's).
inline constexpr const char* kDefaultStateFile = "/tmp/cudevshr.cache";

// The host layout under <hook path>/vgpu: containers/<key>/ (state files),
// limits/<key>/limits (the limits file), control/<key> (the agent's switch);
// <key> is "<pod UID>_<container>", or a `vgpu run` job's name.
inline constexpr const char* kHostContainersDir = "containers";
inline constexpr const char* kHostLimitsDir = "limits";
inline constexpr const char* kHostControlDir = "control";
// <containers>/<job>/mps: `vgpu run --sharing mps` writes "<kEnvMpsThreads>=N"
// there (a standalone job's thread cap, for display).
inline constexpr const char* kMpsClientFile = "mps";
// <containers>/<job>/limits: a `vgpu run` job's limits file (VGPU_LIMITS_FILE),
// which `vgpu resize` replaces.
inline constexpr const char* kJobLimitsFile = "limits";

// Kubernetes resource names (upstream's defaults; the chart may rename them).
inline constexpr const char* kResourceCount = "nvidia.com/gpu";
inline constexpr const char* kResourceMemory = "nvidia.com/gpumem";
inline constexpr const char* kResourceMemoryPercentage = "nvidia.com/gpumem-percentage";
inline constexpr const char* kResourceCores = "nvidia.com/gpucores";
inline constexpr const char* kResourcePriority = "nvidia.com/priority";

// How a GPU is shared (docs/sharing-modes.md). Timeslice: libvgpu.so paces
// each container to its SM share. MPS: the containers are clients of the
// GPU's MPS server, which divides the SMs; the library keeps the memory limit
// and never paces (GPU_CORE_UTILIZATION_POLICY=disable in the contract).
enum class SharingMode : uint8_t { kTimeslice, kMps };

// GPU_CORE_UTILIZATION_POLICY: force (always paced), default (paced while the
// node agent reports contention), disable (never paced).
enum class CorePolicy : uint8_t { kDefault, kForce, kDisable };
// Case-insensitive; nullopt for anything else.
std::optional<CorePolicy> parse_core_policy(std::string_view text);
const char* to_string(CorePolicy p);

// "<key>_<i>", e.g. CUDA_DEVICE_MEMORY_LIMIT_3.
std::string indexed_key(const char* key, int device);

// What one container is given, as a writer states it.
struct ContainerGpu {
  std::string uuid;
  uint64_t memory_bytes = 0;  // 0: no limit
  int32_t cores = 0;          // SM share in percent; 0 or 100: no cap
};
struct ContainerSpec {
  std::vector<ContainerGpu> gpus;  // in the order the container's NVML lists them
  SharingMode mode = SharingMode::kTimeslice;
  std::optional<int> priority;       // 0 high, 1 low
  std::optional<CorePolicy> policy;  // unset: the library's default
  std::string state_file;            // absolute; empty: not named
  std::string comment;               // first line of the limits file, without '#'
};

struct Rendered {
  // The limit variables, in the order written (also the limits file's first
  // lines): memory per device, the SM share, priority, policy.
  std::vector<std::pair<std::string, std::string>> env;
  std::string limits_text;  // the whole limits file
  // An MPS client's CUDA_MPS_ACTIVE_THREAD_PERCENTAGE; nullopt: no cap (or
  // not MPS). A high-priority client is not capped: the others are held to
  // their shares, which fitting keeps within 100 minus its own.
  std::optional<int> mps_threads;
};

// The memory value as the contract writes it: "<MiB>m" when whole MiB, else bytes.
std::string memory_text(uint64_t bytes);

Rendered render_contract(const ContainerSpec& spec);

// The limits record, as the library and the node agent read it.
struct ContainerLimits {
  std::array<uint64_t, kContainerMaxDevices> memory_limit{};  // bytes; 0 = none
  std::array<bool, kContainerMaxDevices> memory_denied{};     // the limit was unreadable
  std::array<uint64_t, kContainerMaxDevices> sm_limit{};      // percent; 100 = no cap
  std::optional<int32_t> priority;                            // 0 high, 1 low
  std::optional<CorePolicy> policy;
  std::optional<uint64_t> mps_threads;  // present: an MPS client (100: no cap)
  std::optional<bool> oversubscribe;
  std::string state_file;                 // limits file only; "" not named
  std::vector<std::string> device_uuids;  // limits file only; empty: not given
  // Lines that are not KEY=VALUE, or a state file or GPU table that cannot be
  // used: the file as a whole cannot be trusted.
  bool corrupt = false;
  std::vector<std::string> errors;
  std::vector<std::string> warnings;

  ContainerLimits() { sm_limit.fill(100); }
  SharingMode mode() const { return mps_threads ? SharingMode::kMps : SharingMode::kTimeslice; }
};

// A limits file's text (`path` names it in messages). A value that cannot be
// read never means "unlimited": its device is denied and an error says why.
ContainerLimits parse_limits_file(std::string_view text, const std::string& path);

// The same rules over values from the environment (name → value); `names`
// lists every variable set, to report limits that name no device. The
// state file, GPU table and oversubscription are not taken from here.
ContainerLimits parse_limits_env(const std::map<std::string, std::string>& values,
                                 const std::vector<std::string>& names);

// "<KEY>_<suffix>" for a per-device limit key whose suffix is not a device
// index (CUDA_DEVICE_MEMORY_LIMIT_16, _x): why it applies to no device.
std::optional<std::string> unreadable_index(const std::string& key);

// A resize of a container on an MPS GPU: the server holds a running client to
// the thread cap and pinned memory it started with, so only a lower memory
// limit (which libvgpu.so enforces) can change live. The refusal, or nullopt.
std::optional<std::string> mps_resize_refusal(uint64_t old_memory, uint64_t new_memory,
                                              int32_t old_cores, int32_t new_cores);

}  // namespace hami::protocol
