#include "cli/run.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "cli/inspect.hpp"
#include "cli/mps.hpp"
#include "cli/state_dir.hpp"
#include "common/size_parse.hpp"
#include "common/small_file.hpp"
#include "fit/fit.hpp"
#include "monitor/trusted_record.hpp"
#include "mps/control_daemon.hpp"
#include "mps/paths.hpp"
#include "nvml/nvml.hpp"
#include "protocol/container_contract.hpp"
#include "protocol/node_register.hpp"
#include "region/layout_v1.hpp"
#include "region/region.hpp"

namespace hami::cli {
namespace {

namespace fs = std::filesystem;
constexpr int kExitCannotRun = 1;

// /usr/local/vgpu as the device plugin lays it out, for whoever may write
// there; anyone else gets a directory of their own (and `vgpu top --hook-path`
// shows it), which must then be theirs: /tmp/vgpu-<uid> is a name anyone can
// take first.
RootChoice default_root() {
  struct stat st {};
  if (::lstat("/usr/local/vgpu", &st) != 0 && errno == ENOENT &&
      ::access("/usr/local", W_OK) == 0) {
    ::mkdir("/usr/local/vgpu", 0755);
  }
  if (::lstat("/usr/local/vgpu", &st) == 0 && S_ISDIR(st.st_mode) &&
      ::access("/usr/local/vgpu", W_OK) == 0) {
    return {"/usr/local/vgpu", RootOwner::kAny};
  }
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  if (runtime != nullptr && *runtime != '\0') {
    return {std::string(runtime) + "/vgpu", RootOwner::kMe};
  }
  return {"/tmp/vgpu-" + std::to_string(::geteuid()), RootOwner::kMe};
}

std::string default_library() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && fs::exists(self.parent_path() / "libvgpu.so")) {
    return (self.parent_path() / "libvgpu.so").string();
  }
  return "/usr/local/vgpu/libvgpu.so";
}

// The job's state file, made before the command starts and holding only the
// chosen GPU. NVML on this machine lists every GPU, and the library would
// otherwise record them all (in a container NVML sees only the container's);
// with the file made, it uses the recorded list, so the job's limits and
// usage sit on its GPU alone, where `vgpu top` and the next `vgpu run` look.
Result<void> make_state_file(const JobDir& job, const std::string& uuid, uint64_t memory,
                             const RunOptions& o) {
  region::OpenOptions opt;
  opt.initial.memory_limit.fill(memory);
  opt.initial.sm_limit.fill(o.cores > 0 && o.cores < 100 ? static_cast<uint64_t>(o.cores) : 100);
  opt.initial.priority = o.priority == "high" ? 0 : 1;
  // Through the directory we made, whatever its name says by now.
  auto region = region::Region::open(job.path() + "/vgpu.cache", opt);
  if (!region) {
    return Error{job.named_path() + "/vgpu.cache: " + region.error().message};
  }
  if (auto ok = region->set_device_uuid(0, uuid); !ok) return ok.error();
  region->set_device_count(1);
  return {};
}

// What the job is given, as the container contract states it.
protocol::ContainerSpec job_spec(const RunOptions& o, const std::string& uuid, uint64_t memory,
                                 const std::string& state_file) {
  protocol::ContainerSpec spec;
  spec.gpus.push_back({uuid, memory, o.cores});
  spec.mode = o.sharing == "mps" ? protocol::SharingMode::kMps : protocol::SharingMode::kTimeslice;
  spec.priority = o.priority == "high" ? 0 : 1;
  spec.state_file = state_file;
  spec.comment = "written by vgpu run for job " + o.name;
  return spec;
}

// For an MPS job, <job>/mps: its thread percentage, which the node agent and
// `vgpu top` show as its share (a standalone job has no device-plugin record).
Result<void> write_mps_client_file(const JobDir& job, const protocol::Rendered& contract) {
  const std::string text = std::string(protocol::kEnvMpsThreads) + "=" +
                           std::to_string(contract.mps_threads.value_or(100)) + "\n";
  const std::string path = job.named_path() + "/" + protocol::kMpsClientFile;
  UniqueFd fd{::openat(job.fd.get(), protocol::kMpsClientFile,
                       O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644)};
  if (fd.get() < 0) return Error::from_errno(path + ": cannot create");
  if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    return Error::from_errno(path + ": cannot write");
  }
  return {};
}

// The job's files: its state file, its limits file (which `vgpu resize`
// replaces and the library follows), and for an MPS job its client file.
Result<void> make_job_files(const JobDir& job, const std::string& uuid, uint64_t memory,
                            const RunOptions& o, const protocol::Rendered& contract) {
  if (auto made = make_state_file(job, uuid, memory, o); !made) return made;
  const std::string limits = job.named_path() + "/" + protocol::kJobLimitsFile;
  if (auto w = replace_small_file(limits, contract.limits_text, 0644); !w) return w;
  if (o.sharing == "mps") return write_mps_client_file(job, contract);
  return {};
}

volatile sig_atomic_t g_child = 0;
void forward(int sig) {
  if (g_child > 0) ::kill(static_cast<pid_t>(g_child), sig);
}

}  // namespace

int32_t mib_up(uint64_t bytes) {
  return static_cast<int32_t>(std::min<uint64_t>((bytes + (1 << 20) - 1) >> 20, INT32_MAX));
}

Result<std::vector<LocalGpu>> local_gpus(const std::string& nvml_library) {
  auto nvml = nvml::Library::open(nvml_library);
  if (!nvml) return Error{"cannot list the GPUs: " + nvml.error().message};
  auto count = (*nvml)->device_count();
  if (!count) return count.error();
  std::vector<LocalGpu> gpus;
  for (int i = 0; i < *count; ++i) {
    auto info = (*nvml)->device(i);
    if (!info) return info.error();
    gpus.push_back({i, info->uuid, info->name, info->memory_total, info->compute_mode});
  }
  if (gpus.empty()) return Error{"NVML reports no GPU on this machine"};
  return gpus;
}

RootChoice choose_state_root(const std::string& hook_path) {
  return hook_path.empty() ? default_root() : RootChoice{hook_path, RootOwner::kAny};
}

fit::NodeDevices local_node(const std::vector<LocalGpu>& gpus,
                            const std::vector<monitor::ContainerState>& containers) {
  fit::NodeDevices node;
  node.name = "localhost";
  for (const LocalGpu& g : gpus) {
    fit::GpuDevice d;
    d.uuid = g.uuid;
    d.index = g.index;
    d.type = protocol::device_type(g.name);
    d.total_mem_mib = mib_up(g.memory_total);
    node.devices.push_back(d);
  }
  for (const monitor::ContainerState& c : containers) {
    const region::RegionSnapshot& s = c.snapshot;
    const bool live = std::any_of(s.slots.begin(), s.slots.end(), [](const auto& slot) {
      return slot.status != region::kSlotFree && slot.liveness != region::Liveness::kDead &&
             slot.pid > 0;
    });
    if (!live) continue;
    const int ndev = static_cast<int>(std::min<uint64_t>(s.device_num, region::kMaxDevices));
    for (int i = 0; i < ndev; ++i) {
      for (fit::GpuDevice& d : node.devices) {
        if (d.uuid.compare(0, 40, s.uuids[i], 0, 40) != 0) continue;
        d.used_tenants += 1;
        d.used_mem_mib += s.memory_limit[i] == 0 ? d.total_mem_mib : mib_up(s.memory_limit[i]);
        if (s.sm_limit[i] > 0 && s.sm_limit[i] < 100) {
          d.used_cores += static_cast<int32_t>(s.sm_limit[i]);
        }
      }
    }
  }
  return node;
}

int run_command(const RunOptions& o) {
  auto fail = [](int code, const std::string& msg) {
    std::fprintf(stderr, "vgpu run: %s\n", msg.c_str());
    return code;
  };
  if (o.command.empty() && !o.print_env)
    return fail(kExitUsage, "no command given (vgpu run [options] -- CMD ...)");
  uint64_t memory = 0;
  if (!o.memory.empty()) {
    auto m = parse_size(o.memory);
    if (!m) return fail(kExitUsage, "--memory: " + m.error().message);
    if (*m == 0) return fail(kExitUsage, "--memory must be more than 0");
    memory = *m;
  }
  if (o.cores < 0 || o.cores > 100) return fail(kExitUsage, "--cores must be 0-100");
  const bool mps = o.sharing == "mps";
  if (!mps && o.sharing != "timeslice")
    return fail(kExitUsage, "--sharing must be timeslice or mps");
  if (o.priority != "high" && o.priority != "low") {
    return fail(kExitUsage, "--priority must be high or low");
  }
  auto policy = fit::parse_gpu_policy(o.policy);
  if (!policy) return fail(kExitUsage, "--policy: " + policy.error().message);

  // The machine: its GPUs, and what the running containers reserve on them.
  auto listed = local_gpus(o.nvml_library);
  if (!listed) return fail(kExitCannotRun, listed.error().message);
  const std::vector<LocalGpu>& gpus = *listed;
  if (!valid_job_name(o.name)) {
    return fail(kExitUsage, "--name '" + o.name.substr(0, 80) +
                                "': use 1-63 letters, digits, '.', '_' or '-', not starting "
                                "with '.' or '-' (it names the job's state directory)");
  }
  const RootChoice choice = choose_state_root(o.hook_path);
  const std::string hook = choice.path;
  auto root = open_state_root(hook, choice.owner);
  if (!root) return fail(kExitCannotRun, root.error().message);
  monitor::ContainerFiles files(hook);
  const fit::NodeDevices node = local_node(gpus, files.scan());

  fit::PodOptions options;
  options.gpu_policy = *policy;
  if (!o.gpu.empty()) {
    std::string uuid = o.gpu;
    if (o.gpu.find_first_not_of("0123456789") == std::string::npos) {
      const size_t i = std::stoul(o.gpu);
      if (i >= gpus.size()) {
        return fail(kExitUsage, "--gpu " + o.gpu + ": this machine has " +
                                    std::to_string(gpus.size()) + " GPU(s)");
      }
      uuid = gpus[i].uuid;
    }
    options.use_uuids = {uuid};
  }
  fit::ContainerRequest req;
  req.nums = 1;
  req.mem_mib = memory == 0 ? 0 : mib_up(memory);
  // No memory limit: the command may take the whole GPU's memory, so it needs
  // all of it free (upstream's rule for a pod that names no memory).
  if (memory == 0) req.mem_percent = 100;
  req.cores = o.cores;
  auto pod = fit::PreparedPod::make(fit::PodRequest{{req}}, options);
  if (!pod) return fail(kExitUsage, pod.error().message);
  auto placed = fit::place_pod(node, *pod);
  std::string uuid;
  if (placed) {
    uuid = placed->at(0).at(0).uuid;
  } else if (o.overcommit) {
    uuid = options.use_uuids.empty() ? gpus[0].uuid : options.use_uuids[0];
    std::fprintf(stderr, "vgpu run: over-committing %s (%s)\n", uuid.c_str(),
                 placed.error().message.c_str());
  } else {
    return fail(kExitCannotRun,
                "no GPU has room for this request: " + placed.error().message +
                    ". Running containers reserve their limits (vgpu top --hook-path " + hook +
                    " shows them); pass --overcommit to run anyway.");
  }

  if (mps) {
    for (const LocalGpu& g : gpus) {
      if (g.uuid != uuid || !g.compute_mode) continue;
      if (auto refusal = mps::compute_mode_refusal(*g.compute_mode, uuid))
        return fail(kExitCannotRun, *refusal);
    }
  }

  // The command's own state directory, named as the device plugin names them.
  auto job = make_job_dir(*root, o.name);
  if (!job) return fail(kExitCannotRun, job.error().message);
  const std::string dir = job->named_path();
  const std::string state_file = dir + "/vgpu.cache";
  const protocol::Rendered contract =
      protocol::render_contract(job_spec(o, uuid, memory, state_file));
  std::vector<std::pair<std::string, std::string>> env = {
      {protocol::kEnvCudaVisible, uuid},
      {protocol::kEnvStateFile, state_file},
      {protocol::kEnvLimitsFile, dir + "/" + protocol::kJobLimitsFile},
  };
  // The limits file governs; the same values in the environment say what the
  // job was given to anyone reading its environment.
  env.insert(env.end(), contract.env.begin(), contract.env.end());
  const std::string library = o.library.empty() ? default_library() : o.library;
  if (mps) {
    // Started (or found) before the job's files, and left running afterwards:
    // the next MPS job on this GPU reuses it (vgpu mps stop ends it).
    auto client =
        mps_client_env(hook, uuid, o.mps_control, contract.mps_threads.value_or(0), memory);
    if (!client) {
      (void)remove_job_dir(*root, *job);
      return fail(kExitCannotRun, client.error().message);
    }
    env.insert(env.end(), client->begin(), client->end());
  }
  if (o.print_env) {
    // For `docker run --env-file`: the library must then be mounted at the same path.
    for (const auto& [k, v] : env)
      std::printf("%s=%s\n", k.c_str(), v.c_str());
    std::printf("LD_PRELOAD=%s\n", library.c_str());
    std::fprintf(stderr, "vgpu run: mount %s and %s%s%s into the container at the same paths\n",
                 library.c_str(), dir.c_str(), mps ? " and the MPS pipe directory " : "",
                 mps ? mps::mps_pipe_dir(hook, uuid).c_str() : "");
    if (auto made = make_job_files(*job, uuid, memory, o, contract); !made) {
      (void)remove_job_dir(*root, *job);
      return fail(kExitCannotRun, made.error().message);
    }
    return kExitOk;
  }
  auto give_up = [&](const std::string& msg) {
    (void)remove_job_dir(*root, *job);
    return fail(kExitCannotRun, msg);
  };
  if (::access(library.c_str(), R_OK) != 0) {
    return give_up(library + ": " + std::strerror(errno) + " (pass --library)");
  }
  if (auto made = make_job_files(*job, uuid, memory, o, contract); !made) {
    return give_up(made.error().message);
  }

  const pid_t child = ::fork();
  if (child < 0) return give_up(std::string("fork: ") + std::strerror(errno));
  if (child == 0) {
    for (const auto& [k, v] : env)
      ::setenv(k.c_str(), v.c_str(), 1);
    const char* preload = std::getenv("LD_PRELOAD");
    const std::string p =
        preload != nullptr && *preload != '\0' ? library + ":" + preload : library;
    ::setenv("LD_PRELOAD", p.c_str(), 1);
    std::vector<char*> argv;
    for (const std::string& a : o.command)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "vgpu run: %s: %s\n", o.command[0].c_str(), std::strerror(errno));
    ::_exit(127);
  }
  g_child = child;
  struct sigaction sa {};
  sa.sa_handler = forward;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT})
    sigaction(sig, &sa, nullptr);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!o.keep_state) {
    if (auto removed = remove_job_dir(*root, *job); !removed) {
      std::fprintf(stderr, "vgpu run: %s\n", removed.error().message.c_str());
    }
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : kExitCannotRun;
}

}  // namespace hami::cli
