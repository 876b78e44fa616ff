#include "deviceplugin/container_plan.hpp"

#include <algorithm>
#include <cctype>

#include "mps/paths.hpp"

namespace hami::deviceplugin {
namespace {

// Pod UIDs and container names become host path components.
bool safe_component(const std::string& s) {
  if (s.empty() || s.size() > 253 || s[0] == '.') return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
  });
}

std::string join(const std::string& dir, const std::string& name) {
  if (!dir.empty() && dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

}  // namespace

std::string limits_comment(const std::string& pod_uid, const std::string& container) {
  return "written by hami-device-plugin for pod " + pod_uid + ", container " + container;
}

Result<std::string> limits_file_path(const std::string& hook_path, const std::string& pod_uid,
                                     const std::string& container) {
  if (!safe_component(pod_uid))
    return Error{"pod UID '" + pod_uid + "' cannot name a host directory"};
  if (!safe_component(container))
    return Error{"container name '" + container + "' cannot name a host directory"};
  const std::string dir =
      join(join(join(hook_path, "vgpu"), protocol::kHostLimitsDir), pod_uid + "_" + container);
  return join(dir, protocol::kLimitsFileName);
}

Result<ContainerPlan> plan_container(const PlanInput& in, const PluginConfig& cfg) {
  if (in.hook_path.empty() || in.hook_path[0] != '/')
    return Error{"hook path '" + in.hook_path + "' is not an absolute path"};
  if (!safe_component(in.pod_uid))
    return Error{"pod UID '" + in.pod_uid + "' cannot name a host directory"};
  if (!safe_component(in.container))
    return Error{"container name '" + in.container + "' cannot name a host directory"};
  if (in.gpus.empty()) return Error{"container " + in.container + " has no GPUs to allocate"};
  if (in.gpus.size() > 16)
    return Error{"container " + in.container + " is given " + std::to_string(in.gpus.size()) +
                 " GPUs; the library handles at most 16"};
  if (in.priority && *in.priority != 0 && *in.priority != 1)
    return Error{"priority " + std::to_string(*in.priority) + " is not 0 (high) or 1 (low)"};
  const bool mps = std::any_of(in.gpus.begin(), in.gpus.end(),
                               [](const AllocatedGpu& g) { return g.mode == SharingMode::kMps; });
  if (mps && in.gpus.size() > 1) {
    return Error{"container " + in.container + " is given " + std::to_string(in.gpus.size()) +
                 " GPUs, one of them in mps mode; an MPS client reaches one GPU's MPS server, "
                 "so a container on an MPS GPU gets exactly one GPU"};
  }
  // The UUID becomes a host path component.
  if (mps && !safe_component(in.gpus[0].uuid))
    return Error{"GPU UUID '" + in.gpus[0].uuid + "' cannot name a host directory"};
  // Only the three words go into the limits file: anything else could carry
  // a newline and a limit of the tenant's choosing.
  std::string policy;
  for (char ch : in.core_policy)
    policy += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (!policy.empty() && policy != "force" && policy != "default" && policy != "disable")
    return Error{std::string(protocol::kEnvCorePolicy) + " '" + in.core_policy.substr(0, 64) +
                 "' is not force, default or disable"};

  ContainerPlan p;
  p.vgpu_dir = join(in.hook_path, "vgpu");
  p.library = join(p.vgpu_dir, "libvgpu.so");
  p.preload_file = join(p.vgpu_dir, "ld.so.preload");
  const std::string key = in.pod_uid + "_" + in.container;
  p.container_dir = join(join(p.vgpu_dir, protocol::kHostContainersDir), key);
  p.limits_dir = join(join(p.vgpu_dir, protocol::kHostLimitsDir), key);
  p.limits_file = join(p.limits_dir, protocol::kLimitsFileName);
  p.control_file = join(join(p.vgpu_dir, protocol::kHostControlDir), key);
  p.lock_dir = in.lock_dir;

  protocol::ContainerSpec spec;
  std::string visible;
  std::vector<std::string> uuids;
  for (const AllocatedGpu& g : in.gpus) {
    if (std::find(uuids.begin(), uuids.end(), g.uuid) == uuids.end()) {
      uuids.push_back(g.uuid);
      visible += (visible.empty() ? "" : ",") + g.uuid;
    }
    spec.gpus.push_back({g.uuid, static_cast<uint64_t>(std::max(g.mem_mib, 0)) << 20, g.cores});
  }
  spec.mode = mps ? SharingMode::kMps : SharingMode::kTimeslice;
  spec.priority = in.priority;
  // The node's --disable-core-limit overrides what the pod asked for.
  if (cfg.disable_core_limit) {
    spec.policy = protocol::CorePolicy::kDisable;
  } else if (!policy.empty()) {
    spec.policy = protocol::parse_core_policy(policy);
  }
  const std::string state_file = join(p.vgpu_dir, in.cache_name);
  spec.state_file = state_file;
  spec.comment = limits_comment(in.pod_uid, in.container);
  const protocol::Rendered contract = protocol::render_contract(spec);
  p.limits_text = contract.limits_text;

  p.envs[protocol::kEnvNvidiaVisible] = visible;
  for (const auto& [k, v] : contract.env)
    p.envs[k] = v;
  p.envs[protocol::kEnvStateFile] = state_file;
  if (cfg.device_memory_scaling > 1) p.envs[protocol::kEnvOversubscribe] = "true";
  if (cfg.lib_cuda_log_level)
    p.envs[protocol::kEnvLogLevel] = std::to_string(*cfg.lib_cuda_log_level);
  if (mps) {
    const AllocatedGpu& g = in.gpus[0];
    p.mps_pipe_dir = mps::mps_pipe_dir(p.vgpu_dir, g.uuid).string();
    p.envs[protocol::kEnvMpsPipeDir] = protocol::kContainerMpsPipeDir;
    if (contract.mps_threads)
      p.envs[protocol::kEnvMpsThreads] = std::to_string(*contract.mps_threads);
    // The container sees its one GPU as device 0. The library's limit stays
    // the hard one on every path; this one makes the server refuse too.
    if (g.mem_mib > 0)
      p.envs[protocol::kEnvMpsPinnedMemory] = "0=" + std::to_string(g.mem_mib) + "M";
  }

  p.mounts.push_back({p.library, p.library, true});
  p.mounts.push_back({p.vgpu_dir, p.container_dir, false});
  p.mounts.push_back({protocol::kContainerLockDir, in.lock_dir, false});
  if (!in.disable_control)
    p.mounts.push_back({protocol::kContainerPreloadFile, p.preload_file, true});
  // The directory, not the file: a resize replaces the file by rename.
  p.mounts.push_back({protocol::kContainerLimitsDir, p.limits_dir, true});
  p.mounts.push_back({protocol::kContainerControlFile, p.control_file, true});
  // Read-write: clients connect to the server's sockets and pipes there.
  if (mps) p.mounts.push_back({protocol::kContainerMpsPipeDir, p.mps_pipe_dir, false});
  return p;
}

}  // namespace hami::deviceplugin
