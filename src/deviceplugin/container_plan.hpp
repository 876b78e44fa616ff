#pragma once
// What one container gets from Allocate, worked out on plain data: the
// environment libvgpu.so (ours or upstream HAMi-core) reads, the mounts, and
// the host files behind them. Paths follow upstream's HOOK_PATH layout, with
// V = <hook_path>/vgpu on the host:
//
//   V/libvgpu.so            → V/libvgpu.so          ro
//   V/containers/<uid>_<c>  → V                     rw  (the state file lives here)
//   <lock_dir>              → /tmp/vgpulock         rw  (upstream HAMi-core's lock dir)
//   V/ld.so.preload         → /etc/ld.so.preload    ro  (not with CUDA_DISABLE_CONTROL=true)
//   V/limits/<uid>_<c>/     → /etc/vgpu/limits.d/   ro  (our library's tamper-proof limits,
//                                                       the file `limits` in it)
//   V/control/<uid>_<c>     → /etc/vgpu/control     ro  (the node agent's switch and block)
//
// A container on a GPU in mps mode (docs/sharing-modes.md) is a client of that
// GPU's MPS server: it also gets
//
//   V/mps/<uuid>/pipe       → /tmp/nvidia-mps       rw  (CUDA_MPS_PIPE_DIRECTORY)
//
// with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE from its cores and
// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT from its memory, and no
// CUDA_DEVICE_SM_LIMIT: MPS divides the SMs, the library only keeps the
// memory limit and the virtual GPU. Such a container has exactly one GPU (one
// server per GPU, and a client talks to one server).
//
// The limits and control files sit outside the container's writable
// directory, so the container cannot rewrite them through another path. The
// limits file is the container contract's record (protocol/
// container_contract.hpp): it also names the state file and the GPUs in NVML
// order, which the library and the node agent take from it, not from the
// writable state file (docs/security.md). A resize replaces it by rename, so
// its directory is mounted, not the file.
//
//   PlanInput in{.hook_path = "/usr/local", .pod_uid = uid, .container = "main",
//                .gpus = {{"GPU-a", 3000, 30}}, .cache_name = "x.cache"};
//   auto plan = plan_container(in, cfg);   // Error for unsafe names, no GPUs...
//   plan->envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == "3000m";

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "deviceplugin/config.hpp"
#include "protocol/container_contract.hpp"

namespace hami::deviceplugin {

struct AllocatedGpu {
  std::string uuid;
  int32_t mem_mib = 0;
  int32_t cores = 0;
  SharingMode mode = SharingMode::kTimeslice;
};

struct PlanInput {
  std::string hook_path;                               // upstream HOOK_PATH (chart: /usr/local)
  std::string lock_dir = protocol::kContainerLockDir;  // host side of /tmp/vgpulock
  std::string pod_uid;
  std::string container;
  std::vector<AllocatedGpu> gpus;  // in the order the container's NVML lists them
  bool disable_control = false;    // the container's env has CUDA_DISABLE_CONTROL=true
  std::optional<int> priority;     // CUDA_TASK_PRIORITY
  // The container's GPU_CORE_UTILIZATION_POLICY (the webhook sets it from
  // gpuCorePolicy); empty when unset. The library reads the limits file, not
  // the environment, once the file is mounted, so it is carried there.
  std::string core_policy;
  std::string cache_name;  // state file name, "<random uuid>.cache"
};

struct MountSpec {
  std::string container_path;
  std::string host_path;
  bool read_only = true;
  bool operator==(const MountSpec&) const = default;
};

struct ContainerPlan {
  std::map<std::string, std::string> envs;
  std::vector<MountSpec> mounts;
  // CDI device list strategies only (cdi.hpp): the response's annotations
  // and its fully qualified cdi_devices.
  std::map<std::string, std::string> annotations;
  std::vector<std::string> cdi_devices;
  // Host side, for prepare_host (host_files.hpp).
  std::string vgpu_dir;       // <hook_path>/vgpu
  std::string library;        // <vgpu_dir>/libvgpu.so, must exist
  std::string preload_file;   // <vgpu_dir>/ld.so.preload, written when missing
  std::string container_dir;  // recreated empty, mode 0777
  std::string limits_dir;     // <vgpu_dir>/limits/<key>, mounted read-only
  std::string limits_file;    // <limits_dir>/limits, replaced whole
  std::string limits_text;
  std::string control_file;  // created fresh (switch on, not blocked), mode 0644
  std::string lock_dir;
  std::string mps_pipe_dir;  // MPS GPUs only; the GPU's MPS daemon makes it
};

Result<ContainerPlan> plan_container(const PlanInput& in, const PluginConfig& cfg);

// The host limits file plan_container gives a container
// (<hook_path>/vgpu/limits/<uid>_<c>/limits), and the comment that opens it:
// a resize (limits_follower.hpp) rewrites the same file the same way. An
// Error where the UID or name cannot name a host directory.
Result<std::string> limits_file_path(const std::string& hook_path, const std::string& pod_uid,
                                     const std::string& container);
std::string limits_comment(const std::string& pod_uid, const std::string& container);

}  // namespace hami::deviceplugin
