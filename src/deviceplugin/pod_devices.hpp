#pragma once
// The scheduler's device decision for a pod, as it writes it into
// hami.io/vgpu-devices-to-allocate and hami.io/vgpu-devices-allocated
// (upstream EncodePodSingleDevice): for each container, init containers first,
// the GPUs it gets as "UUID,Type,MiB,Cores" each terminated by ':', and each
// container's list terminated by ';'. A container without GPUs keeps its empty
// slot, so positions map to containers:
//
//   ";GPU-a,NVIDIA,2500,25:;GPU-b,NVIDIA,2500,25:;"
//     → { {}, {{"GPU-a","NVIDIA",2500,25}}, {{"GPU-b","NVIDIA",2500,25}} }
//
//   auto pd = hami::deviceplugin::decode_pod_devices(annotation);
//   if (!pd) return fail(pd.error().message);   // says which container/device and why
//   std::string back = hami::deviceplugin::encode_pod_devices(*pd);
//
// Unlike upstream, a number that does not parse is an error (upstream reads it
// as 0, which means "no limit"), and so is a device entry without exactly four
// fields.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace hami::deviceplugin {

struct ContainerDevice {
  std::string uuid;  // "GPU-..."
  std::string type;  // "NVIDIA" or the model, as the scheduler wrote it
  int32_t mem_mib = 0;
  int32_t cores = 0;  // percent of the GPU's SMs
  bool operator==(const ContainerDevice&) const = default;
};
using ContainerDevices = std::vector<ContainerDevice>;
// One entry per container: init containers first, then app containers.
using PodDevices = std::vector<ContainerDevices>;

// Bigger is not something a scheduler writes; refuse it before splitting.
inline constexpr size_t kMaxPodDevicesText = 64 * 1024;

Result<PodDevices> decode_pod_devices(std::string_view text);
std::string encode_pod_devices(const PodDevices& devices);

// Whether any container still has devices (the to-allocate copy is emptied as
// containers are served).
bool any_devices(const PodDevices& devices);

}  // namespace hami::deviceplugin
