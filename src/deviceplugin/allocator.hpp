#pragma once
// Allocate and GetPreferredAllocation with upstream's annotation protocol
// (docs/device-plugin.md): find the pod being admitted (pending_pod.hpp: the
// one the node lock names, placed by a scheduler we trust), take its
// next containers' devices from hami.io/vgpu-devices-to-allocate, plan and
// prepare each container (container_plan.hpp, host_files.hpp), write the
// annotation back with those entries emptied and, when none is left, set
// hami.io/bind-phase=success and upstream's hami.io/vgpu-node pod label and
// release the node lock. On any failure once
// the pod is known: bind-phase=failed, the lock released, and an Error whose
// message says what was wrong (kubelet shows it in the pod's events).
// Calls are serialised: kubelet admits one pod at a time anyway, and the
// annotation read-modify-write must not interleave.
//
// A device on a GPU in dynamic MIG mode (docs/mig-dynamic.md) is the MIG
// device hami.io/vgpu-mig-allocations reserves for it: the MIG manager makes
// every one the call's containers need, and the pod's annotations (the MIG
// devices made, what is left to allocate, bind-phase) are written as its
// commit, so a failure anywhere destroys what the call made.
//
//   Allocator a(client, cfg, {.node = "node-1", .hook_path = "/usr/local"},
//               [&] { return state.gpus(); });
//   auto plans = a.allocate({{"GPU-a-0"}});          // one entry per container request
//   if (!plans) return grpc_error(plans.error().message);

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "deviceplugin/config.hpp"
#include "deviceplugin/container_plan.hpp"
#include "deviceplugin/dynamic_mig.hpp"
#include "deviceplugin/gpu.hpp"
#include "deviceplugin/pending_pod.hpp"
#include "k8s/client.hpp"

namespace hami::deviceplugin {

struct AllocatorOptions {
  std::string node;
  std::string hook_path = "/usr/local";
  std::string lock_dir = protocol::kContainerLockDir;
  // Whose decisions are served (--decision-key-file, --trusted-schedulers)
  // and which resource a rival pod asks for (pending_pod.hpp).
  PendingPodPolicy pending;
  // Dynamic MIG's instances; null on a node without GPUs in that mode.
  DynamicMigService* mig = nullptr;
};

struct PreferredRequest {
  std::vector<std::string> available;
  std::vector<std::string> must_include;
  size_t size = 0;
};

class Allocator {
 public:
  Allocator(k8s::Client& client, const PluginConfig& cfg, AllocatorOptions options,
            std::function<std::vector<Gpu>()> gpus);

  Result<std::vector<ContainerPlan>> allocate(
      const std::vector<std::vector<std::string>>& requests);
  // Never fails: without a pod to follow, the must-include IDs and then the
  // first available ones (kubelet's own choice would be no better).
  std::vector<std::vector<std::string>> preferred(const std::vector<PreferredRequest>& requests);

 private:
  Result<std::vector<ContainerPlan>> serve(PendingPod& p,
                                           const std::vector<std::vector<std::string>>& requests);
  // The call's containers once their MIG devices (`made`) exist: planned,
  // prepared on the host and recorded on the pod.
  Result<std::vector<ContainerPlan>> finish(PendingPod& p,
                                            const std::vector<std::vector<std::string>>& requests,
                                            const std::vector<size_t>& entries,
                                            const std::vector<Gpu>& gpus,
                                            const std::vector<protocol::MigAllocation>& all_mig,
                                            const std::vector<protocol::MigAllocation>& made);
  // The merge patch that records a call's allocation on the pod: the
  // annotation `changes`, the pod's UID as a precondition and, once every
  // container is served, upstream's hami.io/vgpu-node label.
  nlohmann::json commit_patch(const std::string& uid,
                              const std::map<std::string, std::optional<std::string>>& changes,
                              bool done) const;
  Result<ContainerPlan> plan_one(const k8s::Pod& pod, size_t entry, size_t n_entries,
                                 const ContainerDevices& devices, const std::vector<Gpu>& gpus,
                                 const std::vector<protocol::MigAllocation>& made);
  void mark_failed(const k8s::Pod& pod, const std::string& why);
  void release_lock(const std::string& ns, const std::string& name);

  k8s::Client& client_;
  const PluginConfig& cfg_;
  AllocatorOptions options_;
  std::function<std::vector<Gpu>()> gpus_;
  std::mutex mu_;
};

}  // namespace hami::deviceplugin
