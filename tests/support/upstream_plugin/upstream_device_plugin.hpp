#pragma once
// A stand-in for upstream HAMi's NVIDIA device plugin (v2.10, Go), which
// cannot run here: it makes the Kubernetes API requests upstream's plugin
// makes, with upstream's annotation values byte for byte, so a test can put
// our scheduler beside a node that runs upstream's plugin.
//
// - Registration (upstream plugin/register.go, device.MarshalNodeDevices):
//   one JSON merge patch of the node annotation hami.io/node-nvidia-register,
//   its value written here by hand in Go's json.Marshal format (struct field
//   order, omitempty), never with our own encoder, so that reading it is a
//   real compatibility check. No handshake annotation (removed upstream in
//   PR #1499).
// - Allocate (upstream plugin/server.go), run when a pod
//   with hami.io/bind-phase=allocating is bound to the node, as kubelet
//   would call it: the pending pod found through the node lock
//   hami.io/mutex.lock = "<RFC3339>,<ns>,<name>" (or, without one, upstream's
//   fallback list); hami.io/vgpu-devices-to-allocate decoded as
//   DecodePodDevices does; per container asking for nvidia.com/gpu the next
//   non-empty entry popped, its device count matched against the request and
//   every UUID checked against the registered GPUs; the emptied annotation
//   patched back (slots kept: ";" for one container); the pod read again and,
//   with no "NVIDIA" left in it, bind-phase=success; then the node lock
//   released as nodelock.ReleaseNodeLock does (only if the lock names this
//   pod; a merge patch deleting it with the node's resourceVersion as
//   precondition, 5 tries backing off from 100 ms). Any failure:
//   bind-phase=failed and the lock released (PodAllocationFailed).
//
//   UpstreamDevicePlugin plugin(&client, "node-upstream",
//                               {{"GPU-…", "Tesla V100-PCIE-32GB", 32768, 0, 0}});
//   ASSERT_EQ(plugin.start(), "");                 // registers, then serves
//   auto a = plugin.allocation("ns", "pod");       // what it decoded, once done
//
// Uses our k8s::Client only as the transport (upstream uses client-go).

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "k8s/client.hpp"

namespace hami::test {

struct UpstreamGpu {
  std::string uuid;
  std::string nvml_name;  // as NVML names it: "Tesla V100-PCIE-32GB"
  int mib = 0;            // total memory (deviceMemoryScaling 1)
  unsigned index = 0;     // NVML index
  int numa = 0;
};

struct UpstreamOptions {
  int split_count = 10;  // deviceSplitCount, the chart's default
  int core_scaling = 1;  // devcore = 100 × deviceCoreScaling
  // Releases before v2.10 tagged DeviceInfo.DevicePairScore (a struct)
  // `json:"devicepairscore,omitempty"`: Go never omits a struct, so each
  // device carried "devicepairscore":{}. v2.10 tags it `json:"-"`.
  bool pair_score_field = false;
};

// One device of hami.io/vgpu-devices-to-allocate, as upstream's
// DecodeContainerDevices reads it (UUID,Type,Usedmem,Usedcores).
struct UpstreamDevice {
  std::string uuid;
  std::string type;
  int mem_mib = 0;
  int cores = 0;
};

// What one Allocate did for one pod.
struct UpstreamAllocation {
  std::string ns, name, uid;
  std::string to_allocate;  // the annotation as read
  // Per container slot of the annotation (init containers first), as decoded.
  std::vector<std::vector<UpstreamDevice>> slots;
  // The containers' requests served, in order: name → devices popped.
  std::vector<std::pair<std::string, std::vector<UpstreamDevice>>> served;
  std::string phase;  // what it wrote: "success" or "failed"
  std::string error;  // why it failed; empty on success
};

class UpstreamDevicePlugin {
 public:
  UpstreamDevicePlugin(k8s::Client* client, std::string node, std::vector<UpstreamGpu> gpus,
                       UpstreamOptions options = {});
  ~UpstreamDevicePlugin();  // stops serving; leaves the node as it is
  UpstreamDevicePlugin(const UpstreamDevicePlugin&) = delete;
  UpstreamDevicePlugin& operator=(const UpstreamDevicePlugin&) = delete;

  // Registers the GPUs on the node, then serves Allocate in the background.
  // Returns "" or why the registration failed.
  std::string start();

  // The registration annotation's value (upstream's MarshalNodeDevices).
  std::string register_annotation() const;

  std::optional<UpstreamAllocation> allocation(const std::string& ns,
                                               const std::string& name) const;

 private:
  void run(std::stop_token st);
  void allocate(const nlohmann::json& trigger);
  std::optional<nlohmann::json> pending_pod(std::string* why);
  void finish(UpstreamAllocation a, bool ok);
  void release_node_lock(const std::string& ns, const std::string& name);

  k8s::Client* client_;
  std::string node_;
  std::vector<UpstreamGpu> gpus_;
  UpstreamOptions options_;
  mutable std::mutex mu_;
  std::set<std::string> seen_;                      // pod UIDs kubelet admitted
  std::map<std::string, UpstreamAllocation> done_;  // "ns/name" → what happened
  std::jthread thread_;
};

}  // namespace hami::test
