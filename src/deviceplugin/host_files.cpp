#include "deviceplugin/host_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "common/unique_fd.hpp"
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

Result<void> write_whole(const std::string& path, const std::string& text, mode_t mode) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  UniqueFd fd{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode)};
  if (fd.get() < 0) return Error::from_errno(tmp + ": cannot create");
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0) {
      const int err = errno;
      ::unlink(tmp.c_str());
      return Error::from_errno(tmp + ": cannot write", err);
    }
    done += static_cast<size_t>(n);
  }
  if (::fchmod(fd.get(), mode) != 0 || ::fsync(fd.get()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return Error::from_errno(tmp + ": cannot finish", err);
  }
  fd.reset();
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return Error::from_errno(path + ": cannot rename into place", err);
  }
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
    if (auto r = write_whole(plan.preload_file, plan.library + "\n", 0644); !r) return r;
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
  if (auto r = make_dir(fs::path(plan.limits_file).parent_path().string(), r755); !r) return r;
  if (auto r = write_whole(plan.limits_file, plan.limits_text, 0644); !r) return r;
  // A new file for each container instance: the agent's decisions for the
  // previous one do not carry over.
  if (auto r = make_dir(fs::path(plan.control_file).parent_path().string(), r755); !r) return r;
  return write_whole(plan.control_file, region::control_file_bytes(), 0644);
}

}  // namespace hami::deviceplugin
