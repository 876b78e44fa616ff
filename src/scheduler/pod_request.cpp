#include "scheduler/pod_request.hpp"

namespace hami::scheduler {
namespace {

std::optional<std::string_view> lookup(const k8s::StringMap& m, std::string_view name) {
  auto it = m.find(std::string(name));
  if (it == m.end()) return std::nullopt;
  return std::string_view(it->second);
}

}  // namespace

Result<SchedulingRequest> pod_request(const k8s::Pod& pod, const SchedulerConfig& config) {
  fit::PodRequest request;
  SchedulingRequest out;
  auto add = [&](const k8s::Container& c, fit::ContainerKind kind) -> Result<void> {
    auto limits = [&](std::string_view n) { return lookup(c.limits, n); };
    auto requests = [&](std::string_view n) { return lookup(c.requests, n); };
    auto r = fit::container_request(limits, requests, config.resources);
    if (!r) return Error{"container '" + c.name + "': " + r.error().message};
    fit::ContainerRequest cr;
    if (*r) cr = **r;
    cr.kind = kind;
    request.containers.push_back(cr);
    out.kinds.push_back(kind);
    return {};
  };
  for (const auto& c : pod.init_containers) {
    if (auto r = add(c, fit::ContainerKind::kInit); !r) return r.error();
  }
  for (const auto& c : pod.containers) {
    if (auto r = add(c, fit::ContainerKind::kApp); !r) return r.error();
  }
  bool any = false;
  std::vector<bool> uses_gpu;
  for (const auto& c : request.containers) {
    any |= c.nums > 0;
    uses_gpu.push_back(c.nums > 0);
  }
  if (!any) return out;
  auto options = fit::parse_pod_options(
      [&](std::string_view key) { return lookup(pod.meta.annotations, key); }, config.policy);
  if (!options) return options.error();
  out.user = options->user = pod_user(pod, uses_gpu);
  auto prepared = fit::PreparedPod::make(std::move(request), std::move(*options));
  if (!prepared) return prepared.error();
  out.prepared = std::move(*prepared);
  return out;
}

int64_t pod_user(const k8s::Pod& pod, const std::vector<bool>& uses_gpu) {
  size_t at = 0;
  for (const auto* list : {&pod.init_containers, &pod.containers}) {
    for (const k8s::Container& c : *list) {
      const bool gpu = at < uses_gpu.size() && uses_gpu[at];
      ++at;
      if (gpu && c.run_as_user) return *c.run_as_user;
    }
  }
  return pod.run_as_user.value_or(fit::kUserUndeclared);
}

bool requests_our_resources(const k8s::Pod& pod, const SchedulerConfig& config) {
  const auto& r = config.resources;
  auto has = [&](const k8s::Container& c) {
    for (const std::string* n :
         {&r.count_name, &r.memory_name, &r.memory_percentage_name, &r.cores_name}) {
      if (c.limits.count(*n) || c.requests.count(*n)) return true;
    }
    return false;
  };
  for (const auto& c : pod.init_containers) {
    if (has(c)) return true;
  }
  for (const auto& c : pod.containers) {
    if (has(c)) return true;
  }
  return false;
}

}  // namespace hami::scheduler
