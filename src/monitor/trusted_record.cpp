#include "monitor/trusted_record.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "common/kv_text.hpp"
#include "common/unique_fd.hpp"

namespace hami::monitor {
namespace {

constexpr size_t kMaxRecordSize = protocol::kMaxLimitsFileSize;  // as libvgpu.so reads it

}  // namespace

Result<std::optional<uint64_t>> parse_mps_thread_percentage(const std::string& text) {
  auto v = parse_kv_text(text).find(kMpsThreadKey);
  if (!v) return std::optional<uint64_t>();
  const protocol::ContainerLimits l = protocol::parse_limits_env({{kMpsThreadKey, *v}}, {});
  if (!l.errors.empty()) return Error{l.errors[0]};
  return l.mps_threads;
}

// The library's reading of the same text, held strictly: a record is the
// plugin's and should never hold a value that cannot be read.
Result<TrustedRecord> parse_trusted_record(const std::string& text, const std::string& path) {
  protocol::ContainerLimits l = protocol::parse_limits_file(text, path);
  if (!l.errors.empty()) return Error{l.errors[0]};
  TrustedRecord r;
  r.path = path;
  r.priority = l.priority;
  r.gpu_uuids = std::move(l.device_uuids);
  r.memory_limit = l.memory_limit;
  r.sm_limit = l.sm_limit;
  r.mps_thread_percentage = l.mps_threads;
  if (!l.state_file.empty()) {
    const std::string& f = l.state_file;
    const size_t slash = f.rfind('/');
    const std::string base = slash == std::string::npos ? f : f.substr(slash + 1);
    if (base.empty() || base == "." || base == "..") {
      return Error{path + ": " + protocol::kEnvStateFile + "=" + f.substr(0, 100) +
                   ": names no file"};
    }
    r.state_file_name = base;
  }
  return r;
}

Result<std::optional<TrustedRecord>> read_trusted_record(const std::string& dir_or_file) {
  std::string path = dir_or_file;
  UniqueFd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY)};
  if (fd.get() < 0) {
    if (errno == ENOENT) return std::optional<TrustedRecord>();
    if (errno == ELOOP) return Error{path + ": a symbolic link; not trusted"};
    return Error::from_errno(path + ": cannot open");
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Error::from_errno(path + ": cannot stat");
  auto untrusted_owner = [&](const struct stat& s) -> std::optional<Error> {
    if (s.st_uid != 0 && s.st_uid != ::geteuid()) {
      return Error{path + ": owned by uid " + std::to_string(s.st_uid) +
                   ", not by root or this agent; not trusted"};
    }
    if ((s.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
      return Error{path + ": writable by group or others; not trusted"};
    }
    return std::nullopt;
  };
  if (S_ISDIR(st.st_mode)) {
    // The directory the plugin mounts; whoever could write it could swap the file.
    if (auto e = untrusted_owner(st)) return *e;
    path += std::string("/") + protocol::kLimitsFileName;
    fd = UniqueFd{::openat(fd.get(), protocol::kLimitsFileName,
                           O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY)};
    if (fd.get() < 0) {
      if (errno == ENOENT) return std::optional<TrustedRecord>();
      if (errno == ELOOP) return Error{path + ": a symbolic link; not trusted"};
      return Error::from_errno(path + ": cannot open");
    }
    if (::fstat(fd.get(), &st) != 0) return Error::from_errno(path + ": cannot stat");
  }
  if (!S_ISREG(st.st_mode)) return Error{path + ": not a regular file; not trusted"};
  if (auto e = untrusted_owner(st)) return *e;
  if (static_cast<uint64_t>(st.st_size) > kMaxRecordSize) {
    return Error{path + ": larger than 64 KiB, not a limits file"};
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n =
        ::pread(fd.get(), text.data() + done, text.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::from_errno(path + ": cannot read");
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  auto rec = parse_trusted_record(text, path);
  if (!rec) return rec.error();
  return std::optional<TrustedRecord>(std::move(*rec));
}

}  // namespace hami::monitor
