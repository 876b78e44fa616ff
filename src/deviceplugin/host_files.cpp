#include "deviceplugin/host_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "common/small_file.hpp"
#include "region/control_file.hpp"

namespace hami::deviceplugin {
namespace {

namespace fs = std::filesystem;

Result<void> make_dir(const std::string& path, fs::perms mode) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) return Error{path + ": cannot create the directory: " + ec.message(), ec.value()};
  // Explicit, not through the umask: containers run as any user.
  fs::permissions(path, mode, ec);
  if (ec) return Error{path + ": cannot set its mode: " + ec.message(), ec.value()};
  return {};
}

}  // namespace

Result<void> prepare_host(const ContainerPlan& plan) {
  std::error_code ec;
  if (!fs::is_regular_file(plan.library, ec)) {
    return Error{plan.library +
                 " is missing: the library is not installed on this node (is the device "
                 "plugin's vgpu-init done, and --hook-path right?)"};
  }
  // The GPU's MPS control daemon makes its pipe directory; without it the
  // container would start and find no server.
  if (!plan.mps_pipe_dir.empty() && !fs::is_directory(plan.mps_pipe_dir, ec)) {
    return Error{plan.mps_pipe_dir +
                 " is missing: the GPU's MPS control daemon is not running (see the device "
                 "plugin's log)"};
  }
  if (!fs::exists(plan.preload_file, ec)) {
    if (auto r = replace_small_file(plan.preload_file, plan.library + "\n", 0644); !r) return r;
  }
  const auto all = fs::perms::all;
  const auto r755 = fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                    fs::perms::others_read | fs::perms::others_exec;
  if (auto r = make_dir(plan.lock_dir, all); !r) return r;
  // A container restarted under the same name gets a fresh directory: its old
  // state file would carry the previous instance's usage.
  fs::remove_all(plan.container_dir, ec);
  if (ec) return Error{plan.container_dir + ": cannot remove the old directory: " + ec.message()};
  if (auto r = make_dir(fs::path(plan.container_dir).parent_path().string(), r755); !r) return r;
  if (auto r = make_dir(plan.container_dir, all); !r) return r;
  // A container started before resizes has its limits file where the
  // directory goes now.
  if (fs::is_regular_file(fs::symlink_status(plan.limits_dir, ec))) fs::remove(plan.limits_dir, ec);
  if (auto r = make_dir(plan.limits_dir, r755); !r) return r;
  if (auto r = replace_small_file(plan.limits_file, plan.limits_text, 0644); !r) return r;
  // A new file for each container instance: the agent's decisions for the
  // previous one do not carry over.
  if (auto r = make_dir(fs::path(plan.control_file).parent_path().string(), r755); !r) return r;
  return replace_small_file(plan.control_file, region::control_file_bytes(), 0644);
}

}  // namespace hami::deviceplugin
