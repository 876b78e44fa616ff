#pragma once
// `vgpu run`: runs a command on a slice of one GPU of this machine, without
// Kubernetes. It picks the GPU with the same fitting code the scheduler
// extender uses (src/fit) over the machine's local state — the GPUs NVML
// reports, and the limits of the containers already running under the state
// directory — refuses to over-commit unless told to, gives the command its own
// state directory, and runs it with libvgpu.so preloaded.
//
//   vgpu run --memory 4g --cores 30 -- python serve.py
//   vgpu run --memory 8g --print-env > job.env   # for docker run --env-file
//
//   RunOptions o; o.memory = "4g"; o.cores = 30; o.command = {"python", "serve.py"};
//   return run_command(o);

#include <optional>
#include <string>
#include <vector>

#include "cli/state_dir.hpp"
#include "fit/types.hpp"
#include "monitor/container_files.hpp"

namespace hami::cli {

struct RunOptions {
  std::string sharing = "timeslice";  // timeslice | mps
  std::string mps_control;            // nvidia-cuda-mps-control; empty: from PATH
  std::string memory;                 // "4g"; empty: no memory limit
  int cores = 0;                      // SM share in percent; 0: none
  std::string gpu;                    // index or UUID; empty: chosen by policy
  std::string priority = "low";       // high | low
  std::string policy = "spread";      // GPU policy: spread | binpack | ...
  // State root; empty: /usr/local/vgpu where writable, else a per-user one
  // ($XDG_RUNTIME_DIR/vgpu, or /tmp/vgpu-<uid>), which must be this user's.
  std::string hook_path;
  std::string name = "main";  // the "container" name: 1-63 of [A-Za-z0-9._-]
  std::string library;        // libvgpu.so; empty: next to the vgpu binary, then /usr/local/vgpu
  std::string nvml_library = "libnvidia-ml.so.1";
  bool overcommit = false;
  bool print_env = false;
  bool keep_state = false;  // leave the state directory when the command ends
  std::vector<std::string> command;
};

// A GPU of this machine as `vgpu run` sees it.
struct LocalGpu {
  int index = 0;
  std::string uuid;
  std::string name;
  uint64_t memory_total = 0;
  std::optional<int> compute_mode;  // nvmlComputeMode_t, when NVML says
};

// Bytes in whole MiB, rounded up (what fitting counts in).
int32_t mib_up(uint64_t bytes);

// The GPUs NVML (`nvml_library`) lists; an error when it lists none.
Result<std::vector<LocalGpu>> local_gpus(const std::string& nvml_library);

// The machine as the fitting code sees it: each GPU with what the running
// containers' state files reserve on it (a container counts while one of its
// processes lives: a tenant, its memory limit — the whole GPU when it has
// none — and its SM share when below 100).
fit::NodeDevices local_node(const std::vector<LocalGpu>& gpus,
                            const std::vector<monitor::ContainerState>& containers);

// The state root: `hook_path` when given, else /usr/local/vgpu where
// writable, else a per-user one (which must then be this user's).
struct RootChoice {
  std::string path;
  RootOwner owner;
};
RootChoice choose_state_root(const std::string& hook_path);

int run_command(const RunOptions& options);

}  // namespace hami::cli
