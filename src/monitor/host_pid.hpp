#pragma once
// Host-PID resolution for the node agent. Each state-file slot records its
// owner's PID inside the container's PID namespace plus its start time (field
// 22 of /proc/<pid>/stat, boot-relative and so the same in every namespace).
// NVML reports host PIDs, so the node agent, which runs in the host PID
// namespace, maps every slot to a host process by reading the host's /proc:
// the process whose innermost `NSpid:` entry is the slot's PID and whose start
// time is the slot's. Slots written by upstream HAMi-core carry no start time;
// for those the pod UID found in the process's cgroup decides, and only a
// unique match counts. This replaces upstream's in-container probe (a CUDA
// context created between two NVML process lists), which guesses wrong on
// several drivers and under concurrent starts.
//
//   auto table = hami::monitor::ProcTable::scan();          // once per pass
//   auto r = hami::monitor::resolve_host_pid(table, 1, start_time, pod_uid);
//   if (r.host_pid) use(*r.host_pid); else log(r.reason());
//
// Only reads /proc; the agent writes what it resolves (monitor/state_writer.hpp).

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "region/region.hpp"

namespace hami::monitor {

// One process of the scanned PID namespace.
struct ProcEntry {
  pid_t host_pid = 0;  // the /proc directory name
  // NSpid: outermost (the /proc mount's namespace) first, innermost last.
  // Just {host_pid} when the kernel has no NSpid line.
  std::vector<pid_t> ns_pids;
  uint64_t start_time = 0;
  char state = '?';
  std::string cgroup;   // /proc/<pid>/cgroup, all lines
  std::string pod_uid;  // extracted from cgroup (dashed, lower case), "" if none

  pid_t innermost_pid() const { return ns_pids.empty() ? host_pid : ns_pids.back(); }
  bool exited() const { return state == 'Z' || state == 'X' || state == 'x'; }
};

// A snapshot of the processes under a proc root, indexed by innermost PID.
// Build it once per pass; lookups are O(log n).
class ProcTable {
 public:
  // Entries that vanish or cannot be read or parsed while scanning are skipped.
  static ProcTable scan(const std::string& proc_root = "/proc");
  // From ready-made entries (tests, benchmarks); fills pod_uid where empty.
  static ProcTable from_entries(std::vector<ProcEntry> entries);

  const std::vector<ProcEntry>& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }
  // Indices into entries() of every process whose innermost PID is `pid` and
  // whose start time is `start_time`.
  std::span<const uint32_t> with_identity(pid_t pid, uint64_t start_time) const;
  // ... and whose extracted pod_uid is `pod_uid` (normalised: dashed, lower
  // case); "" gives those whose cgroup named no recognisable pod.
  std::span<const uint32_t> with_pod(pid_t pid, std::string_view pod_uid) const;
  // The process whose host PID (its /proc directory) is `host_pid`, or null.
  const ProcEntry* find_host(pid_t host_pid) const;

 private:
  void build_index();
  std::vector<ProcEntry> entries_;
  std::vector<uint32_t> by_start_;  // entry indices sorted by (innermost PID, start time)
  std::vector<uint32_t> by_pod_;    // entry indices sorted by (innermost PID, pod_uid)
  std::vector<uint32_t> by_host_;   // entry indices sorted by host PID
};

// Parses the NSpid line out of /proc/<pid>/status text. nullopt: no NSpid line
// (kernels before 4.1). Error: a malformed line.
Result<std::optional<std::vector<pid_t>>> parse_nspid(std::string_view status_text);

// The pod UID in cgroup text: "pod" followed by at least 32 characters of
// [0-9a-fA-F_-], as kubelet writes it with either cgroup driver
// (".../pod<uid>/..." or "...-pod<uid with _>.slice/..."). Returned dashed and
// in lower case; "" when there is none.
std::string extract_pod_uid(std::string_view cgroup_text);

// Whether cgroup text names the pod: tries the UID dashed and in the systemd
// form (`-` escaped as `_`). `pod_uid` may be given in either form; "" never
// matches.
bool cgroup_mentions_pod(std::string_view cgroup_text, std::string_view pod_uid);

enum class ResolveStatus {
  kResolved,
  kNotFound,   // no live process has that PID (and start time / pod)
  kAmbiguous,  // untagged slot: several processes match; no answer
  kExited,     // the only match is a zombie: the owner has exited
  kNoHint,     // untagged slot and no pod UID to tell containers apart
};

struct Resolution {
  std::optional<pid_t> host_pid;
  ResolveStatus status = ResolveStatus::kNotFound;
  int candidates = 0;  // processes that matched (for logs)

  std::string_view reason() const;
};

// start_time 0 means "unknown" (a slot written by upstream HAMi-core): the
// cgroup must then mention `pod_uid`, and exactly one process may match.
// With a start time, a process whose cgroup names another pod never matches:
// a tenant that writes another container's PID and start time into its own
// slots must not have that container's usage counted (or killed) as its own.
Resolution resolve_host_pid(const ProcTable& table, pid_t container_pid, uint64_t start_time,
                            std::string_view pod_uid);

}  // namespace hami::monitor
