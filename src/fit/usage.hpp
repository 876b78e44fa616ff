#pragma once
// Bookkeeping: what a placed pod holds on each GPU, added to or taken from a
// node's usage. The extender's cache applies a pod when its allocation
// annotation appears (or when bind reserves it) and removes it when the pod
// ends; `vgpu run` applies the local containers the same way.
//
// Init containers collapse as upstream's CollapseInitContainerUsage does: an
// init container runs alone, so per GPU a pod holds
//   memory/cores = max(the largest init container + the sidecars started
//                      before it, the sum of the sidecars and app containers),
//   tenants      = max(1 if an init container used it + those sidecars,
//                      the number of sidecars and app containers on it).
// Once the init containers have finished, only the sidecars and app
// containers count (init_finished).
//
//   auto charges = hami::fit::pod_charges(devices, kinds);
//   hami::fit::apply_charges(node, charges);    // pod appeared
//   hami::fit::remove_charges(node, charges);   // pod gone
//   hami::fit::apply_mig(node, allocs);          // its dynamic MIG placements
//
// This is also what upstream's Filter leaves in its usage after fitting a pod
// (applyPeakUsage), so a pod placed by fit_pod and applied here is counted the
// way the fit counted it.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fit/types.hpp"
#include "protocol/device_codec.hpp"
#include "protocol/mig_allocations.hpp"

namespace hami::fit {

struct DeviceCharge {
  std::string uuid;
  int32_t tenants = 0;
  int32_t mem_mib = 0;
  int32_t cores = 0;
  int64_t user = kUserUndeclared;  // the pod's runAsUser: what an MPS GPU keeps (GpuDevice)
  bool operator==(const DeviceCharge&) const = default;
};

// kinds[i] is container i's kind; containers beyond kinds count as app
// containers. One charge per GPU, in the order GPUs first appear.
std::vector<DeviceCharge> pod_charges(const PodDevices& devices,
                                      std::span<const ContainerKind> kinds,
                                      bool init_finished = false);

// Both return how many charges named a GPU the node does not have (0 when
// all applied); those are skipped. Removal never takes usage below zero.
size_t apply_charges(NodeDevices& node, std::span<const DeviceCharge> charges);
size_t remove_charges(NodeDevices& node, std::span<const DeviceCharge> charges);

// A pod's dynamic MIG entries (hami.io/vgpu-mig-allocations) hold their
// placements on their GPUs: added to, or taken from, GpuDevice::mig_taken.
// Removal takes one equal placement per entry, so two pods that hold the
// same placement (only a decision we did not make can) free it only when
// both are gone. Both return how many entries named a GPU the node lacks.
size_t apply_mig(NodeDevices& node, std::span<const protocol::MigAllocation> allocs);
size_t remove_mig(NodeDevices& node, std::span<const protocol::MigAllocation> allocs);

}  // namespace hami::fit
