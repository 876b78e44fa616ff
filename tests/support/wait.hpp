#pragma once
// Polling with a deadline, for tests that wait on another thread, process or
// server: never a sleep standing in for an assertion.
//
//   ASSERT_TRUE(hami::test::wait_until([&] { return kubelet.registered(); }));

#include <chrono>
#include <functional>
#include <thread>

namespace hami::test {

// Polls `pred` every `poll` until it holds (true) or `timeout` passes (false).
inline bool wait_until(const std::function<bool()>& pred,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10),
                       std::chrono::milliseconds poll = std::chrono::milliseconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(poll);
  }
  return true;
}

}  // namespace hami::test
