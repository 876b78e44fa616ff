// One meaning of the log level in every daemon: each binary, run with
// --check-flags, reports the same level for the same words, numbers and
// klog -v (upstream's command lines pass -v=N), and refuses the same values.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/subprocess.hpp"

namespace hami::test {
namespace {

struct Daemon {
  const char* name;
  std::vector<std::string> argv;  // enough to pass --check-flags
};

std::vector<Daemon> daemons() {
  return {{"hami-scheduler", {SCHEDULER_BINARY}},
          {"hami-device-plugin", {DEVICE_PLUGIN_BINARY, "--node-name=n1"}},
          {"hami-node-agent", {AGENT_BINARY, "--node-name=n1"}}};
}

ProcessResult check(const Daemon& d, const std::vector<std::string>& flags) {
  std::vector<std::string> argv = d.argv;
  argv.push_back("--check-flags");
  argv.insert(argv.end(), flags.begin(), flags.end());
  return run_process(argv, {{"KUBECONFIG", kUnset}, {"CONFIG_FILE", kUnset}});
}

TEST(DaemonLogLevel, SameFlagsSameLevelInEveryDaemon) {
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{}, "log level 3 (info)"},
      {{"-v=4"}, "log level 4 (debug)"},
      {{"--v=2"}, "log level 3 (info)"},
      {{"--log-level=debug"}, "log level 4 (debug)"},
      {{"--log-level=4"}, "log level 4 (debug)"},
      {{"--log-level=warn"}, "log level 2 (warn)"},
      {{"--log-level=2"}, "log level 2 (warn)"},
      {{"--log-level=error"}, "log level 1 (error)"},
      {{"--log-level=0"}, "log level 0 (silent)"},
      {{"--log-level=error", "-v=4"}, "log level 4 (debug)"},
  };
  for (const Daemon& d : daemons()) {
    for (const auto& [flags, want] : cases) {
      const ProcessResult r = check(d, flags);
      const std::string what = std::string(d.name) + " " + ::testing::PrintToString(flags);
      EXPECT_EQ(r.exit_code, 0) << what << "\n" << r.err;
      EXPECT_THAT(r.out, ::testing::HasSubstr(want)) << what;
    }
  }
}

TEST(DaemonLogLevel, EveryDaemonRefusesTheSameValues) {
  for (const Daemon& d : daemons()) {
    for (const char* bad : {"--log-level=verbose", "--log-level=5", "--v=x"}) {
      const ProcessResult r = check(d, {bad});
      EXPECT_EQ(r.exit_code, 2) << d.name << " " << bad << "\n" << r.out;
      EXPECT_THAT(r.err, ::testing::HasSubstr(std::string(bad).substr(0, bad[2] == 'v' ? 3 : 11)))
          << d.name << " " << bad;
    }
  }
}

}  // namespace
}  // namespace hami::test
