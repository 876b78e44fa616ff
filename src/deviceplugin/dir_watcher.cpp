#include "deviceplugin/dir_watcher.hpp"

#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace hami::deviceplugin {

Result<DirWatcher> DirWatcher::open(const std::string& dir) {
  UniqueFd fd{::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)};
  if (fd.get() < 0) return Error::from_errno("inotify_init1");
  const uint32_t mask =
      IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE_SELF | IN_MOVE_SELF;
  if (::inotify_add_watch(fd.get(), dir.c_str(), mask) < 0)
    return Error::from_errno(dir + ": cannot watch the directory");
  return DirWatcher(std::move(fd));
}

std::vector<DirEvent> DirWatcher::read() {
  std::vector<DirEvent> out;
  alignas(inotify_event) char buf[16 * 1024];
  while (true) {
    const ssize_t n = ::read(fd_.get(), buf, sizeof buf);
    if (n <= 0) break;  // EAGAIN: drained
    for (ssize_t off = 0; off + static_cast<ssize_t>(sizeof(inotify_event)) <= n;) {
      inotify_event ev;
      std::memcpy(&ev, buf + off, sizeof ev);
      DirEvent e;
      if (ev.len > 0)
        e.name = std::string(buf + off + sizeof ev, strnlen(buf + off + sizeof ev, ev.len));
      e.created = (ev.mask & (IN_CREATE | IN_MOVED_TO)) != 0;
      if ((ev.mask & (IN_DELETE_SELF | IN_MOVE_SELF)) != 0) e.name.clear();
      if ((ev.mask & IN_IGNORED) == 0) out.push_back(std::move(e));
      off += static_cast<ssize_t>(sizeof(inotify_event) + ev.len);
    }
  }
  return out;
}

}  // namespace hami::deviceplugin
