#pragma once
// How every daemon stops: SIGTERM and SIGINT mean an orderly shutdown. SIGHUP
// means "reload" for a daemon that reloads (only the device plugin does);
// the others log it and carry on, since its default action would end them
// (exit 129) when a terminal closes or an operator sends it by habit.
// The signals are blocked and taken synchronously (sigwait or a signalfd), so
// no handler ever runs inside the daemon's code; SIGPIPE is ignored, so a peer
// that closes while we write (OpenSSL writes without MSG_NOSIGNAL) is an
// error on that connection, not the end of the process. The shutdown
// sequence stops what start-up started, in reverse order.
//
//   hami::daemon::StopSignals signals;        // before any thread starts
//   hami::daemon::ShutdownSequence shutdown;
//   server.start();  shutdown.add("HTTPS server", [&] { server.stop(); });
//   int sig = signals.wait();                 // SIGTERM or SIGINT
//   shutdown.run();                           // server.stop(), then what came before it

#include <signal.h>

#include <functional>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "common/unique_fd.hpp"

namespace hami::daemon {

class StopSignals {
 public:
  // Blocks SIGTERM, SIGINT and SIGHUP in this thread, and so in every thread
  // started after it: construct it before any thread exists.
  explicit StopSignals(bool reload = false);
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Waits for SIGTERM or SIGINT, or SIGHUP with `reload`; returns its number.
  // Without `reload`, a SIGHUP is logged and waited past.
  int wait() const;
  // A non-blocking, close-on-exec signalfd for a poll loop; it reports SIGHUP
  // too, with or without `reload`.
  Result<UniqueFd> signal_fd() const;

 private:
  sigset_t set_;
  bool reload_;
};

class ShutdownSequence {
 public:
  // `what` names the step in the debug log ("stopping <what>").
  void add(std::string what, std::function<void()> step);
  // Runs the steps, last added first, each once.
  void run();

 private:
  std::vector<std::pair<std::string, std::function<void()>>> steps_;
};

}  // namespace hami::daemon
