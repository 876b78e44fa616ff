#pragma once
// Where one GPU's MPS control daemon keeps its pipe directory (the control
// socket clients connect to), its log directory and the shared memory
// directory of all the daemons, below a root that the
// device plugin (its hook path) and `vgpu run` (its state directory) choose.
// The device plugin's supervisor starts the daemon there and Allocate mounts
// the same pipe directory into MPS pods, so both call these functions.
//
//   auto pipe = hami::mps::mps_pipe_dir("/usr/local/vgpu", "GPU-0a1b...");
//   // "/usr/local/vgpu/mps/GPU-0a1b.../pipe"

#include <filesystem>
#include <string_view>

namespace hami::mps {

// <root>/mps/<uuid>/pipe
std::filesystem::path mps_pipe_dir(const std::filesystem::path& root, std::string_view uuid);
// <root>/mps/<uuid>/log
std::filesystem::path mps_log_dir(const std::filesystem::path& root, std::string_view uuid);
// <root>/mps/shm: the /dev/shm that MPS servers and their clients share (they
// talk through shared memory there as well as through the pipe directory).
// The device plugin's container has it as its /dev/shm, and Allocate mounts
// it at /dev/shm in MPS pods; one for all GPUs, as the plugin's one /dev/shm.
std::filesystem::path mps_shm_dir(const std::filesystem::path& root);

}  // namespace hami::mps
