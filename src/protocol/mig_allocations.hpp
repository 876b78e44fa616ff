#pragma once
// The pod annotation hami.io/vgpu-mig-allocations of dynamic MIG
// (docs/mig.md): for each device of a container that goes to a GPU in MIG
// operating mode, the MIG profile and placement the scheduler reserved, and,
// once the device plugin has made the instance at Allocate, the MIG device's
// UUID and its GPU- and compute-instance IDs. Upstream v2.10's JSON array
// (pkg/device/nvidia/mig_allocations.go), its field names and order; the
// three runtime fields are all present or all absent:
//
//   [{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-…","profile":"3g.40gb",
//     "placement":{"start":4,"size":4},
//     "migUUID":"MIG-…","gpuInstanceID":2,"computeInstanceID":0}]
//
//   std::string v = hami::protocol::encode_mig_allocations(allocs);
//   auto back = hami::protocol::decode_mig_allocations(v);  // Result: says what is wrong
//   if (back && !(*back)[0].realised()) create_instance((*back)[0]);

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace hami::protocol {

inline constexpr const char* kMigAllocations = "hami.io/vgpu-mig-allocations";

// Where on the GPU a GPU instance sits, in memory slices (nvmlGpuInstancePlacement_t).
struct MigPlacement {
  unsigned start = 0;
  unsigned size = 0;
  bool operator==(const MigPlacement&) const = default;
  // Whether two placements share a memory slice.
  bool overlaps(const MigPlacement& o) const {
    return start < o.start + o.size && o.start < start + size;
  }
};

struct MigAllocation {
  int container_index = 0;  // the container's position in the pod's containers
  int device_index = 0;     // the device's position among that container's devices
  std::string gpu_uuid;     // the GPU the instance is (to be) made on
  std::string profile;      // "3g.40gb"
  MigPlacement placement;
  // Set by the device plugin once the instance exists.
  std::string mig_uuid;  // "MIG-…"
  std::optional<unsigned> gpu_instance_id;
  std::optional<unsigned> compute_instance_id;

  bool realised() const { return !mig_uuid.empty(); }
  bool operator==(const MigAllocation&) const = default;
};

std::string encode_mig_allocations(const std::vector<MigAllocation>& allocs);
// Refuses what the plugin could not act on: a missing GPU UUID or profile, a
// placement of size 0, negative indexes, runtime fields only partly present,
// and two entries for one container's device.
Result<std::vector<MigAllocation>> decode_mig_allocations(std::string_view json_text);

}  // namespace hami::protocol
