// The device plugin's MPS supervisor against the simulated
// nvidia-cuda-mps-control: one daemon per MPS GPU, the GPU reported down until
// its daemon answers, a killed daemon restarted (the GPU down meanwhile), a
// daemon that cannot start retried, every daemon stopped at shutdown.
#include "deviceplugin/mps_supervisor.hpp"

#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "mps/paths.hpp"
#include "support/temp_dir.hpp"
#include "support/wait.hpp"

namespace hami::deviceplugin {
namespace {

using namespace std::chrono_literals;
const std::string kA = "GPU-5a3e0000-0000-4000-8000-0000000000a1";
const std::string kB = "GPU-5a3e0000-0000-4000-8000-0000000000b2";

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool gone(pid_t pid) {
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  return stat.empty() || stat.find(") Z") != std::string::npos;
}

// What the plugin's DeviceState would hold: the last report per GPU, and all
// reports in order.
class HealthLog {
 public:
  MpsHealthFn fn() {
    return [this](const std::string& uuid, bool up, const std::string& reason) {
      std::lock_guard lk(mu_);
      up_[uuid] = up;
      events_.push_back(uuid + (up ? " up" : " down: " + reason));
    };
  }
  bool up(const std::string& uuid) const {
    std::lock_guard lk(mu_);
    const auto it = up_.find(uuid);
    return it != up_.end() && it->second;
  }
  bool known(const std::string& uuid) const {
    std::lock_guard lk(mu_);
    return up_.count(uuid) != 0;
  }
  std::vector<std::string> events() const {
    std::lock_guard lk(mu_);
    return events_;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, bool> up_;
  std::vector<std::string> events_;
};

class MpsSupervisorTest : public ::testing::Test {
 protected:
  MpsSupervisorOptions options(std::vector<std::string> uuids) const {
    MpsSupervisorOptions o;
    o.root = root_.path();
    o.gpu_uuids = std::move(uuids);
    o.control_binary = std::string(SIMMPS_BIN_DIR) + "/nvidia-cuda-mps-control";
    o.check_interval = 50ms;
    o.stop_timeout = 2s;
    o.max_backoff = 200ms;
    return o;
  }
  pid_t daemon_pid(const std::string& uuid) const {
    const std::string text =
        read_file((mps::mps_pipe_dir(root_.path(), uuid) / "nvidia-cuda-mps-control.pid").string());
    return text.empty() ? -1 : std::stoi(text);
  }
  test::TempDir root_;
  HealthLog health_;
};

TEST_F(MpsSupervisorTest, StartsOneDaemonPerGpuAndReportsItUp) {
  MpsSupervisor s(options({kA, kB}), health_.fn());
  s.start();
  ASSERT_TRUE(test::wait_until([&] { return health_.up(kA) && health_.up(kB); }, 20s));
  const pid_t a = daemon_pid(kA);
  const pid_t b = daemon_pid(kB);
  EXPECT_GT(a, 0);
  EXPECT_GT(b, 0);
  EXPECT_NE(a, b);
  // Down first ("not started yet"), then up: kubelet never sees a GPU whose
  // daemon is not running as healthy.
  const auto ev = health_.events();
  ASSERT_GE(ev.size(), 4u);
  EXPECT_EQ(ev[0], kA + " down: MPS control daemon not started yet");
  s.stop();
  EXPECT_TRUE(test::wait_until([&] { return gone(a) && gone(b); }, 5s));
}

TEST_F(MpsSupervisorTest, RestartsAKilledDaemonAndFlagsTheGpuMeanwhile) {
  MpsSupervisor s(options({kA}), health_.fn());
  s.check_once();
  ASSERT_TRUE(health_.up(kA));
  const pid_t first = daemon_pid(kA);
  ASSERT_GT(first, 0);
  ASSERT_EQ(::kill(first, SIGKILL), 0);
  ASSERT_TRUE(test::wait_until([&] { return gone(first); }, 5s));

  s.check_once();
  // Reported down with the reason, then up again with a new daemon.
  const auto ev = health_.events();
  ASSERT_GE(ev.size(), 3u);
  EXPECT_EQ(ev[ev.size() - 2].rfind(kA + " down: MPS control daemon not answering", 0), 0u)
      << ev[ev.size() - 2];
  EXPECT_EQ(ev.back(), kA + " up");
  const pid_t second = daemon_pid(kA);
  EXPECT_GT(second, 0);
  EXPECT_NE(second, first);
  EXPECT_EQ(s.restarts(kA), 1);
  s.stop();
}

TEST_F(MpsSupervisorTest, KeepsTheGpuDownWhileTheDaemonCannotStartAndRetries) {
  auto o = options({kA});
  o.control_binary = root_.file("missing/nvidia-cuda-mps-control");
  MpsSupervisor s(o, health_.fn());
  s.start();
  ASSERT_TRUE(test::wait_until([&] { return health_.events().size() >= 3; }, 10s));
  EXPECT_FALSE(health_.up(kA));
  const auto ev = health_.events();
  EXPECT_NE(ev[1].find("MPS control daemon cannot start"), std::string::npos) << ev[1];
  EXPECT_NE(ev[1].find("not an executable file"), std::string::npos) << ev[1];
  s.stop();
}

TEST_F(MpsSupervisorTest, ReusesADaemonLeftByAnEarlierRunAndStopsItAtShutdown) {
  // A daemon running in the GPU's directories, as a plugin that crashed
  // (and so never stopped it) leaves it.
  mps::DaemonOptions left;
  left.control_binary = std::string(SIMMPS_BIN_DIR) + "/nvidia-cuda-mps-control";
  left.pipe_dir = mps::mps_pipe_dir(root_.path(), kA);
  left.log_dir = mps::mps_log_dir(root_.path(), kA);
  left.gpu_uuid = kA;
  ASSERT_TRUE(mps::ControlDaemon(left).start());
  const pid_t pid = daemon_pid(kA);
  ASSERT_GT(pid, 0);

  MpsSupervisor s(options({kA}), health_.fn());
  s.check_once();
  EXPECT_TRUE(health_.up(kA));
  EXPECT_EQ(daemon_pid(kA), pid);  // the same daemon, reused
  EXPECT_EQ(s.restarts(kA), 0);
  s.stop();
  EXPECT_TRUE(test::wait_until([&] { return gone(pid); }, 5s));
}

TEST_F(MpsSupervisorTest, NoMpsGpusDoesNothing) {
  MpsSupervisor s(options({}), health_.fn());
  s.start();
  s.stop();
  EXPECT_TRUE(health_.events().empty());
}

}  // namespace
}  // namespace hami::deviceplugin
