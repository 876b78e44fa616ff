#include "deviceplugin/allocator.hpp"

#include <algorithm>
#include <cstdio>
#include <random>
#include <set>

#include "common/log.hpp"
#include "deviceplugin/host_files.hpp"
#include "deviceplugin/pod_match.hpp"
#include "fit/resources.hpp"
#include "k8s/paths.hpp"
#include "protocol/annotations.hpp"
#include "protocol/container_contract.hpp"
#include "protocol/mig_allocations.hpp"

namespace hami::deviceplugin {

using protocol::kBindPhase;
using protocol::kDevicesToAllocate;
using protocol::kNodeLock;
using protocol::kPhaseFailed;
using protocol::kPhaseSuccess;
using protocol::parse_node_lock;
namespace {

// The state file's name; random like upstream's, so a restarted container
// never picks up the previous instance's file by name.
std::string random_uuid() {
  std::random_device rd;
  unsigned char b[16];
  for (int i = 0; i < 16; i += 4) {
    const uint32_t r = rd();
    for (int j = 0; j < 4; ++j)
      b[i + j] = static_cast<unsigned char>(r >> (8 * j));
  }
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);
  char out[37];
  std::snprintf(out, sizeof out,
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                b[15]);
  return out;
}

std::string who(const k8s::Pod& pod) {
  return pod.meta.ns + "/" + pod.meta.name;
}

}  // namespace

Allocator::Allocator(k8s::Client& client, const PluginConfig& cfg, AllocatorOptions options,
                     std::function<std::vector<Gpu>()> gpus)
    : client_(client), cfg_(cfg), options_(std::move(options)), gpus_(std::move(gpus)) {}

Result<std::vector<ContainerPlan>> Allocator::allocate(
    const std::vector<std::vector<std::string>>& requests) {
  std::lock_guard lk(mu_);
  std::vector<size_t> sizes;
  std::vector<std::vector<std::string>> asked;
  for (const auto& r : requests) {
    sizes.push_back(r.size());
    auto& gpus = asked.emplace_back();
    for (const auto& id : r)
      gpus.push_back(physical_uuid(id));
  }
  PodLookup look = match_pending_pod(client_, options_.node, sizes, asked, options_.pending);
  if (!look.pod) {
    if (look.refused) {
      mark_failed(*look.refused, look.error);
      release_lock(look.refused->meta.ns, look.refused->meta.name);
    }
    if (look.stale_lock) {
      log::warn("releasing the node lock of pod %s/%s, which does not exist",
                look.stale_lock->ns.c_str(), look.stale_lock->name.c_str());
      release_lock(look.stale_lock->ns, look.stale_lock->name);
    }
    log::error("Allocate failed: %s", look.error.c_str());
    return Error{look.error};
  }
  PendingPod& p = *look.pod;
  auto plans = serve(p, requests);
  if (!plans) {
    const std::string msg = "pod " + who(p.pod) + ": " + plans.error().message;
    log::error("Allocate failed: %s", msg.c_str());
    mark_failed(p.pod, msg);
    release_lock(p.pod.meta.ns, p.pod.meta.name);
    return Error{msg};
  }
  return plans;
}

namespace {

// This call's entries of hami.io/vgpu-mig-allocations (`all`, decoded), checked
// against the devices the scheduler gave its containers: one entry for each
// device on a GPU in dynamic MIG mode, none for any other device.
Result<std::vector<protocol::MigAllocation>> mig_entries_of(
    const PodDevices& to_allocate, const std::vector<size_t>& entries,
    const std::vector<protocol::MigAllocation>& all, bool have_annotation,
    const std::vector<Gpu>& gpus) {
  std::vector<protocol::MigAllocation> out;
  auto dynamic = [&](const std::string& uuid) {
    return std::any_of(gpus.begin(), gpus.end(),
                       [&](const Gpu& g) { return g.uuid == uuid && g.dynamic_mig; });
  };
  for (size_t k : entries) {
    const ContainerDevices& devs = to_allocate[k];
    for (const protocol::MigAllocation& a : all) {
      if (a.container_index != static_cast<int>(k)) continue;
      const auto j = static_cast<size_t>(a.device_index);
      if (j >= devs.size() || devs[j].uuid != a.gpu_uuid || !dynamic(a.gpu_uuid)) {
        return Error{std::string(protocol::kMigAllocations) + " reserves a " + a.profile + " on " +
                     a.gpu_uuid + " for device " + std::to_string(a.device_index) +
                     " of container entry " + std::to_string(k) +
                     ", which the scheduler did not give that device, or which is not a GPU "
                     "in dynamic MIG mode on this node"};
      }
    }
    for (size_t j = 0; j < devs.size(); ++j) {
      if (!dynamic(devs[j].uuid)) continue;
      auto e = std::find_if(all.begin(), all.end(), [&](const protocol::MigAllocation& a) {
        return a.container_index == static_cast<int>(k) && a.device_index == static_cast<int>(j);
      });
      if (e == all.end()) {
        return Error{
            "GPU " + devs[j].uuid + " (device " + std::to_string(j) + " of container entry " +
            std::to_string(k) + ") is in dynamic MIG mode, but " +
            (have_annotation
                 ? std::string(protocol::kMigAllocations) + " reserves no MIG device for it"
                 : std::string("the pod has no ") + protocol::kMigAllocations) +
            ": was it placed by a scheduler without dynamic MIG?"};
      }
      out.push_back(*e);
    }
  }
  return out;
}

}  // namespace

Result<std::vector<ContainerPlan>> Allocator::serve(
    PendingPod& p, const std::vector<std::vector<std::string>>& requests) {
  const std::vector<Gpu> gpus = gpus_();
  // kubelet's requests in order, one pending container entry each.
  std::vector<size_t> entries;
  for (size_t j = 0; j < requests.size(); ++j) {
    const int k = nth_pending_container(p.to_allocate, j);
    if (k < 0) return Error{"no container left with GPUs to allocate"};
    entries.push_back(static_cast<size_t>(k));
  }
  std::vector<protocol::MigAllocation> all_mig;
  const auto an = p.pod.meta.annotations.find(protocol::kMigAllocations);
  if (an != p.pod.meta.annotations.end()) {
    auto decoded = protocol::decode_mig_allocations(an->second);
    if (!decoded) {
      return Error{std::string(protocol::kMigAllocations) +
                   " cannot be read: " + decoded.error().message};
    }
    all_mig = std::move(*decoded);
  }
  auto wanted =
      mig_entries_of(p.to_allocate, entries, all_mig, an != p.pod.meta.annotations.end(), gpus);
  if (!wanted) return wanted.error();
  if (wanted->empty()) return finish(p, requests, entries, gpus, all_mig, {});
  if (options_.mig == nullptr) {
    return Error{"the pod's MIG devices cannot be made: dynamic MIG is not running on node " +
                 options_.node + " (see the plugin's log at start)"};
  }
  std::vector<ContainerPlan> plans;
  auto made = options_.mig->realise(
      std::move(*wanted),
      [&](const std::vector<protocol::MigAllocation>& realised) -> Result<void> {
        auto r = finish(p, requests, entries, gpus, all_mig, realised);
        if (!r) return r.error();
        plans = std::move(*r);
        return {};
      });
  if (!made) return made.error();
  return plans;
}

Result<std::vector<ContainerPlan>> Allocator::finish(
    PendingPod& p, const std::vector<std::vector<std::string>>& requests,
    const std::vector<size_t>& entries, const std::vector<Gpu>& gpus,
    const std::vector<protocol::MigAllocation>& all_mig,
    const std::vector<protocol::MigAllocation>& made) {
  std::vector<ContainerPlan> plans;
  std::string served;
  PodDevices left = p.to_allocate;
  for (size_t j = 0; j < requests.size(); ++j) {
    const size_t k = entries[j];
    const ContainerDevices& devs = p.to_allocate[k];
    auto plan = plan_one(p.pod, k, p.to_allocate.size(), devs, gpus, made);
    if (!plan) return plan.error();
    // kubelet counts slots per virtual ID; the scheduler's choice of physical
    // GPU is what was accounted cluster-wide, so it is the one honoured.
    std::set<std::string> asked;
    for (const auto& id : requests[j])
      asked.insert(physical_uuid(id));
    std::set<std::string> given;
    for (const auto& d : devs)
      given.insert(d.uuid);
    if (asked != given) {
      log::warn(
          "pod %s: kubelet chose IDs on other GPUs than the scheduler; using the "
          "scheduler's (%s)",
          who(p.pod).c_str(), plan->envs[protocol::kEnvNvidiaVisible].c_str());
    }
    if (auto r = prepare_host(*plan); !r) return r.error();
    served += (served.empty() ? "" : "; ") + plan->container_dir + " GPUs " +
              plan->envs[protocol::kEnvNvidiaVisible];
    left[k].clear();
    plans.push_back(std::move(*plan));
  }
  const bool done = !any_devices(left);
  // It was decoded from the annotation, so it encodes; checked all the same.
  auto remaining = encode_pod_devices(left);
  if (!remaining)
    return Error{"cannot encode what is left to allocate: " + remaining.error().message};
  std::map<std::string, std::optional<std::string>> changes{{kDevicesToAllocate, *remaining}};
  if (done) changes[kBindPhase] = std::string(kPhaseSuccess);
  if (!made.empty()) {
    // The scheduler's entries with this call's MIG devices filled in; the
    // others stay as they were (another container's, made or not yet).
    std::vector<protocol::MigAllocation> recorded = all_mig;
    for (protocol::MigAllocation& a : recorded) {
      for (const protocol::MigAllocation& m : made) {
        if (m.container_index == a.container_index && m.device_index == a.device_index) a = m;
      }
    }
    changes[protocol::kMigAllocations] = protocol::encode_mig_allocations(recorded);
    for (const protocol::MigAllocation& m : made) {
      served += "; " + m.profile + " at slice " + std::to_string(m.placement.start) + " of " +
                m.gpu_uuid + " is " + m.mig_uuid + " (GPU instance " +
                std::to_string(m.gpu_instance_id.value_or(0)) + ")";
    }
  }
  auto patched = client_.merge_patch(k8s::pod_path(p.pod.meta.ns, p.pod.meta.name),
                                     commit_patch(p.pod.meta.uid, changes, done));
  if (!patched) return Error{"cannot record the allocation on the pod: " + patched.error().message};
  p.to_allocate = std::move(left);
  log::info("allocated pod %s: %s%s", who(p.pod).c_str(), served.c_str(),
            done ? "; all containers served" : "");
  if (done) release_lock(p.pod.meta.ns, p.pod.meta.name);
  return plans;
}

Result<ContainerPlan> Allocator::plan_one(const k8s::Pod& pod, size_t entry, size_t n_entries,
                                          const ContainerDevices& devices,
                                          const std::vector<Gpu>& gpus,
                                          const std::vector<protocol::MigAllocation>& made) {
  size_t n_init = pod.init_containers.size();
  // Some upstream schedulers (v2.10, HAMi#2899) leave out the init
  // containers' empty slots; then the entries are the app containers alone.
  if (n_init > 0 && n_entries == pod.containers.size()) n_init = 0;
  if (entry >= n_init + pod.containers.size()) {
    return Error{std::string(kDevicesToAllocate) + " has an entry for container #" +
                 std::to_string(entry) + " but the pod has " + std::to_string(n_init) +
                 " init and " + std::to_string(pod.containers.size()) + " app containers"};
  }
  const k8s::Container& c =
      entry < n_init ? pod.init_containers[entry] : pod.containers[entry - n_init];
  std::vector<std::pair<int, AllocatedGpu>> chosen;
  for (const ContainerDevice& d : devices) {
    auto g = std::find_if(gpus.begin(), gpus.end(), [&](const Gpu& x) { return x.uuid == d.uuid; });
    if (g == gpus.end()) {
      return Error{"container " + c.name + ": GPU " + d.uuid +
                   " assigned by the scheduler is not on node " + options_.node};
    }
    if (!g->healthy) {
      return Error{"container " + c.name + ": GPU " + d.uuid +
                   " is unhealthy: " + g->unhealthy_reason};
    }
    if (!g->dynamic_mig) {
      chosen.emplace_back(g->index, AllocatedGpu{d.uuid, d.mem_mib, d.cores, g->mode});
      continue;
    }
    // The MIG device made for it (mig_entries_of checked there is one). As
    // on a static MIG device, the library's limit is the request, or the
    // whole MIG device.
    const int j = static_cast<int>(&d - devices.data());
    auto m = std::find_if(made.begin(), made.end(), [&](const protocol::MigAllocation& a) {
      return a.container_index == static_cast<int>(entry) && a.device_index == j;
    });
    if (m == made.end() || !m->realised()) {
      return Error{"container " + c.name + ": no MIG device was made on GPU " + d.uuid};
    }
    int32_t mem = d.mem_mib;
    if (mem <= 0) {
      for (const protocol::MigProfileInfo& prof : g->dynamic_mig->profiles)
        if (prof.name == m->profile) mem = prof.memory;
    }
    chosen.emplace_back(g->index, AllocatedGpu{m->mig_uuid, mem, d.cores, SharingMode::kTimeslice});
  }
  // The limits are indexed the way NVML inside the container lists the GPUs:
  // by host NVML order, whatever order the scheduler wrote them in.
  std::stable_sort(chosen.begin(), chosen.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  PlanInput in;
  in.hook_path = options_.hook_path;
  in.lock_dir = options_.lock_dir;
  in.pod_uid = pod.meta.uid;
  in.container = c.name;
  for (auto& [idx, g] : chosen)
    in.gpus.push_back(g);
  for (const k8s::EnvVar& e : c.env) {
    if (e.name == protocol::kEnvDisableControl && e.value == "true") in.disable_control = true;
    if (e.name == protocol::kEnvCorePolicy && e.value) in.core_policy = *e.value;
  }
  auto lookup = [](const k8s::StringMap& m) {
    return [&m](std::string_view n) -> std::optional<std::string_view> {
      auto it = m.find(std::string(n));
      if (it == m.end()) return std::nullopt;
      return std::string_view(it->second);
    };
  };
  auto limits = lookup(c.limits);
  auto requests = lookup(c.requests);
  auto prio = fit::task_priority(limits, requests, cfg_.resource_priority_name);
  if (!prio) return Error{"container " + c.name + ": " + prio.error().message};
  in.priority = *prio;
  in.cache_name = random_uuid() + ".cache";
  auto plan = plan_container(in, cfg_);
  if (!plan) return Error{"container " + c.name + ": " + plan.error().message};
  return plan;
}

nlohmann::json Allocator::commit_patch(
    const std::string& uid, const std::map<std::string, std::optional<std::string>>& changes,
    bool done) const {
  nlohmann::json patch = k8s::annotations_patch(changes);
  nlohmann::json& meta = patch["metadata"];
  // The API server refuses a patch that changes the UID (immutable), so a
  // pod deleted and made again under the same name is never written to,
  // without a read first.
  if (!uid.empty()) meta["uid"] = uid;
  // Upstream's scheduler sets the label just after the binding; on nodes we
  // serve (match-pods/v1) ours leaves it to this patch, one pod write fewer
  // per GPU pod (docs/scheduler-protocol.md).
  if (done) meta["labels"] = {{protocol::kAssignedNode, options_.node}};
  return patch;
}

void Allocator::mark_failed(const k8s::Pod& pod, const std::string& why) {
  auto r = client_.patch_annotations(k8s::pod_path(pod.meta.ns, pod.meta.name),
                                     {{kBindPhase, std::string(kPhaseFailed)}});
  if (!r) {
    log::error("cannot mark pod %s %s=%s (%s): %s", who(pod).c_str(), kBindPhase, kPhaseFailed,
               why.c_str(), r.error().message.c_str());
  }
}

void Allocator::release_lock(const std::string& ns, const std::string& name) {
  auto r = client_.read_modify_patch(
      k8s::node_path(options_.node),
      [&](const nlohmann::json& node) -> k8s::Result<std::optional<nlohmann::json>> {
        const auto& md = node.value("metadata", nlohmann::json::object());
        const auto& an = md.value("annotations", nlohmann::json::object());
        auto it = an.find(kNodeLock);
        if (it == an.end() || !it->is_string()) return std::optional<nlohmann::json>();
        auto lock = parse_node_lock(it->get<std::string>());
        // Only our pod's lock (or a legacy one, which names nobody) is ours to
        // release; another pod may hold it by now.
        if (!lock || (lock->names_pod() && !lock->held_by(ns, name)))
          return std::optional<nlohmann::json>();
        return std::optional<nlohmann::json>(
            nlohmann::json{{"metadata", {{"annotations", {{kNodeLock, nullptr}}}}}});
      });
  if (!r) {
    log::error("cannot release the node lock of %s/%s on %s: %s", ns.c_str(), name.c_str(),
               options_.node.c_str(), r.error().message.c_str());
  }
}

std::vector<std::vector<std::string>> Allocator::preferred(
    const std::vector<PreferredRequest>& requests) {
  std::lock_guard lk(mu_);
  std::vector<size_t> sizes;
  for (const auto& r : requests)
    sizes.push_back(r.size);
  PodLookup look = match_pending_pod(client_, options_.node, sizes, {}, options_.pending);
  if (!look.pod)
    log::debug("GetPreferredAllocation without a pod to follow: %s", look.error.c_str());
  std::vector<std::vector<std::string>> out;
  for (size_t j = 0; j < requests.size(); ++j) {
    const PreferredRequest& r = requests[j];
    std::vector<std::string> pick;
    auto take = [&](const std::string& id) {
      if (pick.size() < r.size && std::find(pick.begin(), pick.end(), id) == pick.end())
        pick.push_back(id);
    };
    for (const auto& id : r.must_include)
      take(id);
    if (look.pod) {
      const int k = nth_pending_container(look.pod->to_allocate, j);
      if (k >= 0) {
        // One virtual ID on each GPU the scheduler assigned.
        for (const ContainerDevice& d : look.pod->to_allocate[static_cast<size_t>(k)]) {
          const bool have = std::any_of(pick.begin(), pick.end(), [&](const std::string& id) {
            return physical_uuid(id) == d.uuid;
          });
          if (have) continue;
          for (const auto& id : r.available) {
            if (physical_uuid(id) == d.uuid) {
              take(id);
              break;
            }
          }
        }
      }
    }
    for (const auto& id : r.available)
      take(id);
    out.push_back(std::move(pick));
  }
  return out;
}

}  // namespace hami::deviceplugin
