#pragma once
// One GPU's MPS control daemon (`nvidia-cuda-mps-control -d`): starts it with
// its own pipe and log directories and the GPU pinned by UUID, reuses one that
// already answers there, checks that it answers, sends it commands and stops
// it (`quit`, then SIGKILL of the pid in its pid file as a last resort). The
// device plugin's supervisor and `vgpu run --sharing mps` drive it.
//
//   hami::mps::ControlDaemon d({.pipe_dir = mps_pipe_dir(root, uuid),
//                               .log_dir = mps_log_dir(root, uuid), .gpu_uuid = uuid});
//   auto s = d.start();            // Started::fresh or Started::reused
//   if (!s) log(s.error().message);
//   if (!d.check()) restart...;
//   (void)d.stop();
//
// Not thread-safe: one owner per daemon. Errors say what failed and what to do.

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.hpp"

namespace hami::mps {

inline constexpr const char* kControlBinary = "nvidia-cuda-mps-control";
// The real daemon writes its pid here, in the pipe directory, and removes the
// file when it quits (the control socket stays behind).
inline constexpr const char* kPidFile = "nvidia-cuda-mps-control.pid";
inline constexpr const char* kControlSocket = "control";
inline constexpr const char* kControlLog = "control.log";

struct DaemonOptions {
  // Empty: kControlBinary from PATH.
  std::filesystem::path control_binary;
  // How the operator names another binary ("--mps-control-binary"), quoted in
  // the error when the binary is missing.
  std::string binary_setting = "the MPS control binary's path";
  std::filesystem::path pipe_dir;  // CUDA_MPS_PIPE_DIRECTORY
  std::filesystem::path log_dir;   // CUDA_MPS_LOG_DIRECTORY
  std::string gpu_uuid;            // CUDA_VISIBLE_DEVICES of the daemon
  std::chrono::milliseconds start_timeout{std::chrono::seconds(15)};
  std::chrono::milliseconds stop_timeout{std::chrono::seconds(10)};
  std::chrono::milliseconds command_timeout{std::chrono::seconds(5)};
};

enum class Started { fresh, reused };

class ControlDaemon {
 public:
  explicit ControlDaemon(DaemonOptions options);

  // Starts the daemon unless one already answers on the pipe directory, then
  // waits (start_timeout) until it answers. Starters of one pipe directory
  // (two `vgpu run` at once, the plugin beside them) take turns through a
  // lock file beside it (start.lock): the second finds the first's daemon.
  Result<Started> start();
  // The daemon answers `get_default_active_thread_percentage` with a number.
  Result<void> check();
  // Pipes `line` to the control program; its output on exit status 0.
  Result<std::string> command(std::string_view line);
  // `quit`, wait (stop_timeout) for the daemon's process to go, else SIGKILL
  // it. Success when no daemon runs afterwards (also when none ran).
  Result<void> stop();

  // The daemon's pid from its pid file while that process lives, else the
  // last one seen.
  std::optional<pid_t> pid() const;
  const DaemonOptions& options() const { return options_; }

 private:
  Result<std::filesystem::path> binary() const;
  Result<void> prepare_dirs() const;
  Error start_failure(std::string what) const;

  DaemonOptions options_;
  mutable pid_t last_pid_ = -1;
};

// Why a GPU in NVML compute mode `nvml_compute_mode` (nvmlComputeMode_t)
// cannot run MPS, with the fix; nullopt when it can. EXCLUSIVE_THREAD and
// PROHIBITED forbid the MPS server's context, which fails only when the first
// client connects: checking the mode first gives the reason up front.
std::optional<std::string> compute_mode_refusal(int nvml_compute_mode, const std::string& uuid);

// Last non-empty line of <log_dir>/control.log ("" when there is none).
std::string last_log_line(const std::filesystem::path& log_dir);

}  // namespace hami::mps
