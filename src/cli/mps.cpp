#include "cli/mps.hpp"

#include <cstdio>
#include <filesystem>
#include <string>

#include "cli/inspect.hpp"
#include "cli/run.hpp"
#include "mps/paths.hpp"
#include "nvml/nvml.hpp"
#include "protocol/container_contract.hpp"

namespace hami::cli {
namespace {

namespace fs = std::filesystem;
constexpr int kExitCannotRun = 1;

int fail(const char* what, const std::string& msg) {
  std::fprintf(stderr, "vgpu mps %s: %s\n", what, msg.c_str());
  return kExitCannotRun;
}

// The GPUs whose daemons the command is about: --gpu (an index is turned into
// its UUID through NVML), else every <root>/mps/<uuid> there is.
Result<std::vector<std::string>> selected_uuids(const MpsOptions& o, const std::string& root) {
  if (!o.gpu.empty()) {
    if (o.gpu.find_first_not_of("0123456789") != std::string::npos)
      return std::vector<std::string>{o.gpu};
    auto nvml = nvml::Library::open(o.nvml_library);
    if (!nvml) return Error{"--gpu " + o.gpu + ": cannot list the GPUs: " + nvml.error().message};
    auto info = (*nvml)->device(std::stoi(o.gpu));
    if (!info) return Error{"--gpu " + o.gpu + ": " + info.error().message};
    return std::vector<std::string>{info->uuid};
  }
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(root) / "mps", ec)) {
    if (e.is_directory() && !e.is_symlink()) out.push_back(e.path().filename().string());
  }
  return out;
}

}  // namespace

mps::DaemonOptions cli_daemon_options(const std::string& root, const std::string& uuid,
                                      const std::string& control_binary) {
  mps::DaemonOptions d;
  d.control_binary = control_binary;
  d.binary_setting = "--mps-control";
  d.pipe_dir = mps::mps_pipe_dir(root, uuid);
  d.log_dir = mps::mps_log_dir(root, uuid);
  d.gpu_uuid = uuid;
  return d;
}

Result<std::vector<std::pair<std::string, std::string>>> mps_client_env(
    const std::string& root, const std::string& uuid, const std::string& control_binary, int cores,
    uint64_t memory) {
  mps::ControlDaemon daemon(cli_daemon_options(root, uuid, control_binary));
  auto started = daemon.start();
  if (!started) return started.error();
  const auto pid = daemon.pid();
  std::fprintf(stderr, "vgpu run: %s the MPS control daemon of %s (pid %s, pipe directory %s)\n",
               *started == mps::Started::fresh ? "started" : "reusing", uuid.c_str(),
               pid ? std::to_string(*pid).c_str() : "?", daemon.options().pipe_dir.c_str());
  std::vector<std::pair<std::string, std::string>> env = {
      {protocol::kEnvMpsPipeDir, daemon.options().pipe_dir.string()},
      {protocol::kEnvMpsLogDir, daemon.options().log_dir.string()},
  };
  if (cores > 0) env.push_back({protocol::kEnvMpsThreads, std::to_string(cores)});
  // Device 0: the client sees only its GPU (CUDA_VISIBLE_DEVICES=<uuid>).
  if (memory > 0)
    env.push_back({protocol::kEnvMpsPinnedMemory,
                   "0=" + std::to_string((memory + (1 << 20) - 1) >> 20) + "M"});
  return env;
}

int run_mps_stop(const MpsOptions& o) {
  const std::string root = choose_state_root(o.hook_path).path;
  auto uuids = selected_uuids(o, root);
  if (!uuids) return fail("stop", uuids.error().message);
  int rc = kExitOk;
  for (const std::string& uuid : *uuids) {
    mps::ControlDaemon daemon(cli_daemon_options(root, uuid, o.control_binary));
    const auto pid = daemon.pid();
    if (!pid && !daemon.check()) {
      std::printf("%s: no MPS control daemon running\n", uuid.c_str());
      continue;
    }
    if (auto stopped = daemon.stop(); !stopped) {
      rc = fail("stop", uuid + ": " + stopped.error().message);
      continue;
    }
    std::printf("%s: stopped the MPS control daemon%s\n", uuid.c_str(),
                pid ? (" (pid " + std::to_string(*pid) + ")").c_str() : "");
  }
  if (uuids->empty()) std::printf("no MPS control daemon under %s/mps\n", root.c_str());
  return rc;
}

int run_mps_status(const MpsOptions& o) {
  const std::string root = choose_state_root(o.hook_path).path;
  auto uuids = selected_uuids(o, root);
  if (!uuids) return fail("status", uuids.error().message);
  if (uuids->empty()) std::printf("no MPS control daemon under %s/mps\n", root.c_str());
  int rc = kExitOk;
  for (const std::string& uuid : *uuids) {
    mps::ControlDaemon daemon(cli_daemon_options(root, uuid, o.control_binary));
    auto answers = daemon.check();
    const auto pid = daemon.pid();
    std::printf("%s: %s (pid %s, pipe directory %s)\n", uuid.c_str(),
                answers ? "running" : "not running", pid ? std::to_string(*pid).c_str() : "-",
                daemon.options().pipe_dir.c_str());
    if (!answers) rc = kExitCannotRun;
  }
  return rc;
}

}  // namespace hami::cli
