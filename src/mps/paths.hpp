#pragma once
// Where one GPU's MPS control daemon keeps its pipe directory (the control
// socket clients connect to) and its log directory, below a root that the
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

}  // namespace hami::mps
