// The daemons' stop signals (taken synchronously, never by a handler) and the
// shutdown sequence (reverse order of start-up, each step once).
#include "common/stop_signals.hpp"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace hami::daemon {
namespace {

TEST(ShutdownSequence, StopsInReverseOrderOnce) {
  std::vector<std::string> done;
  ShutdownSequence s;
  s.add("watch", [&] { done.push_back("watch"); });
  s.add("elector", [&] { done.push_back("elector"); });
  s.add("server", [&] { done.push_back("server"); });
  s.run();
  s.run();
  EXPECT_EQ(done, (std::vector<std::string>{"server", "elector", "watch"}));
}

// Each test runs in a process of its own (gtest_discover_tests), so blocking
// signals here leaves no other test affected.
TEST(StopSignals, AStopSignalIsWaitedForNotDelivered) {
  const StopSignals signals;
  ASSERT_EQ(::raise(SIGTERM), 0);  // blocked: pending, not fatal
  EXPECT_EQ(signals.wait(), SIGTERM);
  ASSERT_EQ(::raise(SIGINT), 0);
  EXPECT_EQ(signals.wait(), SIGINT);
  ASSERT_EQ(::raise(SIGPIPE), 0);  // ignored: the process goes on
}

// SIGHUP's default action ended the node agent and the scheduler (exit 129).
TEST(StopSignals, WithoutReloadSighupIsWaitedPast) {
  const StopSignals signals;
  ASSERT_EQ(::raise(SIGHUP), 0);  // blocked: pending, not fatal
  ASSERT_EQ(::raise(SIGTERM), 0);
  EXPECT_EQ(signals.wait(), SIGTERM);
}

TEST(StopSignals, ReloadAddsSighupToTheSignalFd) {
  const StopSignals signals(/*reload=*/true);
  auto fd = signals.signal_fd();
  ASSERT_TRUE(fd) << fd.error().message;
  ASSERT_EQ(::raise(SIGHUP), 0);
  pollfd p{fd->get(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1);
  signalfd_siginfo si{};
  ASSERT_EQ(::read(fd->get(), &si, sizeof si), static_cast<ssize_t>(sizeof si));
  EXPECT_EQ(si.ssi_signo, static_cast<uint32_t>(SIGHUP));
}

}  // namespace
}  // namespace hami::daemon
