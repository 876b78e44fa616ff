#include "common/small_file.hpp"

#include <fcntl.h>
#include <unistd.h>

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

}  // namespace hami
