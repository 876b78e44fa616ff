// vgpu: the command-line tool of HAMi in C++. Subcommands:
//   inspect FILE [--json]   show what a per-container state file holds
//   top [--once] ...        live view of the node's GPUs and containers
//   run [options] -- CMD    run CMD on a slice of a GPU of this machine
//   resize NAME ...         change a running `vgpu run` job's memory and SM share
//   mps stop|status         the MPS control daemons `vgpu run --sharing mps` leaves
#include <CLI/CLI.hpp>

#include <iostream>
#include <string>

#include "cli/inspect.hpp"
#include "cli/mps.hpp"
#include "cli/resize.hpp"
#include "cli/run.hpp"
#include "cli/top.hpp"
#include "common/build_info.hpp"
#include "common/size_parse.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "vgpu: GPU sharing tools (HAMi-compatible).\n"
      "Exit codes: 0 ok, 2 usage error, 3 invalid or unreadable file."};
  app.set_version_flag("--version", std::string(hami::build_info().version));
  app.require_subcommand(1);

  std::string file;
  bool json = false;
  CLI::App* inspect = app.add_subcommand(
      "inspect", "Show a state file (*.cache): limits, devices, process slots, SM pacing");
  inspect->add_option("FILE", file, "State file, e.g. /usr/local/vgpu/<id>.cache")->required();
  inspect->add_flag("--json", json, "Machine-readable output");

  hami::cli::TopOptions top_opt;
  std::string interval = "1s";
  CLI::App* top = app.add_subcommand(
      "top", "Live view of the GPUs and the containers sharing them (read-only)");
  top->add_option("--hook-path", top_opt.hook_path,
                  "Directory holding containers/<podUID>_<container>/*.cache")
      ->capture_default_str();
  top->add_option("--interval", interval, "Refresh period (e.g. 1s, 500ms)")->capture_default_str();
  top->add_flag("--once", top_opt.once,
                "Print one frame and exit (after one interval: SM utilisation is a rate)");
  top->add_flag("--no-nvml", top_opt.no_nvml, "Show the state files only");
  top->add_option("--nvml-library", top_opt.nvml_library, "NVML library to dlopen")
      ->capture_default_str();

  hami::cli::RunOptions run_opt;
  CLI::App* run = app.add_subcommand(
      "run", "Run a command on a slice of one GPU of this machine, under libvgpu.so");
  run->add_option("--memory", run_opt.memory,
                  "Device-memory limit, e.g. 4g, 3000m (default: none)");
  run->add_option("--cores", run_opt.cores,
                  "SM share in percent, 1-99; 100 = no cap, placed only on a GPU no job uses "
                  "(default: no cap)")
      ->check(CLI::Range(0, 100));
  run->add_option("--gpu", run_opt.gpu, "GPU index or UUID (default: chosen by --policy)");
  run->add_option("--priority", run_opt.priority,
                  "high or low: who yields when both are busy (with --sharing mps, a high job's "
                  "SMs are not capped)")
      ->check(CLI::IsMember({"high", "low"}))
      ->capture_default_str();
  run->add_option("--policy", run_opt.policy, "How the GPU is chosen: spread, binpack, ...")
      ->capture_default_str();
  run->add_option("--hook-path", run_opt.hook_path,
                  "State root (default /usr/local/vgpu when writable, else a per-user directory, "
                  "which must be yours and not a symbolic link)");
  run->add_option("--name", run_opt.name,
                  "Name of this job's state directory: 1-63 of [A-Za-z0-9._-], not starting with "
                  "'.' or '-'")
      ->capture_default_str();
  run->add_option("--library", run_opt.library,
                  "libvgpu.so (default: next to this binary, else /usr/local/vgpu/libvgpu.so)");
  run->add_option("--nvml-library", run_opt.nvml_library, "NVML library to dlopen")
      ->capture_default_str();
  run->add_option("--sharing", run_opt.sharing,
                  "timeslice: libvgpu.so paces the SM share; mps: the command runs as a client of "
                  "the GPU's MPS control daemon (started when none runs, and LEFT RUNNING for the "
                  "next job: vgpu mps stop ends it), MPS gives the SM share "
                  "(CUDA_MPS_ACTIVE_THREAD_PERCENTAGE) and libvgpu.so the memory limit")
      ->check(CLI::IsMember({"timeslice", "mps"}))
      ->capture_default_str();
  run->add_option("--mps-control", run_opt.mps_control,
                  "nvidia-cuda-mps-control to start (default: from PATH)");
  run->add_flag("--overcommit", run_opt.overcommit, "Run even when the GPU has no room left");
  run->add_flag("--print-env", run_opt.print_env,
                "Print the environment (KEY=VALUE, for docker run --env-file) instead of running");
  run->add_flag("--keep-state", run_opt.keep_state, "Keep the job's state directory afterwards");
  run->add_option("command", run_opt.command, "The command and its arguments (after --)");

  hami::cli::ResizeOptions resize_opt;
  int resize_cores = -1;
  CLI::App* resize = app.add_subcommand(
      "resize",
      "Change a running `vgpu run` job's memory limit and SM share; its processes follow within "
      "1 s, without a restart");
  resize->add_option("NAME", resize_opt.name, "The job's --name")->required();
  resize->add_option("--memory", resize_opt.memory,
                     "New device-memory limit, e.g. 8g (lower than what the job holds: its "
                     "allocations are refused until it is under)");
  resize->add_option("--cores", resize_cores, "New SM share in percent, 1-99; 0 or 100: no cap")
      ->check(CLI::Range(0, 100));
  resize->add_option("--hook-path", resize_opt.hook_path, "State root, as given to vgpu run");
  resize->add_option("--nvml-library", resize_opt.nvml_library, "NVML library to dlopen")
      ->capture_default_str();
  resize->add_flag("--overcommit", resize_opt.overcommit,
                   "Resize even when the GPU has no room for the new size");

  hami::cli::MpsOptions mps_opt;
  CLI::App* mps = app.add_subcommand(
      "mps", "The MPS control daemons that `vgpu run --sharing mps` starts and leaves running");
  mps->require_subcommand(1);
  CLI::App* mps_stop =
      mps->add_subcommand("stop", "Stop the MPS control daemon (quit, then SIGKILL)");
  CLI::App* mps_status =
      mps->add_subcommand("status", "Say whether each MPS control daemon answers");
  for (CLI::App* sub : {mps_stop, mps_status}) {
    sub->add_option("--gpu", mps_opt.gpu,
                    "GPU index or UUID (default: every daemon under the state root)");
    sub->add_option("--hook-path", mps_opt.hook_path, "State root, as given to vgpu run");
    sub->add_option("--nvml-library", mps_opt.nvml_library,
                    "NVML library to dlopen (for --gpu INDEX)")
        ->capture_default_str();
    sub->add_option("--mps-control", mps_opt.control_binary,
                    "nvidia-cuda-mps-control (default: from PATH)");
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints help, version or the usage error
    return rc == 0 ? 0 : hami::cli::kExitUsage;
  }
  if (inspect->parsed()) return hami::cli::run_inspect(file, json);
  if (run->parsed()) return hami::cli::run_command(run_opt);
  if (resize->parsed()) {
    if (resize_cores >= 0) resize_opt.cores = resize_cores;
    return hami::cli::run_resize(resize_opt);
  }
  if (mps_stop->parsed()) return hami::cli::run_mps_stop(mps_opt);
  if (mps_status->parsed()) return hami::cli::run_mps_status(mps_opt);
  if (top->parsed()) {
    auto d = hami::parse_duration(interval);
    if (!d || d->count() < 100'000) {
      std::cerr << "vgpu top: --interval: "
                << (d ? std::string("must be at least 100ms") : d.error().message) << "\n";
      return hami::cli::kExitUsage;
    }
    top_opt.interval_ms = static_cast<int>(d->count() / 1000);
    return hami::cli::run_top(top_opt);
  }
  return hami::cli::kExitUsage;
}
