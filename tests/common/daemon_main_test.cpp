// The daemons' shared start-up, in process: one meaning of --log-level and
// klog's -v, the exit codes for --help, --version and bad flags, and
// --check-flags' line.
#include "common/daemon_main.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace hami::daemon {
namespace {

using ::testing::HasSubstr;

struct Parsed {
  std::optional<int> rc;
  log::Level level = log::Level::kInfo;
  bool check_flags = false;
};

Parsed parse(std::vector<std::string> args) {
  StartUp start({.name = "hami-test", .description = "test", .upstream_group = "Upstream"});
  args.insert(args.begin(), "hami-test");
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  Parsed p;
  p.rc = start.parse(static_cast<int>(argv.size()), argv.data());
  p.level = start.level();
  p.check_flags = start.check_flags();
  return p;
}

TEST(StartUp, LogLevelWordsNumbersAndKlogAgree) {
  EXPECT_EQ(parse({}).level, log::Level::kInfo);
  EXPECT_EQ(parse({"--log-level=debug"}).level, log::Level::kDebug);
  EXPECT_EQ(parse({"--log-level", "4"}).level, log::Level::kDebug);
  EXPECT_EQ(parse({"-v=4"}).level, log::Level::kDebug);
  EXPECT_EQ(parse({"-v", "9"}).level, log::Level::kDebug);
  EXPECT_EQ(parse({"--v=2"}).level, log::Level::kInfo);
  EXPECT_EQ(parse({"--log-level=warn"}).level, log::Level::kWarn);
  EXPECT_EQ(parse({"--log-level=2"}).level, log::Level::kWarn);
  EXPECT_EQ(parse({"--log-level=0"}).level, log::Level::kSilent);
  // The more verbose of --log-level and -v wins.
  EXPECT_EQ(parse({"--log-level=error", "-v=4"}).level, log::Level::kDebug);
  EXPECT_EQ(parse({"--log-level=debug", "-v=1"}).level, log::Level::kDebug);
  EXPECT_EQ(parse({"--log-level=error", "-v=1"}).level, log::Level::kInfo);
  EXPECT_EQ(log::level(), log::Level::kInfo);  // set up by the last parse
}

TEST(StartUp, GoSpellingsAndCheckFlags) {
  const Parsed p = parse({"-log-level=debug", "-check-flags"});
  EXPECT_FALSE(p.rc);
  EXPECT_EQ(p.level, log::Level::kDebug);
  EXPECT_TRUE(p.check_flags);
}

TEST(StartUp, ExitCodes) {
  EXPECT_EQ(parse({"--log-level=verbose"}).rc, kExitUsage);
  EXPECT_EQ(parse({"--no-such-flag"}).rc, kExitUsage);
  EXPECT_EQ(parse({"--v=-1"}).rc, kExitUsage);
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(parse({"--version"}).rc, kExitOk);
  EXPECT_FALSE(::testing::internal::GetCapturedStdout().empty());
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(parse({"--help"}).rc, kExitOk);
  const std::string help = ::testing::internal::GetCapturedStdout();
  EXPECT_THAT(help, HasSubstr("--log-level"));
  EXPECT_THAT(help, HasSubstr("--check-flags"));
  EXPECT_THAT(help, HasSubstr("Upstream"));
}

TEST(StartUp, FlagsOkEndsWithTheLevel) {
  StartUp start({.name = "hami-test"});
  std::vector<std::string> args = {"hami-test", "--log-level=warn"};
  std::vector<char*> argv = {args[0].data(), args[1].data()};
  ASSERT_FALSE(start.parse(2, argv.data()));
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(start.flags_ok("node n", "more\n"), kExitOk);
  EXPECT_EQ(::testing::internal::GetCapturedStdout(),
            "hami-test: flags ok: node n, log level 2 (warn)\nmore\n");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(start.usage("--x: bad"), kExitUsage);
  EXPECT_EQ(start.cannot_run("no API server"), kExitCannotRun);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "hami-test: --x: bad\nhami-test: no API server\n");
}

TEST(HttpMemoryBudgetFlag, TakesSizesNoSmallerThanTheLargestBody) {
  auto budget = [](std::vector<std::string> args) -> std::pair<std::optional<int>, size_t> {
    StartUp start({.name = "hami-test"});
    size_t bytes = 128u << 20;
    add_http_memory_budget_flag(start.app(), bytes, 16u << 20);
    args.insert(args.begin(), "hami-test");
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    ::testing::internal::CaptureStderr();
    auto rc = start.parse(static_cast<int>(argv.size()), argv.data());
    ::testing::internal::GetCapturedStderr();
    return {rc, bytes};
  };
  EXPECT_EQ(budget({}), std::pair(std::optional<int>(), size_t{128} << 20)) << "the default";
  EXPECT_EQ(budget({"--http-memory-budget=64Mi"}).second, size_t{64} << 20);
  EXPECT_EQ(budget({"--http-memory-budget", "1g"}).second, size_t{1} << 30);
  EXPECT_EQ(budget({"--http-memory-budget=8Mi"}).first, kExitUsage) << "below the largest body";
  EXPECT_EQ(budget({"--http-memory-budget=lots"}).first, kExitUsage);
}

TEST(Guarded, AnEscapedExceptionIsOneLineAndExitOne) {
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(guarded("hami-test", []() -> int { throw std::runtime_error("gRPC: boom"); }),
            kExitCannotRun);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "hami-test: gRPC: boom\n");
  EXPECT_EQ(guarded("hami-test", [] { return 7; }), 7);
}

}  // namespace
}  // namespace hami::daemon
