#include "region/control_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <ctime>
#include <utility>

#include "common/unique_fd.hpp"

namespace hami::region {
namespace {

Error path_error(const std::string& path, const std::string& what, int err) {
  return Error::from_errno(path + ": " + what, err);
}

// Regular, exactly our size; errors name the file.
Result<void> check_stat(const struct stat& st, const std::string& path) {
  if (!S_ISREG(st.st_mode)) return Error{path + ": not a regular file"};
  if (static_cast<uint64_t>(st.st_size) != kControlFileSize) {
    return Error{path + ": has " + std::to_string(st.st_size) + " bytes, not the " +
                 std::to_string(kControlFileSize) + " of a control file"};
  }
  return {};
}

Result<int> open_nofollow(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd >= 0) return fd;
  const int err = errno;
  if (err == ELOOP) return Error{path + ": is a symbolic link; refusing to follow it", ELOOP};
  return path_error(path, "cannot open", err);
}

}  // namespace

std::string control_file_bytes(const ControlState& state) {
  ControlLayout l{};
  l.magic = kControlMagic;
  l.version = kControlVersion;
  l.size = kControlFileSize;
  l.utilization_switch = state.utilization_switch;
  l.blocked = state.blocked;
  return std::string(reinterpret_cast<const char*>(&l), sizeof l);
}

Result<ControlState> parse_control(const void* data, size_t size, const std::string& path) {
  if (size != kControlFileSize) {
    return Error{path + ": has " + std::to_string(size) + " bytes, not the " +
                 std::to_string(kControlFileSize) + " of a control file"};
  }
  ControlLayout l{};
  std::memcpy(&l, data, sizeof l);
  if (l.magic != kControlMagic) return Error{path + ": not a control file (wrong magic)"};
  if (l.version != kControlVersion || l.size != kControlFileSize) {
    return Error{path + ": control file version " + std::to_string(l.version) + ", size " +
                 std::to_string(l.size) + "; this build reads version 1 of 64 bytes"};
  }
  return ControlState{l.utilization_switch, l.blocked};
}

Result<ControlView> ControlView::open(const std::string& path) {
  auto fd = open_nofollow(path, O_RDONLY);
  if (!fd) return fd.error();
  UniqueFd owned(*fd);
  struct stat st {};
  if (::fstat(owned.get(), &st) != 0) return path_error(path, "cannot stat", errno);
  if (auto ok = check_stat(st, path); !ok) return ok.error();
  void* mem = ::mmap(nullptr, kControlFileSize, PROT_READ, MAP_SHARED, owned.get(), 0);
  if (mem == MAP_FAILED) return path_error(path, "cannot map", errno);
  if (auto parsed = parse_control(mem, kControlFileSize, path); !parsed) {
    ::munmap(mem, kControlFileSize);
    return parsed.error();
  }
  return ControlView(path, static_cast<ControlLayout*>(mem), true);
}

ControlView ControlView::fixed(const ControlState& state) {
  auto* l = new ControlLayout{};
  l->magic = kControlMagic;
  l->version = kControlVersion;
  l->size = kControlFileSize;
  l->utilization_switch = state.utilization_switch;
  l->blocked = state.blocked;
  return ControlView("(fixed)", l, false);
}

ControlView::ControlView(ControlView&& other) noexcept
    : path_(std::move(other.path_)),
      layout_(std::exchange(other.layout_, nullptr)),
      mapped_(other.mapped_) {}

ControlView& ControlView::operator=(ControlView&& other) noexcept {
  if (this != &other) {
    this->~ControlView();
    path_ = std::move(other.path_);
    layout_ = std::exchange(other.layout_, nullptr);
    mapped_ = other.mapped_;
  }
  return *this;
}

ControlView::~ControlView() {
  if (layout_ == nullptr) return;
  if (mapped_) {
    ::munmap(layout_, kControlFileSize);
  } else {
    delete layout_;
  }
  layout_ = nullptr;
}

Result<bool> update_control(const std::string& path, const ControlState& state) {
  auto fd = open_nofollow(path, O_RDWR);
  if (!fd) return fd.error();
  UniqueFd owned(*fd);
  struct stat st {};
  if (::fstat(owned.get(), &st) != 0) return path_error(path, "cannot stat", errno);
  if (auto ok = check_stat(st, path); !ok) return ok.error();
  if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
    return Error{path + ": owned by uid " + std::to_string(st.st_uid) +
                 ", not by root or this agent; not trusted"};
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return Error{path + ": writable by group or others; not trusted"};
  }
  ControlLayout l{};
  if (::pread(owned.get(), &l, sizeof l, 0) != static_cast<ssize_t>(sizeof l)) {
    return path_error(path, "cannot read", errno);
  }
  auto current = parse_control(&l, sizeof l, path);
  if (!current) return current.error();
  if (current->utilization_switch == state.utilization_switch &&
      current->blocked == state.blocked) {
    return false;
  }
  // Only the fields change: offsets 16..32 in one write.
  struct {
    int32_t utilization_switch;
    int32_t blocked;
    uint64_t updated;
  } fields{state.utilization_switch, state.blocked, static_cast<uint64_t>(std::time(nullptr))};
  static_assert(sizeof fields == 16);
  if (::pwrite(owned.get(), &fields, sizeof fields, offsetof(ControlLayout, utilization_switch)) !=
      static_cast<ssize_t>(sizeof fields)) {
    return path_error(path, "cannot write", errno);
  }
  return true;
}

Result<void> write_control(const std::string& path, const ControlState& state) {
  auto r = update_control(path, state);
  if (!r) return r.error();
  return {};
}

}  // namespace hami::region
