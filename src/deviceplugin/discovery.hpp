#pragma once
// Finds the node's GPUs through NVML (src/nvml) and watches their health.
//
// Discovery: every GPU NVML lists, less those the config filters out, with
// its NUMA node from NVML or, where the driver cannot say, from
// /sys/bus/pci/devices/<bus id>/numa_node as upstream reads it (negative:
// unknown). A GPU NVML cannot describe is left out with an error in the log.
//
// Health: each check asks NVML for every GPU's memory; a GPU whose call fails
// (NVML_ERROR_GPU_IS_LOST, NVML_ERROR_UNKNOWN, anything) is unhealthy until a
// later check succeeds again. Upstream never brings a GPU back (HAMi#2200).
// Xid events (nvmlEventSet) are not watched yet: a GPU that reports an Xid but
// still answers NVML stays healthy.
//
//   auto nvml = hami::nvml::Library::open(path);
//   auto gpus = discover_gpus(**nvml, cfg);               // Result<std::vector<Gpu>>
//   DeviceState state(*gpus);
//   check_health(**nvml, state);                          // once per --health-interval

#include <string>
#include <vector>

#include "common/result.hpp"
#include "deviceplugin/config.hpp"
#include "deviceplugin/device_state.hpp"
#include "deviceplugin/gpu.hpp"
#include "nvml/nvml.hpp"

namespace hami::deviceplugin {

Result<std::vector<Gpu>> discover_gpus(nvml::Library& nvml, const PluginConfig& cfg,
                                       const std::string& sysfs_pci = "/sys/bus/pci/devices");

// One pass over every GPU in `state`; logs each change.
void check_health(nvml::Library& nvml, DeviceState& state);

}  // namespace hami::deviceplugin
