#pragma once
// What every daemon's start-up shares (hami-scheduler, hami-device-plugin,
// hami-node-agent): --help, --version, --check-flags, --log-level with one
// meaning (common/log_level.hpp), klog's -v and Go's flag spellings
// (common/go_flags.hpp), the exit codes, and exceptions turned into one line
// at the edge. Each daemon adds its own flags to app() before parse().
//
//   int main(int argc, char** argv) {
//     return hami::daemon::guarded("hami-x", [&] {
//       hami::daemon::StartUp start({.name = "hami-x", .description = "..."});
//       XFlags flags;
//       add_x_flags(start.app(), flags);
//       if (auto rc = start.parse(argc, argv)) return *rc;  // --help, --version, bad flags
//       if (auto r = validate(flags); !r) return start.usage(r.error().message);
//       if (start.check_flags()) return start.flags_ok(describe(flags));
//       return run_x(flags);
//     });
//   }

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <string_view>

#include "common/function_ref.hpp"
#include "common/log.hpp"

namespace hami::daemon {

inline constexpr int kExitOk = 0;         // stopped by SIGTERM/SIGINT, or --check-flags passed
inline constexpr int kExitCannotRun = 1;  // start-up failed (API server, NVML, a port)
inline constexpr int kExitUsage = 2;      // bad flags, config or environment

struct StartUpOptions {
  const char* name = "";         // "hami-scheduler": the log prefix and every message's
  std::string description;       // --help's first paragraph
  std::string upstream_group;    // --help's heading of upstream's flags (klog's -v among them)
  std::string check_flags_help;  // what --check-flags checks and prints
  size_t help_column = 36;
};

class StartUp {
 public:
  explicit StartUp(StartUpOptions o);
  StartUp(const StartUp&) = delete;
  StartUp& operator=(const StartUp&) = delete;

  CLI::App& app() { return app_; }
  const std::string& upstream_group() const { return o_.upstream_group; }

  // Parses the command line (Go spellings accepted) and sets up logging.
  // Returns the exit code when the process should stop now: 0 after --help
  // or --version, kExitUsage (with CLI11's message) for bad flags.
  std::optional<int> parse(int argc, char** argv);

  log::Level level() const { return level_; }
  // A daemon's own "more verbose" flag (the scheduler's --debug).
  void raise_level(log::Level l);
  bool check_flags() const { return check_flags_; }

  // "<name>: <message>" on stderr; returns kExitUsage / kExitCannotRun.
  int usage(std::string_view message) const;
  int cannot_run(std::string_view message) const;
  // --check-flags' answer: "<name>: flags ok: <summary>, log level N (word)"
  // and any further lines on stdout; returns kExitOk.
  int flags_ok(std::string_view summary, std::string_view more_lines = {}) const;

 private:
  StartUpOptions o_;
  CLI::App app_;
  std::string level_text_ = "info";
  int klog_v_ = 0;
  bool check_flags_ = false;
  log::Level level_ = log::Level::kInfo;
};

// The HTTP server flags of every daemon that serves HTTP (the scheduler's
// extender and webhook, the agent's /metrics): --http-read-timeout and
// --http-idle-timeout, durations more than zero.
void add_http_timeout_flags(CLI::App& app, std::string& read_timeout, std::string& idle_timeout);

// --http-memory-budget (a size: "128Mi"): request bodies being read and
// answers not yet sent, across all the daemon's connections, hold at most
// about this much (http::MemoryBudget). `bytes` holds the default and gets
// the value; `at_least` is the largest body a route takes, which must fit.
void add_http_memory_budget_flag(CLI::App& app, size_t& bytes, size_t at_least);

// Runs a daemon's main body; an exception that escapes it (gRPC, the
// standard library) ends the process with "<name>: <what>" and kExitCannotRun.
int guarded(const char* name, FunctionRef<int()> body);

}  // namespace hami::daemon
