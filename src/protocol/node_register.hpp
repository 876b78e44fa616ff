#pragma once
// The node annotation hami.io/node-nvidia-register through which the device
// plugin tells the scheduler what GPUs the node has: upstream's JSON array
// (device.MarshalNodeDevices, HAMi >= 2.8), one object per physical GPU with
// Go's field order and omitempty (a zero index or NUMA node and a false health
// are left out):
//
//   [{"id":"GPU-…","index":1,"count":10,"devmem":32768,"devcore":100,
//     "type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,"mode":"hami-core","health":true}]
//
//   std::string v = hami::protocol::encode_node_devices(devices);
//   auto back = hami::protocol::decode_node_devices(v);   // Result, says what is wrong

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace hami::protocol {

struct NodeDevice {
  std::string id;       // the GPU UUID
  int index = 0;        // NVML index
  int32_t count = 0;    // how many containers may share it (split count)
  int32_t devmem = 0;   // MiB, scaled by deviceMemoryScaling
  int32_t devcore = 0;  // 100 × deviceCoreScaling
  std::string type;     // "NVIDIA-<model>"
  int numa = 0;
  std::string mode;  // "hami-core"
  bool health = false;
  bool operator==(const NodeDevice&) const = default;
};

std::string encode_node_devices(const std::vector<NodeDevice>& devices);
Result<std::vector<NodeDevice>> decode_node_devices(std::string_view json_text);

// Upstream's Type: the NVML name, prefixed "NVIDIA-" unless it starts with
// "NVIDIA" ("Tesla T4" → "NVIDIA-Tesla T4", "NVIDIA A30" stays). The device
// plugin registers it and `vgpu run` fits its local GPUs by it, so both match
// the same strings.
std::string device_type(std::string_view nvml_name);

}  // namespace hami::protocol
