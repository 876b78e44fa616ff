#pragma once
// Who a process is, in a way PID reuse cannot fake: its PID plus its start time
// (field 22 of /proc/<pid>/stat, clock ticks since boot). Slots record both so
// the node agent can match a slot to exactly one host process.
//
//   auto me = hami::region::self_identity();
//   auto other = hami::region::read_process_identity(1234);   // error if gone

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.hpp"

namespace hami::region {

struct ProcessIdentity {
  pid_t pid = 0;
  uint64_t start_time = 0;
  bool operator==(const ProcessIdentity&) const = default;
};

struct ProcStat {
  char state = '?';  // R, S, D, Z, X, ...
  uint64_t start_time = 0;
};

// Parses the text of /proc/<pid>/stat. The command name may contain spaces and
// parentheses, so fields are counted from the last ')'.
Result<ProcStat> parse_proc_stat(std::string_view text);

Result<ProcessIdentity> read_process_identity(pid_t pid, const std::string& proc_root = "/proc");
Result<ProcessIdentity> self_identity();

// Alive means present and neither a zombie nor dead; a process we cannot
// inspect counts as alive, so nothing live is ever reclaimed by mistake.
bool process_alive(pid_t pid, const std::string& proc_root = "/proc");

}  // namespace hami::region
