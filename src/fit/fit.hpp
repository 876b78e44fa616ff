#pragma once
// Fitting a pod onto one node: which GPUs each container gets, or why none
// fit. Upstream's NVIDIA Fit and scoreNode (§3.5): each container's GPUs are
// tried in policy order (device_order.hpp) and checked in upstream's order
// (reasons.hpp); an init container is fitted against a fresh copy of the node
// and only its peak counts, app containers and sidecars add up.
//
// A request is prepared once (it validates and precomputes what every node
// needs), then fitted against each candidate node with a per-thread scratch
// that is reused, so the per-node work allocates nothing once warm:
//
//   auto pod = hami::fit::PreparedPod::make(request, options);
//   if (!pod) return error(pod.error().message);
//   hami::fit::FitScratch scratch;        // one per thread
//   hami::fit::Placement placement;
//   for (const NodeDevices& node : candidates) {
//     NodeFit f = fit_pod(node, *pod, scratch, &placement);
//     if (f.fits) keep(node.name, f.score); else failed(node.name, describe(f.failure));
//   }
//   PodDevices devices = to_pod_devices(chosen_node, *pod, placement);  // for the codec
//
// Where the node says how its GPUs connect (NodeDevices::links), a container
// of several GPUs gets, among the GPUs its policy cannot tell apart, the
// best-connected set; under topology-aware, the best-connected set of all
// GPUs that fit, and a one-GPU container the least connected GPU
// (docs/fitting.md).
//
// A node's GPUs of another vendor are neither tried nor counted in "<n>/<cards>".
// Choosing among the fitting nodes (node policy, score.hpp) is the caller's.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/result.hpp"
#include "fit/device_order.hpp"
#include "fit/options.hpp"
#include "fit/reasons.hpp"
#include "fit/score.hpp"
#include "fit/topology.hpp"
#include "fit/types.hpp"
#include "protocol/device_codec.hpp"
#include "protocol/mig_allocations.hpp"

namespace hami::fit {

// A request checked and ready to fit: immutable, shared by every thread.
class PreparedPod {
 public:
  // Errors: a container with nums < 0, memory or cores < 0, a percentage
  // outside 1..100 other than the unset sentinel, an empty type, more than 32
  // vendor types, or more than 65535 containers.
  static Result<PreparedPod> make(PodRequest request, PodOptions options);

  const PodRequest& request() const { return request_; }
  const PodOptions& options() const { return options_; }
  // No container asks for a GPU: the pod fits anywhere, with no devices.
  bool empty() const { return empty_; }

  // Internal to fitting: the distinct vendor keys, upper-cased, and each
  // container's index into them; an id that tells scratch caches apart.
  const std::vector<std::string>& vendor_keys() const { return vendors_; }
  uint8_t vendor_of(size_t container) const { return vendor_of_[container]; }
  uint64_t id() const { return id_; }

 private:
  PreparedPod() = default;
  PodRequest request_;
  PodOptions options_;
  std::vector<std::string> vendors_;
  std::vector<uint8_t> vendor_of_;
  bool empty_ = true;
  uint64_t id_ = 0;
};

// One GPU given to one container.
struct Assignment {
  uint16_t container = 0;  // position in PodRequest::containers
  uint16_t device = 0;     // position in NodeDevices::devices
  int32_t mem_mib = 0;
  int32_t cores = 0;
  // Dynamic MIG: the MIG device to make, as a position in the GPU's
  // mig_profiles (-1: not a dynamic MIG GPU) and its placement.
  int16_t mig_profile = -1;
  protocol::MigPlacement mig_placement{};
};

// Every assignment of a fitted pod, by container, each container's GPUs in
// the order they were chosen.
struct Placement {
  std::vector<Assignment> assignments;
};

struct NodeFit {
  bool fits = false;
  // node_score() before the pod; set when it fits and a placement was asked
  // for (a verdict-only fit, filter's over every node, leaves it 0: the
  // scheduler's cache keeps each node's score already).
  float score = 0;
  FitFailure failure;  // set when it does not
};

// Per-thread working memory for fit_pod: usage copies, orders, the cache of
// per-model verdicts. Reused across nodes and requests.
struct FitScratch {
  struct TypeVerdict {
    std::string type;
    std::string mode;
    uint32_t model_id = 0;
    uint32_t vendors = 0;  // bit v: the type contains vendor key v
    bool allowed = false;  // use/nouse-gputype and vgpu-mode accept it
  };
  uint64_t pod_id = 0;
  std::vector<TypeVerdict> verdicts;
  std::vector<uint32_t> vendors;  // per device of the node
  std::vector<uint8_t> eligible;  // per device: type allowed and UUID accepted
  std::vector<DeviceUsage> state;
  std::vector<DeviceUsage> trial;
  std::vector<DeviceKey> keys;
  std::vector<uint16_t> candidates;
  std::vector<uint16_t> order;
  std::vector<Assignment> chosen;
  std::vector<Assignment> trial_chosen;
  // Dynamic MIG placements this pod's earlier containers took, by device.
  std::vector<std::pair<uint16_t, protocol::MigPlacement>> mig_picks;
  std::vector<protocol::MigPlacement> mig_taken;
  size_t last_verdict = 0;
  // Choosing by topology (topology.hpp).
  std::vector<uint16_t> forced;
  std::vector<uint16_t> pool;
  std::vector<uint16_t> picked;
  ConnectScratch connect;
};

// placement may be null when only the verdict is wanted; it is overwritten.
NodeFit fit_pod(const NodeDevices& node, const PreparedPod& pod, FitScratch& scratch,
                Placement* placement = nullptr);

// The placement as the allocation annotation carries it: one entry per
// container (empty where it asked for nothing), type = the request's vendor key.
PodDevices to_pod_devices(const NodeDevices& node, const PreparedPod& pod,
                          const Placement& placement);

// The dynamic MIG devices of the placement, for hami.io/vgpu-mig-allocations:
// one per assignment to a GPU with mig_profiles, deviceIndex its position
// among its container's devices. Empty when there are none.
std::vector<protocol::MigAllocation> to_mig_allocations(const NodeDevices& node,
                                                        const Placement& placement);

// One-shot form for a single node (`vgpu run`, tests): the devices, or an
// error whose message is describe(failure) prefixed with the node's name.
Result<PodDevices> place_pod(const NodeDevices& node, const PreparedPod& pod);

}  // namespace hami::fit
