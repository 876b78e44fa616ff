#pragma once
// The node's physical GPUs as the device plugin sees them, and the two views
// it derives from them: the virtual devices advertised to kubelet (each GPU
// split into deviceSplitCount IDs "<GPU-UUID>-<i>", as upstream names them)
// and the registration entries for the scheduler.
//
//   std::vector<Gpu> gpus = ...;                      // from discovery
//   for (auto& id : virtual_ids(gpus[0], 10)) ...     // "GPU-…-0" … "GPU-…-9"
//   physical_uuid("GPU-abc-3");                       // "GPU-abc"
//   auto entries = node_devices(gpus, cfg);           // for hami.io/node-nvidia-register
//   auto links = device_links(gpus);                  // for hami.io/node-nvidia-score, -p2p
//
// A MIG-enabled GPU is not a Gpu here: each of its MIG devices is (mig set),
// split and registered like a GPU with its slice's memory, mode "mig" and
// type "<model> MIG <profile>" (docs/mig.md). A GPU in dynamic MIG mode
// (docs/mig-dynamic.md) is one Gpu (dynamic_mig set): registered whole with
// mode "mig" and the MIG profiles it may be cut into, its MIG devices made
// at Allocate.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "deviceplugin/config.hpp"
#include "protocol/node_register.hpp"

namespace hami::deviceplugin {

// What makes a Gpu a MIG device (docs/mig.md): a compute instance of a
// MIG-enabled GPU, which containers get by its MIG-<uuid> as they get a GPU.
struct MigSlice {
  std::string parent_uuid;  // the GPU's "GPU-…"
  std::string profile;      // "3g.40gb"
  unsigned gpu_instance_id = 0;
  unsigned compute_instance_id = 0;
  unsigned sm_count = 0;  // 0: unknown
};

// A GPU in dynamic MIG mode: what mig_registration (mig_manager.hpp) allows.
struct DynamicMig {
  std::vector<protocol::MigProfileInfo> profiles;
  // The most instances any allowed profile can have: the registration's
  // count and the IDs kubelet sees, as the scheduler places at most that many.
  int32_t count = 0;
};

struct Gpu {
  int index = 0;     // NVML index on the host (a MIG device: its GPU's)
  std::string uuid;  // "GPU-…"; a MIG device's "MIG-…"
  std::string name;  // NVML name, "NVIDIA H100 80GB HBM3" ("… MIG 3g.40gb")
  uint64_t memory_total = 0;
  std::optional<int> numa;  // unknown: no TopologyInfo
  bool healthy = true;
  std::string unhealthy_reason;
  SharingMode mode = SharingMode::kTimeslice;  // from the config at discovery
  // How it reaches each of the node's other GPUs (discovery, from NVML):
  // upstream's pair score and the P2P read status. Empty on a one-GPU node.
  std::vector<protocol::PeerLink> peers;
  std::optional<MigSlice> mig;            // set: a MIG device, registered with mode "mig"
  std::optional<DynamicMig> dynamic_mig;  // set: a whole GPU in dynamic MIG mode
};

// The mode a device registers with the scheduler: "mig" for a MIG device or
// a GPU in dynamic MIG mode, else its sharing mode's ("hami-core" or "mps").
const char* registered_mode(const Gpu& gpu);

// `split_count` IDs; a GPU in dynamic MIG mode gets its registration's count.
std::vector<std::string> virtual_ids(const Gpu& gpu, int split_count);
// The GPU UUID of a virtual ID: the text before the last "-<digits>"; an ID
// without such a suffix is returned whole.
std::string physical_uuid(std::string_view id);

std::vector<protocol::NodeDevice> node_devices(const std::vector<Gpu>& gpus,
                                               const PluginConfig& cfg);

// One entry per GPU for the topology annotations, in registration order;
// empty when no GPU knows its peers (one GPU, or topology not read).
std::vector<protocol::DeviceLinks> device_links(const std::vector<Gpu>& gpus);

}  // namespace hami::deviceplugin
