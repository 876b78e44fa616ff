#include "common/small_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "common/unique_fd.hpp"

namespace hami {

Result<std::string> read_small_file(const std::string& path, size_t max_bytes) {
  UniqueFd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)};
  if (fd.get() < 0) return Error::from_errno(path + ": cannot open");
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::from_errno(path + ": cannot read");
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes) {
      return Error{path + ": larger than " + std::to_string(max_bytes) + " bytes", EFBIG};
    }
  }
}

Result<void> replace_small_file(const std::string& path, const std::string& text, mode_t mode) {
  // Unique per call: two threads may replace the same file at once.
  static std::atomic<unsigned> seq{0};
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." +
                          std::to_string(seq.fetch_add(1, std::memory_order_relaxed));
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

}  // namespace hami
