#pragma once
// Watches kubelet's device-plugins directory with inotify, so the daemon sees
// kubelet restart: kubelet removes every socket there (ours included) and
// creates kubelet.sock anew, after which plugins must serve again and
// re-register. The descriptor is meant for poll() beside others.
//
//   auto w = DirWatcher::open("/var/lib/kubelet/device-plugins");
//   poll({w->fd(), POLLIN}, ...);
//   for (auto& e : w->read()) if (e.name == "kubelet.sock" && e.created) ...

#include <string>
#include <vector>

#include "common/result.hpp"
#include "common/unique_fd.hpp"

namespace hami::deviceplugin {

struct DirEvent {
  std::string name;      // file name within the directory; empty for the directory itself
  bool created = false;  // created or moved in; otherwise deleted or moved out
};

class DirWatcher {
 public:
  static Result<DirWatcher> open(const std::string& dir);
  int fd() const { return fd_.get(); }
  // Whatever events are queued now; never blocks.
  std::vector<DirEvent> read();

 private:
  explicit DirWatcher(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

}  // namespace hami::deviceplugin
