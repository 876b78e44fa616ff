// The MPS control daemon's life against the simulated nvidia-cuda-mps-control
// (tests/support/simmps): start, reuse, check, commands, stop, a killed daemon,
// a missing binary, a daemon that exits at once, one that never answers.
#include "mps/control_daemon.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "mps/paths.hpp"
#include "support/temp_dir.hpp"
#include "support/wait.hpp"

namespace hami::mps {
namespace {

using namespace std::chrono_literals;

const std::string kUuid = "GPU-8f6a1c1e-0000-4000-8000-000000000001";

// Sets an environment variable for one test (the launcher inherits it).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

bool gone(pid_t pid) {
  return ::kill(pid, 0) != 0 ||
         read_file("/proc/" + std::to_string(pid) + "/stat").find(") Z") != std::string::npos;
}

class ControlDaemonTest : public ::testing::Test {
 protected:
  DaemonOptions options() const {
    DaemonOptions o;
    o.control_binary = std::string(SIMMPS_BIN_DIR) + "/nvidia-cuda-mps-control";
    o.pipe_dir = mps_pipe_dir(dir_.path(), kUuid);
    o.log_dir = mps_log_dir(dir_.path(), kUuid);
    o.gpu_uuid = kUuid;
    o.start_timeout = 10s;
    o.stop_timeout = 5s;
    return o;
  }
  void TearDown() override {
    // Never leave a daemon behind, whatever the test did.
    auto o = options();
    o.stop_timeout = 1s;
    (void)ControlDaemon(o).stop();
  }

  test::TempDir dir_;
  std::string record_ = dir_.file("launches");
  ScopedEnv record_env_{"SIMMPS_RECORD", record_};
};

TEST(MpsPaths, PipeAndLogDirsPerGpuUnderTheRoot) {
  EXPECT_EQ(mps_pipe_dir("/usr/local/vgpu", "GPU-1").string(), "/usr/local/vgpu/mps/GPU-1/pipe");
  EXPECT_EQ(mps_log_dir("/usr/local/vgpu", "GPU-1").string(), "/usr/local/vgpu/mps/GPU-1/log");
}

TEST(MpsComputeMode, ExclusiveThreadAndProhibitedAreRefusedWithTheFix) {
  EXPECT_FALSE(compute_mode_refusal(0, kUuid));  // DEFAULT
  EXPECT_FALSE(compute_mode_refusal(3, kUuid));  // EXCLUSIVE_PROCESS
  for (const auto& [mode, name] : {std::pair{1, "EXCLUSIVE_THREAD"}, std::pair{2, "PROHIBITED"}}) {
    auto r = compute_mode_refusal(mode, kUuid);
    ASSERT_TRUE(r);
    EXPECT_NE(r->find(std::string("compute mode ") + name), std::string::npos) << *r;
    EXPECT_NE(r->find("nvidia-smi -i " + kUuid + " -c EXCLUSIVE_PROCESS"), std::string::npos) << *r;
  }
}

TEST_F(ControlDaemonTest, StartsOneDaemonPinnedToTheGpuAndItAnswers) {
  ControlDaemon d(options());
  auto s = d.start();
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(*s, Started::fresh);
  EXPECT_TRUE(d.check());
  ASSERT_TRUE(d.pid());
  EXPECT_EQ(read_file(record_), "start " + kUuid + "\n");
  struct stat st {};
  ASSERT_EQ(::stat(options().pipe_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  EXPECT_NE(read_file((options().log_dir / "control.log").string()).find("Starting control daemon"),
            std::string::npos);
}

TEST_F(ControlDaemonTest, ReusesADaemonThatAlreadyAnswers) {
  ControlDaemon first(options());
  ASSERT_TRUE(first.start());
  ControlDaemon second(options());
  auto s = second.start();
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(*s, Started::reused);
  EXPECT_EQ(count_of(read_file(record_), "start "), 1);
  EXPECT_EQ(first.pid(), second.pid());
}

// Two starters at once (two `vgpu run --sharing mps` started together): one
// starts the daemon, the other waits for it and reuses it. Without the start
// lock the second `-d` failed with "An instance of this daemon is already
// running" (seen on an H200).
TEST_F(ControlDaemonTest, TwoStartsAtOnceMakeOneDaemon) {
  ScopedEnv slow{"SIMMPS_START_DELAY_MS", "300"};  // a wide window for the race
  std::optional<Result<Started>> a, b;
  {
    std::jthread ta([&] { a = ControlDaemon(options()).start(); });
    std::jthread tb([&] { b = ControlDaemon(options()).start(); });
  }
  ASSERT_TRUE(*a) << a->error().message;
  ASSERT_TRUE(*b) << b->error().message;
  EXPECT_NE(**a, **b);  // one fresh, one reused
  EXPECT_EQ(count_of(read_file(record_), "start "), 1);
}

TEST_F(ControlDaemonTest, FindsTheBinaryInPath) {
  ScopedEnv path("PATH", std::string("/nonexistent:") + SIMMPS_BIN_DIR + ":/usr/bin:/bin");
  auto o = options();
  o.control_binary.clear();
  ControlDaemon d(o);
  auto s = d.start();
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_TRUE(d.check());
}

TEST_F(ControlDaemonTest, CommandsReachTheDaemon) {
  ControlDaemon d(options());
  ASSERT_TRUE(d.start());
  ASSERT_TRUE(d.command("set_default_active_thread_percentage 30"));
  auto got = d.command("get_default_active_thread_percentage");
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(*got, "30.0\n");
}

TEST_F(ControlDaemonTest, StopQuitsTheDaemon) {
  ControlDaemon d(options());
  ASSERT_TRUE(d.start());
  const auto pid = d.pid();
  ASSERT_TRUE(pid);
  auto stopped = d.stop();
  ASSERT_TRUE(stopped) << stopped.error().message;
  EXPECT_TRUE(test::wait_until([&] { return gone(*pid); }, 5s));
  EXPECT_FALSE(d.pid());
  EXPECT_FALSE(d.check());
  EXPECT_NE(read_file((options().log_dir / "control.log").string()).find("Cmd:quit"),
            std::string::npos);
  // Stopping again, with no daemon, is not an error.
  EXPECT_TRUE(d.stop());
}

TEST_F(ControlDaemonTest, DetectsAKilledDaemonAndStartsAFreshOne) {
  ControlDaemon d(options());
  ASSERT_TRUE(d.start());
  const auto pid = d.pid();
  ASSERT_TRUE(pid);
  ASSERT_EQ(::kill(*pid, SIGKILL), 0);
  ASSERT_TRUE(test::wait_until([&] { return gone(*pid); }, 5s));
  auto c = d.check();
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("Cannot find MPS control daemon"), std::string::npos)
      << c.error().message;
  EXPECT_FALSE(d.pid());
  // The killed daemon's pid file is still there while the new one starts
  // (slowly): its dead pid is not the new daemon dying.
  ASSERT_TRUE(std::filesystem::exists(options().pipe_dir / "nvidia-cuda-mps-control.pid"));
  ScopedEnv slow("SIMMPS_START_DELAY_MS", "300");
  auto s = d.start();
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(*s, Started::fresh);
  EXPECT_NE(d.pid(), pid);
}

TEST_F(ControlDaemonTest, AnEmptyAnswerIsNoDaemonEvenWithExitStatusZero) {
  ScopedEnv quiet("SIMMPS_CLIENT_EXIT0", "1");
  ControlDaemon d(options());
  auto c = d.check();
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("gave no thread percentage"), std::string::npos)
      << c.error().message;
  // So start() launches one instead of "reusing" nothing.
  auto s = d.start();
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(*s, Started::fresh);
  EXPECT_TRUE(d.check());
}

TEST_F(ControlDaemonTest, StopKillsADaemonThatIgnoresQuit) {
  ScopedEnv ignore("SIMMPS_IGNORE_QUIT", "1");
  auto o = options();
  o.stop_timeout = 300ms;
  ControlDaemon d(o);
  ASSERT_TRUE(d.start());
  const auto pid = d.pid();
  ASSERT_TRUE(pid);
  auto stopped = d.stop();
  ASSERT_TRUE(stopped) << stopped.error().message;
  EXPECT_TRUE(test::wait_until([&] { return gone(*pid); }, 5s));
  EXPECT_FALSE(d.check());
}

TEST_F(ControlDaemonTest, MissingBinaryIsAClearError) {
  ScopedEnv path("PATH", dir_.path());
  auto o = options();
  o.control_binary.clear();
  o.binary_setting = "--mps-control-binary";
  ControlDaemon d(o);
  auto s = d.start();
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("nvidia-cuda-mps-control not found in PATH"), std::string::npos)
      << s.error().message;
  EXPECT_NE(s.error().message.find("install the NVIDIA driver utilities"), std::string::npos);
  EXPECT_NE(s.error().message.find("--mps-control-binary"), std::string::npos);

  o.control_binary = dir_.file("nvidia-cuda-mps-control");
  auto t = ControlDaemon(o).start();
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find("not an executable file"), std::string::npos)
      << t.error().message;
}

TEST_F(ControlDaemonTest, DaemonThatExitsAtOnceQuotesItsLogAndTheComputeMode) {
  ScopedEnv fail("SIMMPS_FAIL", "exclusive_thread");
  ControlDaemon d(options());
  auto s = d.start();
  ASSERT_FALSE(s);
  const auto& m = s.error().message;
  EXPECT_NE(m.find("exited right after it started"), std::string::npos) << m;
  EXPECT_NE(m.find("compute mode EXCLUSIVE_THREAD or PROHIBITED"), std::string::npos) << m;
  EXPECT_NE(m.find("nvidia-smi -i " + kUuid + " -c EXCLUSIVE_PROCESS"), std::string::npos) << m;
}

TEST_F(ControlDaemonTest, DaemonThatNeverAnswersTimesOut) {
  ScopedEnv slow("SIMMPS_START_DELAY_MS", "3000");
  auto o = options();
  o.start_timeout = 300ms;
  ControlDaemon d(o);
  auto s = d.start();
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("did not answer on " + (o.pipe_dir / "control").string() +
                                   " within 300 ms"),
            std::string::npos)
      << s.error().message;
  // It comes up later: wait for it so that TearDown stops it.
  EXPECT_TRUE(test::wait_until([&] { return d.pid().has_value(); }, 10s));
}

TEST_F(ControlDaemonTest, RefusesAPipeDirectoryTooLongForASocket) {
  auto o = options();
  o.pipe_dir = std::filesystem::path(dir_.path()) / std::string(120, 'p');
  auto s = ControlDaemon(o).start();
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("too long for a unix socket"), std::string::npos)
      << s.error().message;
}

}  // namespace
}  // namespace hami::mps
