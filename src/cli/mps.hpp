#pragma once
// `vgpu run --sharing mps` and `vgpu mps`: the MPS control daemon of one GPU of
// this machine, kept under the state root as <root>/mps/<gpu-uuid>/{pipe,log}
// (the device plugin keeps its daemons under its hook path the same way, so on
// a node both find the same daemon). `vgpu run` starts it or reuses it and
// leaves it running for the next job; `vgpu mps stop` stops it and `vgpu mps
// status` says which daemons answer.
//
//   vgpu run --sharing mps --memory 4g --cores 30 -- python serve.py
//   vgpu mps status
//   vgpu mps stop --gpu 0

#include <string>
#include <utility>
#include <vector>

#include "common/result.hpp"
#include "mps/control_daemon.hpp"

namespace hami::cli {

// The daemon for GPU `uuid` under the state root `root`.
mps::DaemonOptions cli_daemon_options(const std::string& root, const std::string& uuid,
                                      const std::string& control_binary);

// Starts or reuses that daemon and returns the environment that makes a
// command its client: CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY, and
// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE (cores > 0) and
// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=<MiB>M (memory > 0) for its shares.
Result<std::vector<std::pair<std::string, std::string>>> mps_client_env(
    const std::string& root, const std::string& uuid, const std::string& control_binary, int cores,
    uint64_t memory);

struct MpsOptions {
  std::string gpu;        // index or UUID; empty: every daemon under the root
  std::string hook_path;  // state root; empty: as `vgpu run` chooses it
  std::string nvml_library = "libnvidia-ml.so.1";  // to turn an index into a UUID
  std::string control_binary;                      // empty: from PATH
};

int run_mps_stop(const MpsOptions& options);
int run_mps_status(const MpsOptions& options);

}  // namespace hami::cli
