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
// A GPU in dynamic MIG mode adds "migProfiles" (MigProfileInfo below).
//
//   std::string v = hami::protocol::encode_node_devices(devices);
//   auto back = hami::protocol::decode_node_devices(v);   // Result, says what is wrong
//
// Beside it, how the GPUs connect, pair by pair (docs/device-plugin.md):
//
// hami.io/node-nvidia-score is upstream's (pkg/device/nvidia/calculate_score.go:
// its plugin writes it with ENABLE_TOPOLOGY_SCORE=true, its scheduler's
// topology-aware policy reads it): per GPU, its pair_score() to every other
// GPU, higher = better connected. Go's encoder sorts map keys and so does
// encode_pair_scores, so the text is upstream's for the same GPUs:
//
//   [{"uuid":"GPU-a","score":{"GPU-b":460,"GPU-c":20}},{"uuid":"GPU-b","score":...}]
//
// hami.io/node-nvidia-p2p is ours, and upstream's scheduler does not read it:
// NVML's peer-to-peer read status per pair, which the score cannot carry:
//
//   [{"uuid":"GPU-a","p2p":{"GPU-b":"ok","GPU-c":"chipset_not_supported"}}]

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"
#include "protocol/mig_allocations.hpp"

namespace hami::protocol {

// One MIG profile a GPU in dynamic MIG mode offers (docs/mig.md): upstream's
// MIGProfiles carry a profile's memory, core percent, slice count and NVML
// placements; the JSON names are ours, as upstream's are not recorded here:
//   {"name":"3g.40gb","memory":40192,"core":42,"sliceCount":3,
//    "placements":[{"start":0,"size":4},{"start":4,"size":4}]}
struct MigProfileInfo {
  std::string name;
  int32_t memory = 0;  // MiB
  int32_t core = 0;    // percent of the GPU's SMs
  int32_t slice_count = 0;
  std::vector<MigPlacement> placements;
  bool operator==(const MigProfileInfo&) const = default;
};

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
  // Dynamic MIG (mode "mig" on a GPU not yet cut): the allowed profiles.
  std::vector<MigProfileInfo> mig_profiles;
  bool operator==(const NodeDevice&) const = default;
};

std::string encode_node_devices(const std::vector<NodeDevice>& devices);
Result<std::vector<NodeDevice>> decode_node_devices(std::string_view json_text);

// One GPU's connections to the node's other GPUs.
struct PeerLink {
  std::string uuid;   // the other GPU
  int32_t score = 0;  // pair_score()
  std::string p2p;    // "ok", "chipset_not_supported", ...; "" when unknown
  bool operator==(const PeerLink&) const = default;
};
struct DeviceLinks {
  std::string uuid;
  std::vector<PeerLink> peers;
  bool operator==(const DeviceLinks&) const = default;
};

// Upstream's pair score (calculateGPUPairScore): the closest PCIe ancestor
// two GPUs share, as an NVML topology level (0 same board: 60, 10 one switch:
// 50, 20 several switches: 40, 30 host bridge: 30, 40 NUMA node: 20, 50
// across NUMA nodes: 10, unknown: 0), plus 100 per NVLink (1 to 18; upstream's
// table ends at 18 and counts more as none).
int32_t pair_score(std::optional<int> nvml_level, int nvlinks);

std::string encode_pair_scores(const std::vector<DeviceLinks>& devices);
// Peers whose status is unknown are left out.
std::string encode_p2p(const std::vector<DeviceLinks>& devices);
// Each fills what its annotation carries (score, or p2p) and leaves the other
// field empty. Fields they do not know are ignored, as Go's decoder does.
Result<std::vector<DeviceLinks>> decode_pair_scores(std::string_view json_text);
Result<std::vector<DeviceLinks>> decode_p2p(std::string_view json_text);

// Upstream's Type: the NVML name, prefixed "NVIDIA-" unless it starts with
// "NVIDIA" ("Tesla T4" → "NVIDIA-Tesla T4", "NVIDIA A30" stays). The device
// plugin registers it and `vgpu run` fits its local GPUs by it, so both match
// the same strings.
std::string device_type(std::string_view nvml_name);

}  // namespace hami::protocol
