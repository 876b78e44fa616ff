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
    return Error{"GPU_CORE_UTILIZATION_POLICY '" + in.core_policy.substr(0, 64) +
                 "' is not force, default or disable"};

  ContainerPlan p;
  p.vgpu_dir = join(in.hook_path, "vgpu");
  p.library = join(p.vgpu_dir, "libvgpu.so");
  p.preload_file = join(p.vgpu_dir, "ld.so.preload");
  const std::string key = in.pod_uid + "_" + in.container;
  p.container_dir = join(join(p.vgpu_dir, "containers"), key);
  p.limits_file = join(join(p.vgpu_dir, "limits"), key);
  p.control_file = join(join(p.vgpu_dir, "control"), key);
  p.lock_dir = in.lock_dir;

  std::vector<std::string> uuids;
  std::string visible;
  std::vector<std::pair<std::string, std::string>> limits;
  for (size_t i = 0; i < in.gpus.size(); ++i) {
    const AllocatedGpu& g = in.gpus[i];
    if (std::find(uuids.begin(), uuids.end(), g.uuid) == uuids.end()) {
      uuids.push_back(g.uuid);
      visible += (visible.empty() ? "" : ",") + g.uuid;
    }
    limits.emplace_back("CUDA_DEVICE_MEMORY_LIMIT_" + std::to_string(i),
                        std::to_string(g.mem_mib) + "m");
  }
  // Upstream hands the first GPU's share to every GPU of the container; the
  // library reads anything above 100 as "no cap", so say 100 plainly. Under
  // MPS the server divides the SMs and the library's pacing stays off.
  if (!mps) {
    limits.emplace_back("CUDA_DEVICE_SM_LIMIT",
                        std::to_string(std::clamp(in.gpus[0].cores, 0, 100)));
  }
  if (in.priority) limits.emplace_back("CUDA_TASK_PRIORITY", std::to_string(*in.priority));
  // The node's --disable-core-limit overrides what the pod asked for.
  if (cfg.disable_core_limit) {
    limits.emplace_back("GPU_CORE_UTILIZATION_POLICY", "disable");
  } else if (!policy.empty()) {
    limits.emplace_back("GPU_CORE_UTILIZATION_POLICY", policy);
  }

  p.envs["NVIDIA_VISIBLE_DEVICES"] = visible;
  for (const auto& [k, v] : limits)
    p.envs[k] = v;
  const std::string state_file = join(p.vgpu_dir, in.cache_name);
  p.envs["CUDA_DEVICE_MEMORY_SHARED_CACHE"] = state_file;
  if (cfg.device_memory_scaling > 1) p.envs["CUDA_OVERSUBSCRIBE"] = "true";
  if (cfg.lib_cuda_log_level) p.envs["LIBCUDA_LOG_LEVEL"] = std::to_string(*cfg.lib_cuda_log_level);
  int mps_threads = 100;  // an MPS client's thread cap; 100: none
  if (mps) {
    const AllocatedGpu& g = in.gpus[0];
    p.mps_pipe_dir = mps::mps_pipe_dir(p.vgpu_dir, g.uuid).string();
    p.envs["CUDA_MPS_PIPE_DIRECTORY"] = kContainerMpsPipeDir;
    // 0 (not given) and 100 both mean the whole GPU: no variable. Neither
    // for a high-priority container (nvidia.com/priority: 0, a latency-bound
    // service): the others are capped at their shares, which fitting keeps
    // within 100 minus its share, so that share of the SMs is always free for
    // it, and it may use SMs the others leave idle (docs/sharing-modes.md).
    const bool high_priority = in.priority && *in.priority == 0;
    if (g.cores > 0 && g.cores < 100 && !high_priority) mps_threads = g.cores;
    if (mps_threads < 100)
      p.envs["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = std::to_string(mps_threads);
    // The container sees its one GPU as device 0. The library's limit stays
    // the hard one on every path; this one makes the server refuse too.
    if (g.mem_mib > 0)
      p.envs["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = "0=" + std::to_string(g.mem_mib) + "M";
  }

  p.limits_text = "# written by hami-device-plugin for pod " + in.pod_uid + ", container " +
                  in.container + "\n";
  for (const auto& [k, v] : limits)
    p.limits_text += k + "=" + v + "\n";
  // What the library and the node agent must not take from the writable state
  // file: which file it is, and which GPUs its device indices are.
  p.limits_text += "CUDA_DEVICE_MEMORY_SHARED_CACHE=" + state_file + "\n";
  for (size_t i = 0; i < in.gpus.size(); ++i)
    p.limits_text += "VGPU_DEVICE_UUID_" + std::to_string(i) + "=" + in.gpus[i].uuid + "\n";
  // The container is an MPS client: the node agent and `vgpu top` show this
  // as its share (100: no cap), whether or not the variable was set.
  if (mps)
    p.limits_text += "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=" + std::to_string(mps_threads) + "\n";

  p.mounts.push_back({p.library, p.library, true});
  p.mounts.push_back({p.vgpu_dir, p.container_dir, false});
  p.mounts.push_back({kContainerLockDir, in.lock_dir, false});
  if (!in.disable_control) p.mounts.push_back({"/etc/ld.so.preload", p.preload_file, true});
  p.mounts.push_back({kContainerLimitsFile, p.limits_file, true});
  p.mounts.push_back({kContainerControlFile, p.control_file, true});
  // Read-write: clients connect to the server's sockets and pipes there.
  if (mps) p.mounts.push_back({kContainerMpsPipeDir, p.mps_pipe_dir, false});
  return p;
}

}  // namespace hami::deviceplugin
