#pragma once
// `vgpu top`: a live view of a node's GPUs and of the containers sharing them,
// like nvtop for HAMi. It runs the node agent's pass read-only (it never
// writes a state file) over the state directory, with NVML when it can load
// it, and shows per GPU its memory and utilisation, and per container on it
// the memory used against the limit, the SM utilisation against the share (an
// MPS client's: "mps 30%", its thread percentage), its processes (container
// PID -> host PID) and whether it is active, blocked or capped. `--once`
// prints one frame for scripts.
//
//   NodeView v = ...;                                   // from monitor::Agent
//   std::cout << hami::cli::render_top(v, /*color=*/false);

#include <string>

#include "monitor/node_view.hpp"

namespace hami::cli {

std::string render_top(const monitor::NodeView& view);

struct TopOptions {
  std::string hook_path = "/usr/local/vgpu";
  std::string nvml_library = "libnvidia-ml.so.1";
  bool no_nvml = false;
  bool once = false;
  int interval_ms = 1000;
};

// Runs the command until SIGINT (or once). Exit codes as `vgpu inspect`.
int run_top(const TopOptions& options);

}  // namespace hami::cli
