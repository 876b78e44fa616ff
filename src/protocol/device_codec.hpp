#pragma once
// The pod allocation annotation (hami.io/vgpu-devices-allocated and
// -to-allocate, upstream EncodePodSingleDevice, §3.6): per container, init
// containers first, its GPUs as "UUID,Type,Usedmem,Usedcores" each ended by
// ':', the container's list ended by ';'. A container with no GPU keeps its
// empty slot, so positions map to containers:
//
//   ";GPU-a,NVIDIA,2500,25:;GPU-b,NVIDIA,2500,25:;"
//     ⇔ { {}, {{"GPU-a","NVIDIA",2500,25}}, {{"GPU-b","NVIDIA",2500,25}} }
//
//   auto pd = hami::protocol::decode_pod_devices(text);
//   if (!pd) log(pd.error().message);  // "container 2, device 1 'GPU-b,NVIDIA,x,25': …"
//   auto text = hami::protocol::encode_pod_devices(*pd);
//
// Stricter than upstream, which reads a bad number as 0 (no limit): a number
// that is not a non-negative int32, a device without exactly four fields, an
// empty UUID or type, or a stray empty device entry is an error. A final
// container or device without its terminator is accepted (it can only mean
// one thing).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace hami::protocol {

struct ContainerDevice {
  std::string uuid;  // "GPU-…" (MIG: "GPU-…[t-i]")
  std::string type;  // "NVIDIA", as the scheduler writes it
  int32_t mem_mib = 0;
  int32_t cores = 0;
  bool operator==(const ContainerDevice&) const = default;
};
using ContainerDevices = std::vector<ContainerDevice>;
using PodDevices = std::vector<ContainerDevices>;  // one per container, positional

// Larger is no scheduler's output; refused before any splitting.
inline constexpr size_t kMaxPodDevicesText = 64 * 1024;

Result<PodDevices> decode_pod_devices(std::string_view text);
// Errors where a UUID or type is empty or holds ',', ':' or ';', or a number
// is negative: such a value could not be read back as written.
Result<std::string> encode_pod_devices(const PodDevices& devices);

}  // namespace hami::protocol
