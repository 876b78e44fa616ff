#include "cli/state_dir.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

namespace hami::cli {
namespace {

constexpr int kMaxDepth = 32;

Error sys_error(const std::string& what, int err) {
  return Error::from_errno(what, err);
}

// Opens an existing directory entry of `dirfd` without following a link.
Result<int> open_dir_at(int dirfd, const char* name, const std::string& shown) {
  const int fd = ::openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) return fd;
  const int err = errno;
  if (err == ELOOP || err == ENOTDIR) {
    return Error{shown + " is a symbolic link or not a directory; refusing to use it"};
  }
  return sys_error(shown + ": cannot open", err);
}

Result<void> check_mine(int fd, const std::string& shown) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return sys_error(shown + ": cannot stat", errno);
  if (st.st_uid != ::geteuid()) {
    return Error{shown + " belongs to uid " + std::to_string(st.st_uid) +
                 ", not to you; someone else may control what is in it. Remove it, or "
                 "pass --hook-path (or set XDG_RUNTIME_DIR)"};
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return Error{shown +
                 " is writable by others; refusing to use it. Remove it, or pass "
                 "--hook-path (or set XDG_RUNTIME_DIR)"};
  }
  return {};
}

std::string random_id() {
  std::random_device rd;
  char buf[40];
  std::snprintf(buf, sizeof buf, "local-%08x-%04x", rd(), rd() & 0xffff);
  return buf;
}

// Empties the directory open at `fd` (which it closes), never following links.
Result<void> remove_contents(int fd, const std::string& shown, int depth) {
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    const int err = errno;
    ::close(fd);
    return sys_error(shown + ": cannot list", err);
  }
  Result<void> result;
  const int dfd = ::dirfd(d);
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    if (::fstatat(dfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      if (depth >= kMaxDepth) {
        result = Error{shown + "/" + name + ": nested deeper than 32 levels; left in place"};
        continue;
      }
      auto sub = open_dir_at(dfd, name.c_str(), shown + "/" + name);
      if (!sub) {
        result = sub.error();
        continue;
      }
      if (auto r = remove_contents(*sub, shown + "/" + name, depth + 1); !r) result = r.error();
      if (::unlinkat(dfd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
        result = sys_error(shown + "/" + name + ": cannot remove", errno);
    } else if (::unlinkat(dfd, name.c_str(), 0) != 0 && errno != ENOENT) {
      result = sys_error(shown + "/" + name + ": cannot remove", errno);
    }
  }
  ::closedir(d);
  return result;
}

}  // namespace

bool valid_job_name(std::string_view name) {
  if (name.empty() || name.size() > 63 || name[0] == '.' || name[0] == '-') return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

Result<StateRoot> open_state_root(const std::string& path, RootOwner owner) {
  if (path.empty()) return Error{"the state root is empty"};
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    return sys_error("cannot create " + path, errno);
  }
  // The root itself: as given when the user names it (their choice), but a
  // per-user default in a shared place like /tmp must be ours, not a link.
  const int flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | (owner == RootOwner::kMe ? O_NOFOLLOW : 0);
  UniqueFd root{::open(path.c_str(), flags)};
  if (root.get() < 0) {
    const int err = errno;
    if (err == ELOOP || err == ENOTDIR) {
      return Error{path +
                   " is a symbolic link or not a directory; refusing to use it. Remove "
                   "it, or pass --hook-path (or set XDG_RUNTIME_DIR)"};
    }
    return sys_error(path + ": cannot open", err);
  }
  if (owner == RootOwner::kMe) {
    if (auto ok = check_mine(root.get(), path); !ok) return ok.error();
  }
  const std::string containers = path + "/containers";
  if (::mkdirat(root.get(), "containers", 0755) != 0 && errno != EEXIST) {
    return sys_error("cannot create " + containers, errno);
  }
  auto fd = open_dir_at(root.get(), "containers", containers);
  if (!fd) return fd.error();
  StateRoot out{path, UniqueFd(*fd)};
  if (owner == RootOwner::kMe) {
    if (auto ok = check_mine(out.containers.get(), containers); !ok) return ok.error();
  }
  return out;
}

std::string JobDir::path() const {
  return "/proc/self/fd/" + std::to_string(fd.get());
}

Result<JobDir> make_job_dir(const StateRoot& root, const std::string& name) {
  if (!valid_job_name(name)) {
    return Error{"--name '" + name.substr(0, 80) +
                 "': use 1-63 letters, digits, '.', '_' or '-', not starting with '.' or '-' "
                 "(it names a directory under " +
                 root.path + "/containers)"};
  }
  for (int attempt = 0; attempt < 8; ++attempt) {
    const std::string dir = random_id() + "_" + name;
    if (::mkdirat(root.containers.get(), dir.c_str(), 0700) != 0) {
      if (errno == EEXIST) continue;
      return sys_error("cannot create " + root.path + "/containers/" + dir, errno);
    }
    auto fd = open_dir_at(root.containers.get(), dir.c_str(), root.path + "/containers/" + dir);
    if (!fd) return fd.error();
    JobDir job{dir, UniqueFd(*fd), root.path + "/containers"};
    // The command may run as another user (sudo -u): it must create its state there.
    if (::fchmod(job.fd.get(), 0777) != 0) {
      return sys_error("cannot set the mode of " + job.named_path(), errno);
    }
    return job;
  }
  return Error{"cannot find a free job directory name under " + root.path + "/containers"};
}

Result<void> remove_job_dir(const StateRoot& root, const JobDir& job) {
  const int copy = ::fcntl(job.fd.get(), F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return sys_error(job.named_path() + ": cannot remove", errno);
  // Rewind: a duplicate shares the position of a directory listed before.
  ::lseek(copy, 0, SEEK_SET);
  Result<void> result = remove_contents(copy, job.named_path(), 1);
  struct stat made {
  }, now{};
  if (::fstat(job.fd.get(), &made) == 0 &&
      ::fstatat(root.containers.get(), job.name.c_str(), &now, AT_SYMLINK_NOFOLLOW) == 0 &&
      made.st_dev == now.st_dev && made.st_ino == now.st_ino) {
    if (::unlinkat(root.containers.get(), job.name.c_str(), AT_REMOVEDIR) != 0) {
      result = sys_error(job.named_path() + ": cannot remove", errno);
    }
  }
  return result;
}

}  // namespace hami::cli
