#include "deviceplugin/limits_follower.hpp"

#include <cerrno>
#include <cstdint>
#include <limits>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/log.hpp"
#include "common/small_file.hpp"
#include "deviceplugin/container_plan.hpp"
#include "deviceplugin/pod_devices.hpp"
#include "k8s/objects.hpp"
#include "protocol/annotations.hpp"
#include "protocol/container_contract.hpp"
#include "protocol/mig_allocations.hpp"

namespace hami::deviceplugin {
namespace {

// 0 is no limit: more than any limit.
uint64_t as_limit(uint64_t bytes) {
  return bytes == 0 ? std::numeric_limits<uint64_t>::max() : bytes;
}

// The limits text for `devices` (the container's new allocation) over what
// the file says now, or why it cannot be.
Result<std::string> resized_text(const protocol::ContainerLimits& old,
                                 const ContainerDevices& devices, const std::string& uid,
                                 const std::string& container) {
  if (old.device_uuids.size() != devices.size())
    return Error{"the allocation names " + std::to_string(devices.size()) +
                 " GPUs and the limits file " + std::to_string(old.device_uuids.size())};
  const bool mps = old.mode() == protocol::SharingMode::kMps;
  protocol::ContainerSpec spec;
  for (size_t i = 0; i < old.device_uuids.size(); ++i) {
    const std::string& uuid = old.device_uuids[i];
    const ContainerDevice* d = nullptr;
    for (const ContainerDevice& x : devices)
      if (x.uuid == uuid) d = &x;
    if (d == nullptr) return Error{"the allocation no longer names GPU " + uuid};
    uint64_t memory = static_cast<uint64_t>(d->mem_mib) << 20;
    // A dynamic MIG device allocated without gpumem was given its profile's
    // memory at Allocate, which the allocation does not say: kept.
    if (memory == 0 && uuid.rfind("MIG-", 0) == 0) memory = old.memory_limit[i];
    if (mps && as_limit(memory) > as_limit(old.memory_limit[i]))
      return Error{"an MPS client's memory can only be lowered while it runs"};
    spec.gpus.push_back({uuid, memory, d->cores});
  }
  spec.mode = mps ? protocol::SharingMode::kMps : protocol::SharingMode::kTimeslice;
  spec.priority = old.priority;
  if (!mps) spec.policy = old.policy;
  spec.state_file = old.state_file;
  spec.comment = limits_comment(uid, container);
  protocol::Rendered r = protocol::render_contract(spec);
  if (mps && r.mps_threads.value_or(100) != static_cast<int>(old.mps_threads.value_or(100)))
    return Error{"an MPS client's thread cap is fixed when it starts"};
  return std::move(r.limits_text);
}

}  // namespace

int LimitsFollower::pod_changed(const nlohmann::json& json) {
  auto parsed = k8s::Pod::from_json(json);
  if (!parsed) return 0;
  const k8s::Pod& pod = *parsed;
  const auto& an = pod.meta.annotations;
  if (pod.node_name != node_ || pod.phase == "Succeeded" || pod.phase == "Failed") return 0;
  auto alloc = an.find(protocol::kDevicesAllocated);
  auto phase = an.find(protocol::kBindPhase);
  // Until Allocate is done the files are its to write.
  if (alloc == an.end() || phase == an.end() || phase->second != protocol::kPhaseSuccess) return 0;
  const std::string who = pod.meta.ns + "/" + pod.meta.name;
  auto devices = decode_pod_devices(alloc->second);
  if (!devices) {
    log::warn("pod %s: %s: %s; its containers' limits stay as they are", who.c_str(),
              protocol::kDevicesAllocated, devices.error().message.c_str());
    return 0;
  }
  // A device on a GPU in dynamic MIG mode is, in the limits file, the MIG
  // device Allocate made for it (docs/mig-dynamic.md).
  if (auto mig = an.find(protocol::kMigAllocations); mig != an.end()) {
    if (auto allocs = protocol::decode_mig_allocations(mig->second)) {
      for (const protocol::MigAllocation& a : *allocs) {
        const auto k = static_cast<size_t>(a.container_index);
        const auto j = static_cast<size_t>(a.device_index);
        if (a.realised() && k < devices->size() && j < (*devices)[k].size() &&
            (*devices)[k][j].uuid == a.gpu_uuid)
          (*devices)[k][j].uuid = a.mig_uuid;
      }
    }
  }
  std::string distrust;  // judged once a file of ours is found
  bool judged = false;
  // Positions as Allocate reads them: init containers first, unless the
  // allocation leaves them out.
  size_t n_init = pod.init_containers.size();
  if (n_init > 0 && devices->size() == pod.containers.size()) n_init = 0;
  int rewritten = 0;
  for (size_t k = 0; k < devices->size() && k < n_init + pod.containers.size(); ++k) {
    if ((*devices)[k].empty()) continue;
    const std::string& name =
        k < n_init ? pod.init_containers[k].name : pod.containers[k - n_init].name;
    auto path = limits_file_path(hook_path_, pod.meta.uid, name);
    if (!path) continue;
    auto text = read_small_file(*path, protocol::kMaxLimitsFileSize);
    if (!text) {
      if (text.error().sys_errno != ENOENT)
        log::warn("pod %s container %s: %s; not resized", who.c_str(), name.c_str(),
                  text.error().message.c_str());
      continue;  // not allocated here
    }
    if (!judged) {
      distrust = protocol::decision_refusal(pod, trust_);
      judged = true;
    }
    if (!distrust.empty()) {
      log::warn("%s; the limits of its containers stay as they are", distrust.c_str());
      return 0;
    }
    const protocol::ContainerLimits old = protocol::parse_limits_file(*text, *path);
    if (old.corrupt || !old.errors.empty()) {
      log::warn("pod %s container %s: %s cannot be read back; not resized", who.c_str(),
                name.c_str(), path->c_str());
      continue;
    }
    auto next = resized_text(old, (*devices)[k], pod.meta.uid, name);
    if (!next) {
      log::warn("pod %s container %s: the resized allocation is not applied: %s", who.c_str(),
                name.c_str(), next.error().message.c_str());
      continue;
    }
    if (*next == *text) continue;
    if (auto w = replace_small_file(*path, *next, 0644); !w) {
      log::error("pod %s container %s: cannot replace its limits file: %s", who.c_str(),
                 name.c_str(), w.error().message.c_str());
      continue;
    }
    log::info("pod %s container %s: limits file replaced for the resize (%s)", who.c_str(),
              name.c_str(), alloc->second.c_str());
    ++rewritten;
  }
  return rewritten;
}

}  // namespace hami::deviceplugin
