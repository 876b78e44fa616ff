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

Result<std::vector<ContainerPlan>> Allocator::serve(
    PendingPod& p, const std::vector<std::vector<std::string>>& requests) {
  const std::vector<Gpu> gpus = gpus_();
  std::vector<ContainerPlan> plans;
  std::string served;
  for (const auto& ids : requests) {
    const int k = nth_pending_container(p.to_allocate, 0);
    if (k < 0) return Error{"no container left with GPUs to allocate"};
    ContainerDevices& devs = p.to_allocate[static_cast<size_t>(k)];
    auto plan = plan_one(p.pod, static_cast<size_t>(k), p.to_allocate.size(), devs, gpus);
    if (!plan) return plan.error();
    // kubelet counts slots per virtual ID; the scheduler's choice of physical
    // GPU is what was accounted cluster-wide, so it is the one honoured.
    std::set<std::string> asked;
    for (const auto& id : ids)
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
    devs.clear();
    plans.push_back(std::move(*plan));
  }
  const bool done = !any_devices(p.to_allocate);
  // It was decoded from the annotation, so it encodes; checked all the same.
  auto remaining = encode_pod_devices(p.to_allocate);
  if (!remaining)
    return Error{"cannot encode what is left to allocate: " + remaining.error().message};
  std::map<std::string, std::optional<std::string>> changes{{kDevicesToAllocate, *remaining}};
  if (done) changes[kBindPhase] = std::string(kPhaseSuccess);
  auto patched = client_.patch_annotations(k8s::pod_path(p.pod.meta.ns, p.pod.meta.name), changes,
                                           k8s::PatchRetry{});
  if (!patched) return Error{"cannot record the allocation on the pod: " + patched.error().message};
  log::info("allocated pod %s: %s%s", who(p.pod).c_str(), served.c_str(),
            done ? "; all containers served" : "");
  if (done) release_lock(p.pod.meta.ns, p.pod.meta.name);
  return plans;
}

Result<ContainerPlan> Allocator::plan_one(const k8s::Pod& pod, size_t entry, size_t n_entries,
                                          const ContainerDevices& devices,
                                          const std::vector<Gpu>& gpus) {
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
    chosen.emplace_back(g->index, AllocatedGpu{d.uuid, d.mem_mib, d.cores, g->mode});
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
