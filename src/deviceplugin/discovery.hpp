#pragma once
// Finds the node's GPUs through NVML (src/nvml) and watches their health.
//
// Discovery: every GPU NVML lists, less those the config filters out, with
// its NUMA node from NVML or, where the driver cannot say, from
// /sys/bus/pci/devices/<bus id>/numa_node as upstream reads it (negative:
// unknown). A GPU NVML cannot describe is left out with an error in the log.
// A GPU with MIG on is served as its MIG devices (mig_devices_of); one whose
// operatingmode is mig but whose MIG is off is left out, said in the log
// (this build serves GPUs already partitioned: static MIG, docs/mig.md).
// With two GPUs or more, each pair's connection is read once (nvml/topology.hpp)
// into Gpu::peers, logged per pair; what NVML cannot answer is logged and
// scores as unknown.
//
// Health, two sources:
// - each periodic check asks NVML for every GPU's memory; a GPU whose call
//   fails (NVML_ERROR_GPU_IS_LOST, NVML_ERROR_UNKNOWN, anything) is unhealthy
//   until a later check succeeds again (upstream never brings a GPU back,
//   HAMi#2200);
// - between checks the HealthChecker waits on NVML's Xid critical-error
//   events: a critical Xid (not an application error, not --ignore-xids)
//   makes its GPU unhealthy ("Xid 79") for XidPolicy::recovery even though
//   NVML still answers (0: until restart, as NVIDIA's plugin); after that the
//   periodic check may mark it healthy again. An event that names no device
//   makes every GPU unhealthy. Without event support (old driver) only the
//   periodic checks run.
//
//   auto nvml = hami::nvml::Library::open(path);
//   auto gpus = discover_gpus(**nvml, cfg);               // Result<std::vector<Gpu>>
//   DeviceState state(*gpus);
//   HealthChecker health(**nvml, state, policy);
//   health.watch_xids();                                  // logs when it cannot
//   while (...) { health.check(); health.wait_xids(next_check); }   // short
//                                                   // deadlines to notice shutdown
//
// One thread owns the HealthChecker, as it owns the nvml::Library.

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/result.hpp"
#include "deviceplugin/config.hpp"
#include "deviceplugin/device_state.hpp"
#include "deviceplugin/gpu.hpp"
#include "nvml/nvml.hpp"

namespace hami::deviceplugin {

// How discovery tells a GPU in dynamic MIG mode (docs/mig-dynamic.md) from
// one the operator partitioned. A GPU whose operatingmode is mig and whose
// MIG is on is dynamic when it holds no MIG device, or when `ours` says the
// ones it holds are dynamic MIG's (made by this plugin before a restart);
// `registration` then gives what it registers. Without a source, such a GPU
// is served as static MIG alone. An Error from `ours` fails discovery: a
// wrong guess would serve dynamic MIG's instances as the operator's, or let
// cleanup remove the operator's.
struct DynamicMigSource {
  std::function<Result<bool>(const Gpu& gpu, const std::vector<nvml::MigDevice>& layout)> ours;
  std::function<Result<DynamicMig>(const Gpu& gpu)> registration;
};

Result<std::vector<Gpu>> discover_gpus(nvml::Library& nvml, const PluginConfig& cfg,
                                       const DynamicMigSource* dynamic = nullptr,
                                       const std::string& sysfs_pci = "/sys/bus/pci/devices");

// The devices a MIG-enabled GPU is served as: one per MIG device of `layout`
// (nvml::Library::mig_devices), each with the GPU's index and NUMA node and
// its own UUID, name, memory and instance IDs; those `cfg` filters out
// (filterdevices by MIG UUID) are left out. Static MIG calls it with the
// layout NVML reads at start; dynamic MIG, which changes the layout, is to
// call it again with the new one (docs/mig.md).
std::vector<Gpu> mig_devices_of(const Gpu& parent, const std::vector<nvml::MigDevice>& layout,
                                const PluginConfig& cfg);

class HealthChecker {
 public:
  using Clock = std::chrono::steady_clock;

  HealthChecker(nvml::Library& nvml, DeviceState& state, XidPolicy policy)
      : nvml_(nvml), state_(state), policy_(std::move(policy)) {}

  // Registers for Xid events; false (logged once) when the policy ignores
  // every Xid or the driver cannot deliver them.
  bool watch_xids();
  // The periodic pass: NVML for every GPU; a GPU within its Xid window stays
  // unhealthy, one past it is healthy again when NVML answers.
  void check();
  // Handles the Xid events that arrive until `deadline`, then returns; it
  // sleeps to the deadline when not watching or after an NVML error (logged
  // once until a wait succeeds again). Owners pass short deadlines (< 1 s)
  // to notice shutdown.
  void wait_xids(Clock::time_point deadline);
  // What one Xid event does: logs it; a critical one marks its GPU (every GPU
  // for index -1) unhealthy until its window ends. On a MIG-enabled GPU, an
  // Xid the driver places in a GPU instance (and compute instance) marks only
  // the MIG devices there, as NVIDIA's plugin matches them; one it does not
  // place marks every MIG device of the GPU.
  void on_xid(int index, uint64_t xid, std::optional<unsigned> gpu_instance = std::nullopt,
              std::optional<unsigned> compute_instance = std::nullopt);

 private:
  nvml::Library& nvml_;
  DeviceState& state_;
  XidPolicy policy_;
  bool watching_ = false;
  bool wait_failing_ = false;  // logged once until a wait succeeds
  // By device UUID (a GPU's or a MIG device's): the end of its Xid window.
  std::map<std::string, Clock::time_point> xid_until_;
  std::map<std::string, uint64_t> last_xid_;
};

}  // namespace hami::deviceplugin
