#pragma once
// The device plugin's configuration: built-in defaults, then the command-line
// flags, then upstream's device config YAML (its `nvidia:` block, the same file
// the scheduler reads), then the `nodeconfig:` entry naming this node (from the
// same file or upstream's separate config.json). Keys are upstream's and, as in
// upstream (Go's JSON decoding), matched without regard to case. Keys only the
// scheduler uses are accepted silently; unknown ones give a warning. A value of
// the wrong type or out of range is an error naming the file, line and key.
//
//   hami::deviceplugin::PluginConfig cfg;                 // defaults
//   cfg.device_split_count = flag_value;                  // flags
//   auto r = apply_config_file(cfg, "/device-config.yaml", "node-1");
//   if (!r) { log(r.error().message); exit(2); }          // "/device-config.yaml:4:
//   nvidia.deviceSplitCount: ..." for (auto& w : cfg.warnings) log(w);

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"
#include "fit/mig_geometry.hpp"
#include "protocol/container_contract.hpp"

namespace hami::deviceplugin {

inline constexpr int kMaxSplitCount = 1024;

// How a GPU is shared (docs/sharing-modes.md). Timeslice: the GPU's time is
// sliced between containers and libvgpu.so paces each to its SM share; it
// registers as upstream's "hami-core". MPS: the containers are clients of the
// GPU's MPS server, which runs their kernels side by side on disjoint SMs;
// it registers as "mps", so only pods annotated nvidia.com/vgpu-mode: mps
// land on it.
using protocol::SharingMode;

// "timeslice" or "mps", as the config and the logs say it.
const char* sharing_mode_name(SharingMode m);
// The mode the GPU registers with the scheduler: "hami-core" or "mps".
const char* registered_mode(SharingMode m);

// One GPU's mode, set apart from the node's: by UUID when uuid is set, else
// by NVML index. `mig`: operatingmode mig (docs/mig.md), the GPU is served as
// the MIG devices it is partitioned into; `mode` is then unused.
struct GpuModeOverride {
  std::string uuid;
  int index = -1;
  SharingMode mode = SharingMode::kTimeslice;
  bool mig = false;
};

// --mig-strategy (NVIDIA's device plugin's flag, docs/mig.md). None and
// single: a MIG-enabled GPU's MIG devices are nvidia.com/gpu devices,
// registered for the scheduler with mode "mig". Mixed: they are advertised as
// nvidia.com/mig-<profile> resources that kubelet counts, as NVIDIA's plugin
// does, and are not registered for the scheduler.
enum class MigStrategy : uint8_t { kNone, kSingle, kMixed };
const char* mig_strategy_name(MigStrategy s);

struct PluginConfig {
  // May be overridden per node.
  int device_split_count = 10;
  double device_memory_scaling = 1.0;
  double device_core_scaling = 1.0;
  std::optional<int> lib_cuda_log_level;  // LIBCUDA_LOG_LEVEL for containers, 0..4
  bool enable_numa_topology = true;       // NUMA TopologyInfo on ListAndWatch
  bool enable_get_preferred_allocation = true;
  std::vector<std::string> filter_uuids;  // GPUs hidden from kubelet and the scheduler
  std::vector<int> filter_indices;
  SharingMode sharing_mode = SharingMode::kTimeslice;  // nodeconfig operatingmode
  bool mig_mode = false;                               // nodeconfig operatingmode: mig
  std::vector<GpuModeOverride> gpu_modes;              // nodeconfig devicemodes
  MigStrategy mig_strategy = MigStrategy::kNone;       // --mig-strategy, nodeconfig migstrategy

  // nvidia.migProfileAllowlist: the MIG profiles dynamic MIG may make, by
  // GPU model (docs/mig-dynamic.md).
  std::vector<fit::MigAllowEntry> mig_profile_allowlist;

  bool disable_core_limit = false;  // GPU_CORE_UTILIZATION_POLICY=disable in every container
  std::string resource_count_name = protocol::kResourceCount;
  std::string resource_memory_name = protocol::kResourceMemory;
  std::string resource_memory_percentage_name = protocol::kResourceMemoryPercentage;
  std::string resource_core_name = protocol::kResourceCores;
  std::string resource_priority_name = protocol::kResourcePriority;

  std::vector<std::string> sources;   // what was applied, in order, for the log
  std::vector<std::string> warnings;  // unknown keys and the like

  bool filtered(const std::string& uuid, int index) const;
  // The GPU's sharing mode: the last devicemodes entry naming it, else the
  // node's operatingmode.
  SharingMode mode_of(const std::string& uuid, int index) const;
  // Whether the GPU's operatingmode is mig, by the same rule.
  bool mig_of(const std::string& uuid, int index) const;
  // One line for the log: every effective value.
  std::string describe() const;
};

// Xid critical errors that do not make a GPU unhealthy whatever the flags say:
// the application errors NVIDIA's own device plugin skips (the GPU is fine,
// a program failed): 13 graphics engine exception, 31 GPU memory page fault,
// 43 GPU stopped processing, 45 preemptive cleanup, 68 video processor
// exception, 109 context switch timeout.
inline constexpr uint64_t kApplicationXids[] = {13, 31, 43, 45, 68, 109};

// What the health checker does with Xid events (--ignore-xids, --xid-recovery).
struct XidPolicy {
  bool watch = true;              // false: --ignore-xids all (no events at all)
  std::vector<uint64_t> ignored;  // on top of kApplicationXids
  // How long a critical Xid keeps a GPU unhealthy; 0: until the plugin restarts.
  std::chrono::milliseconds recovery{std::chrono::minutes(5)};

  bool critical(uint64_t xid) const;
  // For the log: "ignoring 13,31,...; unhealthy for 300 s after a critical Xid".
  std::string describe() const;
};

// Parses --ignore-xids (and upstream's DP_DISABLE_HEALTHCHECKS): a comma list
// of Xid numbers, blanks allowed; "all" or "xids" anywhere ignores every Xid;
// "" ignores none beyond kApplicationXids. Anything else is an Error.
Result<void> parse_ignore_xids(std::string_view list, XidPolicy& policy);

// Applies one YAML (or JSON) document; `source` names it in messages.
Result<void> apply_config_text(PluginConfig& cfg, std::string_view text, const std::string& source,
                               const std::string& node_name);
// Reads `path` (at most 1 MiB) and applies it.
Result<void> apply_config_file(PluginConfig& cfg, const std::string& path,
                               const std::string& node_name);

}  // namespace hami::deviceplugin
