#include "mps/paths.hpp"

#include <string>

namespace hami::mps {

std::filesystem::path mps_pipe_dir(const std::filesystem::path& root, std::string_view uuid) {
  return root / "mps" / std::string(uuid) / "pipe";
}

std::filesystem::path mps_log_dir(const std::filesystem::path& root, std::string_view uuid) {
  return root / "mps" / std::string(uuid) / "log";
}

}  // namespace hami::mps
