#pragma once
// The one meaning of a daemon's log level, the same in every daemon:
// --log-level takes a word (silent, error, warn, info, debug) or the number
// HAMi-core's LIBCUDA_LOG_LEVEL uses for it (0 silent, 1 error, 2 warn,
// 3 info, 4 debug); klog's -v=N, which upstream's command lines pass, means
// info for N <= 3 and debug for N >= 4 (common/go_flags.hpp), and the more
// verbose of the two wins.
//
//   auto l = hami::parse_log_level("debug");  // Level::kDebug; "4" too
//   if (!l) return usage(l.error().message);  // names the accepted values
//   std::printf("log level %s\n", hami::describe_log_level(*l).c_str());  // "4 (debug)"

#include <string>
#include <string_view>

#include "common/log.hpp"
#include "common/result.hpp"

namespace hami {

Result<log::Level> parse_log_level(std::string_view text);
// The level's name: "silent", "error", "warn", "info" or "debug".
const char* log_level_name(log::Level l);
// "<number> (<name>)", what --check-flags prints in every daemon.
std::string describe_log_level(log::Level l);

}  // namespace hami
