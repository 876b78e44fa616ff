#include "cli/resize.hpp"

#include <cstdio>
#include <filesystem>
#include <vector>

#include "cli/inspect.hpp"
#include "cli/run.hpp"
#include "common/bytes.hpp"
#include "common/size_parse.hpp"
#include "common/small_file.hpp"
#include "fit/fit.hpp"
#include "monitor/container_files.hpp"
#include "protocol/container_contract.hpp"
#include "region/region.hpp"

namespace hami::cli {
namespace {

namespace fs = std::filesystem;
constexpr int kExitCannotRun = 1;

std::string share_text(int32_t cores) {
  return cores <= 0 || cores >= 100 ? "no cap" : std::to_string(cores) + "%";
}

// The job directories named `name` under <root>/containers (<id>_<name>).
std::vector<std::string> job_dirs(const std::string& root, const std::string& name) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(root) / protocol::kHostContainersDir, ec)) {
    auto ref = monitor::parse_container_dir(e.path().filename().string());
    if (ref && ref->container == name && e.is_directory() && !e.is_symlink())
      out.push_back(e.path().filename().string());
  }
  return out;
}

}  // namespace

int run_resize(const ResizeOptions& o) {
  auto fail = [&](int code, const std::string& msg) {
    std::fprintf(stderr, "vgpu resize: %s\n", msg.c_str());
    return code;
  };
  if (o.memory.empty() && !o.cores) return fail(kExitUsage, "give --memory, --cores or both");
  if (o.cores && (*o.cores < 0 || *o.cores > 100)) return fail(kExitUsage, "--cores must be 0-100");
  std::optional<uint64_t> memory;
  if (!o.memory.empty()) {
    auto m = parse_size(o.memory);
    if (!m) return fail(kExitUsage, "--memory: " + m.error().message);
    if (*m == 0) return fail(kExitUsage, "--memory must be more than 0");
    memory = *m;
  }
  const std::string hook = choose_state_root(o.hook_path).path;
  const std::vector<std::string> dirs = job_dirs(hook, o.name);
  if (dirs.empty()) {
    return fail(kExitCannotRun, "no job named " + o.name + " under " + hook +
                                    " (vgpu top --hook-path " + hook + " shows the jobs)");
  }
  if (dirs.size() > 1) {
    return fail(kExitCannotRun, std::to_string(dirs.size()) + " jobs are named " + o.name +
                                    " under " + hook + "; give each its own --name");
  }
  const std::string dir = hook + "/" + protocol::kHostContainersDir + "/" + dirs[0];
  const std::string limits_path = dir + "/" + protocol::kJobLimitsFile;
  auto text = read_small_file(limits_path, protocol::kMaxLimitsFileSize);
  if (!text) {
    return fail(kExitCannotRun,
                text.error().message + " (a job started by an older vgpu run cannot be resized)");
  }
  const protocol::ContainerLimits old = protocol::parse_limits_file(*text, limits_path);
  if (old.corrupt || !old.errors.empty() || old.device_uuids.size() != 1)
    return fail(kExitCannotRun, limits_path + ": not a vgpu run job's limits file");
  const std::string uuid = old.device_uuids[0];
  const bool mps = old.mode() == protocol::SharingMode::kMps;
  const int32_t old_cores = mps ? static_cast<int32_t>(old.mps_threads.value_or(100))
                                : static_cast<int32_t>(old.sm_limit[0]);
  const uint64_t new_memory = memory.value_or(old.memory_limit[0]);
  const int32_t new_cores = o.cores.value_or(old_cores);
  if (mps) {
    if (auto why =
            protocol::mps_resize_refusal(old.memory_limit[0], new_memory, old_cores, new_cores))
      return fail(kExitCannotRun, *why);
  }

  // Fitted as a new job on the same GPU, beside every other job there.
  auto gpus = local_gpus(o.nvml_library);
  if (!gpus) return fail(kExitCannotRun, gpus.error().message);
  monitor::ContainerFiles files(hook);
  std::vector<monitor::ContainerState> others;
  const auto mine = monitor::parse_container_dir(dirs[0]);
  for (monitor::ContainerState& c : files.scan()) {
    if (!mine || !(c.ref == *mine)) others.push_back(std::move(c));
  }
  fit::PodOptions options;
  options.use_uuids = {uuid};
  fit::ContainerRequest req;
  req.nums = 1;
  req.mem_mib = new_memory == 0 ? 0 : mib_up(new_memory);
  if (new_memory == 0) req.mem_percent = 100;
  req.cores = new_cores >= 100 ? 0 : new_cores;
  auto pod = fit::PreparedPod::make(fit::PodRequest{{req}}, options);
  if (!pod) return fail(kExitUsage, pod.error().message);
  auto placed = fit::place_pod(local_node(*gpus, others), *pod);
  if (!placed && !o.overcommit) {
    return fail(kExitCannotRun, "the new size does not fit " + uuid + ": " +
                                    placed.error().message +
                                    " (pass --overcommit to resize anyway)");
  }

  protocol::ContainerSpec spec;
  spec.gpus.push_back({uuid, new_memory, new_cores});
  spec.mode = mps ? protocol::SharingMode::kMps : protocol::SharingMode::kTimeslice;
  spec.priority = old.priority;
  if (!mps) spec.policy = old.policy;
  spec.state_file = old.state_file;
  spec.comment = "written by vgpu resize for job " + o.name;
  if (auto w = replace_small_file(limits_path, protocol::render_contract(spec).limits_text, 0644);
      !w) {
    return fail(kExitCannotRun, w.error().message);
  }
  // The next `vgpu run` fits against the state file: say it there too, even
  // before the job's processes look.
  if (!old.state_file.empty()) {
    auto region = region::Region::open(old.state_file, region::OpenOptions{.create = false});
    if (region) {
      for (int d = 0; d < protocol::kContainerMaxDevices; ++d) {
        region->set_memory_limit(d, new_memory);
        if (!mps) region->set_sm_limit(d, new_cores <= 0 || new_cores >= 100 ? 100 : new_cores);
      }
    }
  }
  std::printf(
      "vgpu resize: %s on %s: memory %s -> %s, SM share %s -> %s%s\n", o.name.c_str(), uuid.c_str(),
      old.memory_limit[0] == 0 ? "none" : format_bytes(old.memory_limit[0]).c_str(),
      new_memory == 0 ? "none" : format_bytes(new_memory).c_str(), share_text(old_cores).c_str(),
      share_text(new_cores).c_str(), placed ? "" : " (over-committed)");
  return kExitOk;
}

}  // namespace hami::cli
