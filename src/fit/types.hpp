#pragma once
// The plain data the fitting core works on: a node's GPUs with their usage, and
// what a pod asks for. No Kubernetes types: the extender fills these from
// registration and allocation annotations, `vgpu run` from NVML and the local
// state files, tests by hand.
//
//   hami::fit::NodeDevices node{"node-a", {{.uuid = "GPU-0", .index = 0,
//                                           .type = "NVIDIA H200", .total_mem_mib = 143771}}};
//   hami::fit::PodRequest pod{{{.nums = 1, .mem_mib = 3000, .cores = 30}}};
//
// Numbers are int32 like upstream's (MiB, percent, tenants), so every value an
// upstream component writes fits, and sums are taken in 64 bits.
//
// A node may also say how well each pair of its GPUs is connected
// (LinkScores, from hami.io/node-nvidia-score); topology.hpp chooses with it.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fit/mig_geometry.hpp"
#include "protocol/device_codec.hpp"
#include "protocol/mig_allocations.hpp"

namespace hami::fit {

// What a container was given, as the allocation annotation carries it.
using protocol::ContainerDevice;
using protocol::ContainerDevices;
using protocol::PodDevices;

// The vendor key NVIDIA requests carry; a device belongs to it when its type
// contains the key case-insensitively (upstream getNodeResources).
inline constexpr const char* kVendorNvidia = "NVIDIA";
inline constexpr const char* kModeHamiCore = "hami-core";
inline constexpr const char* kModeMig = "mig";
// A GPU in mps mode serves only pods whose nvidia.com/vgpu-mode names mps.
inline constexpr const char* kModeMps = "mps";

// The user of a pod that declares no securityContext.runAsUser (its image's
// user, which the scheduler cannot see): such pods count as one user.
inline constexpr int64_t kUserUndeclared = -1;

// gpumem-percentage's "not given" sentinel, as upstream stores it.
inline constexpr int32_t kMemPercentUnset = 101;

struct GpuDevice {
  std::string uuid;                  // "GPU-…", the device's identity everywhere
  int32_t index = 0;                 // NVML index on the node
  std::string type;                  // model as registered: "NVIDIA H200", "NVIDIA-Tesla T4"
  std::string mode = kModeHamiCore;  // "hami-core", "mps" or "mig"
  int32_t numa = 0;                  // NUMA node (negative registered as 0)
  bool healthy = true;
  bool cordoned = false;      // listed in the node's hami.io/device-cordon
  int32_t split_count = 10;   // most tenants (upstream Count)
  int32_t total_mem_mib = 0;  // after deviceMemoryScaling
  int32_t total_cores = 100;  // after deviceCoreScaling
  int32_t used_tenants = 0;   // slices handed out (upstream Used)
  int32_t used_mem_mib = 0;
  int32_t used_cores = 0;
  // An MPS server serves one Linux user at a time (another user's clients
  // wait until the first user's have exited), so an MPS GPU takes pods of
  // one user: the user of the mps_user_pods pods placed on it.
  int64_t mps_user = kUserUndeclared;
  int32_t mps_user_pods = 0;
  // Equal non-zero ids mean equal (type, mode), so fitting over thousands of
  // nodes compares two integers instead of two strings per GPU. Whoever holds
  // many nodes (the scheduler's cache) assigns them; 0 means "compare the
  // strings", always correct.
  uint32_t model_id = 0;
  // Dynamic MIG (mode "mig", registered with migProfiles: docs/mig.md): the
  // profiles the device config allows, and the placements held by instances
  // and by pods' reservations. A container takes a new MIG device here,
  // chosen by choose_mig (mig_geometry.hpp); its cores are percent of that
  // device, so the GPU's core checks do not apply.
  std::vector<MigProfileSpec> mig_profiles;
  std::vector<protocol::MigPlacement> mig_taken;
};

// How well each pair of a node's GPUs is connected, by position in
// NodeDevices::devices: upstream's pair score (protocol::pair_score: 10
// across NUMA nodes up to 60 on one board, +100 per NVLink), 0 when unknown
// or when the two cannot reach each other peer to peer. Symmetric, 0 on the
// diagonal. Empty: the node did not say, and placement ignores topology.
class LinkScores {
 public:
  LinkScores() = default;
  explicit LinkScores(size_t devices) : n_(devices), s_(devices * devices, 0) {}
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  // Sets the pair both ways; positions out of range are ignored.
  void set(size_t a, size_t b, uint16_t score) {
    if (a >= n_ || b >= n_ || a == b) return;
    s_[a * n_ + b] = score;
    s_[b * n_ + a] = score;
  }
  uint16_t at(size_t a, size_t b) const { return s_[a * n_ + b]; }
  bool operator==(const LinkScores&) const = default;

 private:
  size_t n_ = 0;
  std::vector<uint16_t> s_;
};

struct NodeDevices {
  std::string name;
  std::vector<GpuDevice> devices;
  LinkScores links{};  // unused unless its size is devices.size()
};

// How a container runs relative to the others, which decides how its devices
// count: an init container runs alone before the app containers (its usage is
// a peak, not a sum); a sidecar is an init container with restartPolicy
// Always, so it keeps running beside them (its usage adds up).
enum class ContainerKind : uint8_t { kApp, kInit, kSidecar };

struct ContainerRequest {
  int32_t nums = 0;                        // distinct GPUs; 0 = the container asks for none
  std::string type = kVendorNvidia;        // vendor key
  int32_t mem_mib = 0;                     // per GPU; 0 = not given
  int32_t mem_percent = kMemPercentUnset;  // per GPU, 1..100, or kMemPercentUnset
  int32_t cores = 0;                       // percent of each GPU's SMs; 100 = exclusive
  ContainerKind kind = ContainerKind::kApp;
};

// One entry per container, positional like the allocation annotation: init
// containers (and sidecars) first, in spec order, then app containers.
struct PodRequest {
  std::vector<ContainerRequest> containers;
};

}  // namespace hami::fit
