#pragma once
// What libvgpu.so enforces, resolved once per process: memory and SM limits per
// device, the state-file path, the task priority. Sources, in order:
//
//   1. the read-only limits file the device plugin mounts (kFixedLimitsFile);
//      when it exists it governs and the limit variables of the environment are
//      ignored, so nothing inside the container can raise a limit;
//   2. otherwise the file named by VGPU_LIMITS_FILE, if set (standalone use);
//   3. otherwise the environment: CUDA_DEVICE_MEMORY_LIMIT[_<i>],
//      CUDA_DEVICE_SM_LIMIT[_<i>], CUDA_TASK_PRIORITY, GPU_CORE_UTILIZATION_POLICY
//      (upstream HAMi-core's names and formats).
//
// CUDA_OVERSUBSCRIBE (true/false) is read from the limits file when it has it,
// otherwise from the environment, where the device plugin sets it.
//
// A limits file is the container contract's record (protocol/
// container_contract.hpp): the same KEY=VALUE pairs, plus the state file and
// the GPUs in NVML order, which the environment cannot give. A value that
// cannot be read never means "unlimited": the device it names has every
// allocation refused, and the reason is in Config::errors.
//
//   auto cfg = hami::vgpu::load_config(hami::vgpu::process_sources());
//   for (auto& e : cfg.errors) hami::log::error("%s", e.c_str());

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "protocol/container_contract.hpp"
#include "region/layout_v1.hpp"
#include "vgpu/limiter/core_policy.hpp"

namespace hami::vgpu {

inline constexpr const char* kFixedLimitsFile = protocol::kContainerLimitsFile;
// Written by the node agent, mounted read-only by the device plugin
// (region/control_file.hpp): the SM share's switch and the priority block.
inline constexpr const char* kFixedControlFile = protocol::kContainerControlFile;
inline constexpr int kMaxDevices = region::kMaxDevices;
static_assert(kMaxDevices == protocol::kContainerMaxDevices);

struct Config {
  std::array<uint64_t, kMaxDevices> memory_limit{};  // bytes; 0 = no limit
  std::array<bool, kMaxDevices> memory_denied{};     // the limit was unreadable
  std::array<uint64_t, kMaxDevices> sm_limit{};      // percent; 100 = no cap
  int32_t priority = 1;                              // 0 high, 1 low
  limiter::CorePolicy core_policy = limiter::CorePolicy::kDefault;
  std::string limits_file;  // the file that governs, or empty for the environment
  std::string state_file;
  bool state_file_from_env = false;
  bool state_file_from_limits = false;
  // The container's GPUs in NVML order, from the limits file (empty: not given,
  // the state file's table is used as upstream does).
  std::vector<std::string> device_uuids;
  // The control file to read the SM share's switch from, or empty: then the
  // state file's utilization_switch (upstream's, which the tenant can write).
  std::string control_file;
  // CUDA_OVERSUBSCRIBE: an allocation within the limit that the GPU cannot
  // back physically is placed in host memory the GPU can use (spill.hpp).
  bool oversubscribe = false;
  // The limits file records an MPS client (its thread cap): the MPS server
  // divides the SMs, and the state file's SM figure is the writer's.
  bool mps_client = false;
  std::vector<std::string> errors;
  std::vector<std::string> warnings;

  Config() { sm_limit.fill(100); }
  bool has_memory_limit(int dev) const { return memory_denied[dev] || memory_limit[dev] != 0; }
  // Any limit at all, or a state file asked for: then we account. Otherwise
  // the library stays out of the way entirely.
  bool accounting_needed() const;
};

struct ConfigSources {
  std::function<std::optional<std::string>(const std::string&)> env;
  // Every variable name in the environment (to name the ones we ignore); may be empty.
  std::function<std::vector<std::string>()> env_names;
  // nullopt: no such file. Error: it exists but cannot be read.
  std::function<Result<std::optional<std::string>>(const std::string&)> read_file;
  std::string fixed_limits_file = kFixedLimitsFile;
  // Whether a path exists (any kind of file); may be empty (then: no).
  std::function<bool(const std::string&)> exists;
  std::string fixed_control_file = kFixedControlFile;
};

// The real environment and file system.
ConfigSources process_sources();

Config load_config(const ConfigSources& sources);

}  // namespace hami::vgpu
