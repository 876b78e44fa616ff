#include "common/daemon_main.hpp"

#include <exception>
#include <iostream>
#include <utility>

#include "common/build_info.hpp"
#include "common/duration_flag.hpp"
#include "common/go_flags.hpp"
#include "common/log_level.hpp"
#include "common/size_parse.hpp"

namespace hami::daemon {

StartUp::StartUp(StartUpOptions o) : o_(std::move(o)), app_(o_.description) {
  log::set_component(o_.name);
  app_.set_version_flag("--version", std::string(build_info().version));
  app_.get_formatter()->column_width(o_.help_column);
  app_.add_option("--log-level", level_text_,
                  "error, warn, info, debug or silent; or LIBCUDA_LOG_LEVEL's numbers 1, 2, 3, "
                  "4, 0. The same in every daemon; the more verbose of this and -v wins")
      ->check([](const std::string& v) {
        auto l = parse_log_level(v);
        return l ? std::string() : l.error().message;
      })
      ->capture_default_str();
  app_.add_flag("--check-flags", check_flags_,
                o_.check_flags_help.empty()
                    ? "Validate the flags, files and environment, print what would run, exit 0 "
                      "(2 if bad); contacts nothing"
                    : o_.check_flags_help);
  app_.add_option("-v,--v", klog_v_, "klog verbosity: 0-3 log as info, 4 and more as debug")
      ->check(CLI::Range(0, 1000))
      ->group(o_.upstream_group);
}

std::optional<int> StartUp::parse(int argc, char** argv) {
  try {
    goflags::Argv args(argc, argv);
    app_.parse(args.argc(), args.argv());
  } catch (const CLI::ParseError& e) {
    const int rc = app_.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  level_ = *parse_log_level(level_text_);  // the option's check refused anything else
  if (app_.count("--v") > 0) level_ = goflags::most_verbose(level_, goflags::klog_level(klog_v_));
  log::set_level(level_);
  return std::nullopt;
}

void StartUp::raise_level(log::Level l) {
  level_ = goflags::most_verbose(level_, l);
  log::set_level(level_);
}

int StartUp::usage(std::string_view message) const {
  std::cerr << o_.name << ": " << message << "\n";
  return kExitUsage;
}

int StartUp::cannot_run(std::string_view message) const {
  std::cerr << o_.name << ": " << message << "\n";
  return kExitCannotRun;
}

int StartUp::flags_ok(std::string_view summary, std::string_view more_lines) const {
  std::cout << o_.name << ": flags ok: " << summary << ", log level " << describe_log_level(level_)
            << "\n"
            << more_lines;
  std::cout.flush();
  return kExitOk;
}

void add_http_timeout_flags(CLI::App& app, std::string& read_timeout, std::string& idle_timeout) {
  app.add_option("--http-read-timeout", read_timeout,
                 "A request must arrive whole within this of its first byte")
      ->check(duration_flag())
      ->capture_default_str();
  app.add_option("--http-idle-timeout", idle_timeout,
                 "A kept-alive connection idle for this long is closed")
      ->check(duration_flag())
      ->capture_default_str();
}

void add_http_memory_budget_flag(CLI::App& app, size_t& bytes, size_t at_least) {
  const std::string shown = std::to_string(bytes >> 20) + "Mi";
  app.add_option("--http-memory-budget", bytes,
                 "Request bodies being read and answers not yet sent hold at most this much "
                 "memory across all connections (a size: 128Mi); a request finding no room gets "
                 "503")
      ->transform(CLI::Validator(
          [at_least](std::string& s) -> std::string {
            auto b = parse_size(s);
            if (!b) return b.error().message;
            if (*b < at_least) {
              return "must be at least " + std::to_string(at_least >> 20) +
                     "Mi, the largest request body this daemon takes";
            }
            s = std::to_string(*b);
            return {};
          },
          "SIZE"))
      ->default_str(shown);
}

int guarded(const char* name, FunctionRef<int()> body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::cerr << name << ": " << e.what() << "\n";
    return kExitCannotRun;
  }
}

}  // namespace hami::daemon
