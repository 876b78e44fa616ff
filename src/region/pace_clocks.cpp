#include "region/pace_clocks.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "common/small_file.hpp"
#include "common/unique_fd.hpp"
#include "region/ofd_lock.hpp"

namespace hami::region {
namespace {

constexpr size_t kHeaderSize = offsetof(PaceClockFile, clocks);
constexpr off_t kLockLength = static_cast<off_t>(kPaceFileSize);

Error path_error(const std::string& path, const std::string& what, int err) {
  return Error::from_errno(path + ": " + what, err);
}

void set_boot_id(PaceClockFile* f, std::string_view boot_id) {
  std::memset(f->boot_id, 0, sizeof f->boot_id);
  std::memcpy(f->boot_id, boot_id.data(), std::min(boot_id.size(), sizeof f->boot_id - 1));
}

void clear_clocks(PaceClockFile* f) {
  for (PaceClock& c : f->clocks) {
    std::atomic_ref<int64_t>(c.tat_ns).store(0, std::memory_order_relaxed);
    std::atomic_ref<int64_t>(c.reserved_ns).store(0, std::memory_order_relaxed);
    std::atomic_ref<int64_t>(c.collectives).store(0, std::memory_order_relaxed);
    for (int64_t& r : c.reserved_gate)
      std::atomic_ref<int64_t>(r).store(0, std::memory_order_relaxed);
  }
}

// No live process's clock runs this far ahead (the backlog is a burst plus
// the launches of threads waiting): such a clock is left by a bug or another
// clock, and would stop every launch.
constexpr int64_t kFarAheadNs = 60'000'000'000;

void clear_far_clocks(PaceClockFile* f) {
  const int64_t limit = pace_clock_now_ns() + kFarAheadNs;
  for (PaceClock& c : f->clocks) {
    for (int64_t* field : {&c.tat_ns, &c.reserved_ns}) {
      std::atomic_ref<int64_t> t(*field);
      int64_t v = t.load(std::memory_order_relaxed);
      if (v > limit) t.compare_exchange_strong(v, 0, std::memory_order_relaxed);
    }
  }
}

// An open file's size and what its header says: opening and reading alike.
// `f` gets the whole file when it has the right size.
Result<PaceHeader> judge_file(int fd, const std::string& path, std::string_view boot_id,
                              uint64_t& size, PaceClockFile& f) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return path_error(path, "cannot stat", errno);
  if (!S_ISREG(st.st_mode)) return Error{path + ": not a regular file"};
  size = static_cast<uint64_t>(st.st_size);
  if (size == kPaceFileSize && ::pread(fd, &f, sizeof f, 0) != static_cast<ssize_t>(sizeof f)) {
    return path_error(path, "cannot read", errno);
  }
  return judge_pace_header(std::as_bytes(std::span(&f, 1)), size, boot_id, path);
}

}  // namespace

std::string current_boot_id() {
  auto text = read_small_file("/proc/sys/kernel/random/boot_id", 4096);
  if (!text) return {};
  std::string id = text->substr(0, text->find('\n'));
  if (id.size() >= kBootIdSize) id.resize(kBootIdSize - 1);
  return id;
}

int64_t pace_clock_now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

Result<PaceHeader> judge_pace_header(std::span<const std::byte> head, uint64_t file_size,
                                     std::string_view boot_id, const std::string& path) {
  if (file_size == 0) return PaceHeader::kFresh;
  if (file_size != kPaceFileSize) {
    return Error{path + ": has " + std::to_string(file_size) + " bytes, not the " +
                 std::to_string(kPaceFileSize) + " of an SM pace clock file"};
  }
  if (head.size() < kHeaderSize) return Error{path + ": cannot read the header"};
  PaceClockFile h{};
  std::memcpy(&h, head.data(), kHeaderSize);
  // The creator writes the magic last: without it nothing else was in use.
  if (h.magic == 0) return PaceHeader::kFresh;
  if (h.magic != kPaceMagic) return Error{path + ": is not an SM pace clock file (no magic)"};
  if (h.version != kPaceVersion || h.devices != static_cast<uint32_t>(kMaxDevices)) {
    return Error{path + ": SM pace clock file version " + std::to_string(h.version) + " for " +
                 std::to_string(h.devices) + " devices; this build reads version " +
                 std::to_string(kPaceVersion) + " for " + std::to_string(kMaxDevices)};
  }
  const std::string_view recorded(h.boot_id, strnlen(h.boot_id, sizeof h.boot_id));
  return recorded == boot_id ? PaceHeader::kCurrent : PaceHeader::kOtherBoot;
}

Result<std::optional<PaceSnapshot>> read_pace_clocks(const std::string& path) {
  UniqueFd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK)};
  if (fd.get() < 0) {
    if (errno == ENOENT) return std::optional<PaceSnapshot>{};
    return path_error(path, "cannot open", errno);
  }
  uint64_t size = 0;
  PaceClockFile f{};
  auto verdict = judge_file(fd.get(), path, current_boot_id(), size, f);
  if (!verdict) return verdict.error();
  PaceSnapshot snap;
  snap.this_boot = *verdict != PaceHeader::kOtherBoot;
  if (*verdict == PaceHeader::kFresh) return std::optional<PaceSnapshot>{snap};  // all zero
  for (int d = 0; d < kMaxDevices; ++d) {
    snap.tat_ns[static_cast<size_t>(d)] = f.clocks[d].tat_ns;
  }
  return std::optional<PaceSnapshot>{snap};
}

namespace {

// A fresh, initialised file put in the place of whatever has the name: made
// under a name of its own, then renamed over it, so no process ever maps a
// half-made file.
Result<void> replace_with_fresh(const std::string& path, mode_t mode) {
  const std::string tmp = path + ".new." + std::to_string(::getpid());
  ::unlink(tmp.c_str());
  UniqueFd fd{::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode)};
  if (fd.get() < 0) return path_error(tmp, "cannot create", errno);
  PaceClockFile f{};
  f.magic = kPaceMagic;
  f.version = kPaceVersion;
  f.devices = kMaxDevices;
  set_boot_id(&f, current_boot_id());
  const bool written = ::fchmod(fd.get(), mode) == 0 &&
                       ::pwrite(fd.get(), &f, sizeof f, 0) == static_cast<ssize_t>(sizeof f);
  if (!written || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return path_error(path, "cannot replace it with a fresh file", err);
  }
  return {};
}

}  // namespace

struct PaceClocks::Opened {
  PaceClockFile* file;
  dev_t dev;
  ino_t ino;
};

Result<PaceClocks::Opened> PaceClocks::open_file(const std::string& path, mode_t mode,
                                                 std::chrono::milliseconds lock_timeout, void* at) {
  const int flags = O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY;
  UniqueFd fd{::open(path.c_str(), flags | O_CREAT | O_EXCL, mode)};
  if (fd.get() >= 0) {
    if (::fchmod(fd.get(), mode) != 0) return path_error(path, "cannot set mode", errno);
  } else if (errno == EEXIST) {
    fd.reset(::open(path.c_str(), flags | O_NONBLOCK));
    if (fd.get() < 0) {
      if (errno == ELOOP) return Error{path + ": is a symbolic link; refusing to follow it", ELOOP};
      return path_error(path, "cannot open", errno);
    }
  } else {
    return path_error(path, "cannot create", errno);
  }

  // Whole-file lock while the header is judged and set: two processes
  // starting together must not both initialise.
  if (auto locked = lock_range(fd.get(), 0, kLockLength, LockMode::kExclusive, lock_timeout);
      !locked) {
    return Error{path + ": lock: " + locked.error().message, locked.error().sys_errno};
  }
  struct Unlock {
    int fd;
    ~Unlock() { unlock_range(fd, 0, kLockLength); }
  } unlock{fd.get()};

  const std::string boot = current_boot_id();
  uint64_t size = 0;
  PaceClockFile existing{};
  auto verdict = judge_file(fd.get(), path, boot, size, existing);
  if (!verdict) return verdict.error();
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return path_error(path, "cannot stat", errno);

  if (size == 0) {
    // Blocks reserved now: a full disk is an error here, not a SIGBUS at the
    // first launch.
    int rc = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(kPaceFileSize));
    if ((rc == EOPNOTSUPP || rc == EINVAL) &&
        ::ftruncate(fd.get(), static_cast<off_t>(kPaceFileSize)) == 0) {
      rc = 0;
    }
    if (rc != 0) {
      return path_error(path, "cannot allocate " + std::to_string(kPaceFileSize) + " bytes", rc);
    }
  }
  void* mem = ::mmap(at, kPaceFileSize, PROT_READ | PROT_WRITE,
                     MAP_SHARED | (at != nullptr ? MAP_FIXED : 0), fd.get(), 0);
  if (mem == MAP_FAILED) return path_error(path, "cannot map", errno);
  auto* f = static_cast<PaceClockFile*>(mem);
  switch (*verdict) {
    case PaceHeader::kFresh:
      std::memset(static_cast<void*>(f), 0, kPaceFileSize);
      f->version = kPaceVersion;
      f->devices = kMaxDevices;
      set_boot_id(f, boot);
      std::atomic_ref<uint64_t>(f->magic).store(kPaceMagic, std::memory_order_release);
      break;
    case PaceHeader::kOtherBoot:
      // The clocks count another boot's monotonic time: a value far in this
      // boot's future would stop every launch.
      clear_clocks(f);
      set_boot_id(f, boot);
      break;
    case PaceHeader::kCurrent:
      clear_far_clocks(f);
      break;
  }
  return Opened{f, st.st_dev, st.st_ino};
}

Result<PaceClocks::Opened> PaceClocks::open_or_replace(const std::string& path, mode_t mode,
                                                       std::chrono::milliseconds lock_timeout,
                                                       void* at) {
  auto opened = open_file(path, mode, lock_timeout, at);
  if (!opened && opened.error().sys_errno != EAGAIN && opened.error().sys_errno != ETIMEDOUT) {
    // Not a pace clock file (or not a file): put a fresh one in its place.
    if (auto replaced = replace_with_fresh(path, mode); !replaced) {
      return Error{opened.error().message + ", and " + replaced.error().message,
                   replaced.error().sys_errno};
    }
    opened = open_file(path, mode, lock_timeout, at);
  }
  return opened;
}

Result<PaceClocks> PaceClocks::open(const std::string& path, mode_t mode,
                                    std::chrono::milliseconds lock_timeout) {
  auto opened = open_or_replace(path, mode, lock_timeout, nullptr);
  if (!opened) return opened.error();
  return PaceClocks(path, opened->file, opened->dev, opened->ino, mode);
}

Result<bool> PaceClocks::refresh() {
  struct stat st {};
  if (file_ == nullptr) return false;
  if (::lstat(path_.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_dev == dev_ &&
      st.st_ino == ino_ && static_cast<uint64_t>(st.st_size) == kPaceFileSize)
    return false;
  auto opened = open_or_replace(path_, mode_, std::chrono::milliseconds(100), file_);
  if (!opened) return opened.error();
  dev_ = opened->dev;
  ino_ = opened->ino;
  return true;
}

PaceClocks::PaceClocks(PaceClocks&& other) noexcept
    : path_(std::move(other.path_)),
      file_(other.file_),
      dev_(other.dev_),
      ino_(other.ino_),
      mode_(other.mode_) {
  other.file_ = nullptr;
}

PaceClocks& PaceClocks::operator=(PaceClocks&& other) noexcept {
  if (this != &other) {
    if (file_ != nullptr) ::munmap(file_, kPaceFileSize);
    path_ = std::move(other.path_);
    file_ = other.file_;
    dev_ = other.dev_;
    ino_ = other.ino_;
    mode_ = other.mode_;
    other.file_ = nullptr;
  }
  return *this;
}

PaceClocks::~PaceClocks() {
  if (file_ != nullptr) ::munmap(file_, kPaceFileSize);
}

}  // namespace hami::region
