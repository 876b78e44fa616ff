#include "common/stop_signals.hpp"

#include <pthread.h>
#include <sys/signalfd.h>

#include "common/log.hpp"

namespace hami::daemon {

StopSignals::StopSignals(bool reload) : reload_(reload) {
  sigemptyset(&set_);
  sigaddset(&set_, SIGTERM);
  sigaddset(&set_, SIGINT);
  sigaddset(&set_, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set_, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
}

int StopSignals::wait() const {
  for (;;) {
    int sig = 0;
    if (sigwait(&set_, &sig) != 0) continue;
    if (sig != SIGHUP || reload_) return sig;
    log::info("SIGHUP: this daemon has nothing to reload; it carries on (SIGTERM stops it)");
  }
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
