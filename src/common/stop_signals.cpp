#include "common/stop_signals.hpp"

#include <pthread.h>
#include <sys/signalfd.h>

#include "common/log.hpp"

namespace hami::daemon {

StopSignals::StopSignals(bool reload) {
  sigemptyset(&set_);
  sigaddset(&set_, SIGTERM);
  sigaddset(&set_, SIGINT);
  if (reload) sigaddset(&set_, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set_, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
}

int StopSignals::wait() const {
  int sig = 0;
  while (sigwait(&set_, &sig) != 0) {
  }
  return sig;
}

Result<UniqueFd> StopSignals::signal_fd() const {
  UniqueFd fd{::signalfd(-1, &set_, SFD_CLOEXEC | SFD_NONBLOCK)};
  if (fd.get() < 0) return Error::from_errno("signalfd");
  return fd;
}

void ShutdownSequence::add(std::string what, std::function<void()> step) {
  steps_.emplace_back(std::move(what), std::move(step));
}

void ShutdownSequence::run() {
  while (!steps_.empty()) {
    auto [what, step] = std::move(steps_.back());
    steps_.pop_back();
    log::debug("stopping %s", what.c_str());
    step();
  }
}

}  // namespace hami::daemon
