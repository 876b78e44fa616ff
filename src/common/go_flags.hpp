#pragma once
// Upstream HAMi's daemons parse their command lines with Go's flag/pflag and
// klog, and its Helm chart passes them that way: `-v=4`, `--http_bind=...`,
// `--debug`, `--leader-elect=true`, `-config-file x`. These helpers let the
// daemons' CLI11 command lines take the same spellings with the same meaning,
// so upstream's chart can run our binaries unchanged (docs/operations.md,
// "Running with upstream's chart and flags").
//
//   hami::goflags::Argv args(argc, argv);          // Go spellings → CLI11's
//   app.parse(args.argc(), args.argv());
//   log::set_level(std::max(level, hami::goflags::klog_level(v)));

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/log.hpp"
#include "common/result.hpp"

namespace hami::goflags {

// Rewrites one command line from Go's flag syntax into the one CLI11 parses
// the same way: Go takes one or two dashes for every name, so `-name`,
// `-name=value` and `-v=4` become `--name`, `--name=value` and `--v=4`.
// A single letter without `=` (`-v 4`, `-h`, pflag's `-v4`) stays a short option, and
// nothing after `--` or that does not start with a dash and a letter (values,
// negative numbers) is touched.
std::vector<std::string> normalize(const std::vector<std::string>& args);

// normalize() over main's argv, kept alive for CLI11's parse(argc, argv).
class Argv {
 public:
  Argv(int argc, const char* const* argv);
  int argc() const { return static_cast<int>(ptrs_.size()); }
  char** argv() { return ptrs_.data(); }

 private:
  std::vector<std::string> args_;
  std::vector<char*> ptrs_;
};

// klog's verbosity (`-v=N`, upstream's log flag) as our log level. klog
// always prints info, warnings and errors; N only adds detail, and upstream
// logs its debug detail at V(4) and above. So 0-3 is info, 4 and more debug.
log::Level klog_level(int v);

// The more verbose of two levels (a daemon takes the most verbose of
// --log-level, -v and --debug).
inline log::Level most_verbose(log::Level a, log::Level b) {
  return static_cast<int>(a) >= static_cast<int>(b) ? a : b;
}

// pflag's StringToString value, e.g. upstream's --node-label-selector:
// "key=value,key2=value2". Keys must not be empty; a key given twice keeps
// the last value, as pflag does. "" is an empty map.
Result<std::vector<std::pair<std::string, std::string>>> parse_string_map(std::string_view text);

// The error text for an upstream flag whose feature this build does not
// have: "FLAG: not supported by this build: WHY".
std::string not_supported(std::string_view flag, std::string_view why);

}  // namespace hami::goflags
