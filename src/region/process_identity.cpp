#include "region/process_identity.hpp"

#include <unistd.h>

#include <cerrno>
#include <charconv>

#include "common/small_file.hpp"

namespace hami::region {
namespace {

// /proc/<pid>/stat is a few hundred bytes; anything bigger is not one.
constexpr size_t kMaxStat = 64 * 1024;

}  // namespace

Result<ProcStat> parse_proc_stat(std::string_view text) {
  const size_t close = text.rfind(')');
  if (close == std::string_view::npos) return Error{"malformed stat: no ')' after the command"};
  std::string_view rest = text.substr(close + 1);
  // Fields after the command start at field 3 (state); start time is field 22.
  ProcStat st;
  int field = 2;
  size_t pos = 0;
  while (pos < rest.size()) {
    while (pos < rest.size() && rest[pos] == ' ')
      ++pos;
    if (pos >= rest.size()) break;
    size_t end = rest.find(' ', pos);
    if (end == std::string_view::npos) end = rest.size();
    std::string_view tok = rest.substr(pos, end - pos);
    ++field;
    if (field == 3) {
      st.state = tok.empty() ? '?' : tok[0];
    } else if (field == 22) {
      while (!tok.empty() && (tok.back() == '\n' || tok.back() == '\r'))
        tok.remove_suffix(1);
      auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), st.start_time);
      if (ec != std::errc() || p != tok.data() + tok.size()) {
        return Error{"malformed stat: start time field is not a number"};
      }
      return st;
    }
    pos = end;
  }
  return Error{"malformed stat: fewer than 22 fields"};
}

Result<ProcessIdentity> read_process_identity(pid_t pid, const std::string& proc_root) {
  auto text = read_small_file(proc_root + "/" + std::to_string(pid) + "/stat", kMaxStat);
  if (!text) return text.error();
  auto st = parse_proc_stat(*text);
  if (!st) return Error{"pid " + std::to_string(pid) + ": " + st.error().message};
  return ProcessIdentity{pid, st->start_time};
}

Result<ProcessIdentity> self_identity() {
  auto text = read_small_file("/proc/self/stat", kMaxStat);
  if (!text) return text.error();
  auto st = parse_proc_stat(*text);
  if (!st) return Error{"/proc/self/stat: " + st.error().message};
  return ProcessIdentity{::getpid(), st->start_time};
}

bool process_alive(pid_t pid, const std::string& proc_root) {
  if (pid <= 0) return false;
  auto text = read_small_file(proc_root + "/" + std::to_string(pid) + "/stat", kMaxStat);
  if (!text) return text.error().sys_errno != ENOENT && text.error().sys_errno != ESRCH;
  auto st = parse_proc_stat(*text);
  if (!st) return true;
  return st->state != 'Z' && st->state != 'X' && st->state != 'x';
}

}  // namespace hami::region
