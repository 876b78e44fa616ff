#include "region/ofd_lock.hpp"

#include <fcntl.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <thread>

namespace hami::region {
namespace {

struct flock make_flock(short type, off_t start, off_t len) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = start;
  fl.l_len = len;
  fl.l_pid = 0;  // must be 0 for OFD commands
  return fl;
}

short lock_type(LockMode mode) {
  return mode == LockMode::kShared ? F_RDLCK : F_WRLCK;
}

std::string range_text(off_t start, off_t len) {
  return "lock bytes [" + std::to_string(start) + ", " + std::to_string(start + len) + ")";
}

}  // namespace

Result<bool> try_lock_range(int fd, off_t start, off_t len, LockMode mode) {
  struct flock fl = make_flock(lock_type(mode), start, len);
  for (;;) {
    if (::fcntl(fd, F_OFD_SETLK, &fl) == 0) return true;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EACCES) return false;
    return Error::from_errno("cannot take " + range_text(start, len));
  }
}

Result<void> lock_range(int fd, off_t start, off_t len, LockMode mode,
                        std::chrono::steady_clock::duration timeout) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + timeout;
  // Critical sections are microseconds long and a dead holder's lock vanishes
  // with it, so short polling bounds the wait without signals or helper threads.
  auto pause = std::chrono::microseconds(20);
  for (;;) {
    auto got = try_lock_range(fd, start, len, mode);
    if (!got) return got.error();
    if (*got) return {};
    const auto now = clock::now();
    if (now >= deadline) {
      return Error{range_text(start, len) + " still held by a live process after " +
                       std::to_string(
                           std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count()) +
                       " ms",
                   ETIMEDOUT};
    }
    std::this_thread::sleep_for(std::min<clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

void unlock_range(int fd, off_t start, off_t len) {
  struct flock fl = make_flock(F_UNLCK, start, len);
  // Unlocking a range we hold cannot fail except for a bad fd; nothing to recover.
  (void)::fcntl(fd, F_OFD_SETLK, &fl);
}

Result<bool> range_locked_by_other(int fd, off_t start, off_t len, LockMode mode) {
  struct flock fl = make_flock(lock_type(mode), start, len);
  if (::fcntl(fd, F_OFD_GETLK, &fl) != 0) {
    return Error::from_errno("cannot query " + range_text(start, len));
  }
  return fl.l_type != F_UNLCK;
}

}  // namespace hami::region
