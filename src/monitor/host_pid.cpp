#include "monitor/host_pid.hpp"

#include <dirent.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <memory>

#include "common/small_file.hpp"
#include "region/process_identity.hpp"

namespace hami::monitor {
namespace {

// /proc/<pid>/stat is a few hundred bytes and status about 1.5 KiB; cgroup is a
// line per v1 hierarchy. Anything bigger is not what we expect, and skipped.
constexpr size_t kMaxStat = 16 * 1024;
constexpr size_t kMaxStatus = 64 * 1024;
constexpr size_t kMaxCgroup = 64 * 1024;
// Kubelet's pod UIDs are 36-character UUIDs; static pods use a 32-digit hash.
constexpr size_t kMinPodUidLength = 32;

std::optional<pid_t> parse_pid(std::string_view s) {
  pid_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v <= 0) return std::nullopt;
  return v;
}

bool is_uid_char(char c) {
  return std::isxdigit(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_';
}

// Strips an optional "pod" prefix, turns '_' into '-' and lowers the case.
std::string normalize_pod_uid(std::string_view uid) {
  if (uid.starts_with("pod")) uid.remove_prefix(3);
  std::string out(uid);
  for (char& c : out) {
    if (c == '_') c = '-';
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

std::optional<ProcEntry> read_entry(const std::string& proc_root, pid_t pid) {
  const std::string dir = proc_root + "/" + std::to_string(pid);
  auto stat_text = read_small_file(dir + "/stat", kMaxStat);
  if (!stat_text) return std::nullopt;
  auto st = region::parse_proc_stat(*stat_text);
  if (!st) return std::nullopt;

  auto status_text = read_small_file(dir + "/status", kMaxStatus);
  if (!status_text) return std::nullopt;
  auto chain = parse_nspid(*status_text);
  if (!chain) return std::nullopt;

  ProcEntry e;
  e.host_pid = pid;
  e.start_time = st->start_time;
  e.state = st->state;
  if (chain->has_value()) {
    e.ns_pids = std::move(**chain);
    // NSpid starts at the namespace of the proc mount, which names the directory.
    if (e.ns_pids.front() != pid) return std::nullopt;
  } else {
    e.ns_pids = {pid};
  }
  // A cgroup file we cannot read only costs the untagged fallback.
  if (auto cg = read_small_file(dir + "/cgroup", kMaxCgroup)) e.cgroup = std::move(*cg);
  e.pod_uid = extract_pod_uid(e.cgroup);
  return e;
}

}  // namespace

Result<std::optional<std::vector<pid_t>>> parse_nspid(std::string_view status_text) {
  constexpr std::string_view kKey = "NSpid:";
  size_t pos = 0;
  while (pos < status_text.size()) {
    size_t eol = status_text.find('\n', pos);
    if (eol == std::string_view::npos) eol = status_text.size();
    std::string_view line = status_text.substr(pos, eol - pos);
    pos = eol + 1;
    if (!line.starts_with(kKey)) continue;
    line.remove_prefix(kKey.size());
    std::vector<pid_t> pids;
    size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
        ++i;
      if (i >= line.size()) break;
      size_t end = i;
      while (end < line.size() && line[end] != ' ' && line[end] != '\t' && line[end] != '\r')
        ++end;
      auto v = parse_pid(line.substr(i, end - i));
      if (!v) return Error{"malformed NSpid line: not a PID"};
      pids.push_back(*v);
      i = end;
    }
    if (pids.empty()) return Error{"malformed NSpid line: empty"};
    return std::optional<std::vector<pid_t>>(std::move(pids));
  }
  return std::optional<std::vector<pid_t>>();
}

std::string extract_pod_uid(std::string_view cgroup_text) {
  size_t pos = 0;
  while ((pos = cgroup_text.find("pod", pos)) != std::string_view::npos) {
    size_t begin = pos + 3;
    size_t end = begin;
    while (end < cgroup_text.size() && is_uid_char(cgroup_text[end]))
      ++end;
    const bool terminated = end == cgroup_text.size() || cgroup_text[end] == '/' ||
                            cgroup_text[end] == '.' || cgroup_text[end] == '\n';
    if (terminated && end - begin >= kMinPodUidLength) {
      return normalize_pod_uid(cgroup_text.substr(begin, end - begin));
    }
    pos = begin;
  }
  return {};
}

bool cgroup_mentions_pod(std::string_view cgroup_text, std::string_view pod_uid) {
  if (pod_uid.starts_with("pod")) pod_uid.remove_prefix(3);
  if (pod_uid.empty()) return false;
  std::string dashed(pod_uid);
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  std::string escaped(pod_uid);
  std::replace(escaped.begin(), escaped.end(), '-', '_');
  return cgroup_text.find("pod" + dashed) != std::string_view::npos ||
         cgroup_text.find("pod" + escaped) != std::string_view::npos;
}

ProcTable ProcTable::scan(const std::string& proc_root) {
  ProcTable t;
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(proc_root.c_str()), &::closedir);
  if (dir) {
    while (const dirent* d = ::readdir(dir.get())) {
      auto pid = parse_pid(d->d_name);
      if (!pid) continue;
      if (auto e = read_entry(proc_root, *pid)) t.entries_.push_back(std::move(*e));
    }
  }
  t.build_index();
  return t;
}

ProcTable ProcTable::from_entries(std::vector<ProcEntry> entries) {
  ProcTable t;
  t.entries_ = std::move(entries);
  for (auto& e : t.entries_) {
    if (e.ns_pids.empty()) e.ns_pids = {e.host_pid};
    if (e.pod_uid.empty()) e.pod_uid = extract_pod_uid(e.cgroup);
  }
  t.build_index();
  return t;
}

void ProcTable::build_index() {
  by_start_.resize(entries_.size());
  for (size_t i = 0; i < entries_.size(); ++i)
    by_start_[i] = static_cast<uint32_t>(i);
  by_pod_ = by_start_;
  by_host_ = by_start_;
  std::sort(by_host_.begin(), by_host_.end(),
            [this](uint32_t a, uint32_t b) { return entries_[a].host_pid < entries_[b].host_pid; });
  std::sort(by_start_.begin(), by_start_.end(), [this](uint32_t a, uint32_t b) {
    const ProcEntry& x = entries_[a];
    const ProcEntry& y = entries_[b];
    return std::pair(x.innermost_pid(), x.start_time) < std::pair(y.innermost_pid(), y.start_time);
  });
  std::sort(by_pod_.begin(), by_pod_.end(), [this](uint32_t a, uint32_t b) {
    const ProcEntry& x = entries_[a];
    const ProcEntry& y = entries_[b];
    if (x.innermost_pid() != y.innermost_pid()) return x.innermost_pid() < y.innermost_pid();
    return x.pod_uid < y.pod_uid;
  });
}

const ProcEntry* ProcTable::find_host(pid_t host_pid) const {
  const auto it = std::partition_point(by_host_.begin(), by_host_.end(),
                                       [&](uint32_t i) { return entries_[i].host_pid < host_pid; });
  return it != by_host_.end() && entries_[*it].host_pid == host_pid ? &entries_[*it] : nullptr;
}

std::span<const uint32_t> ProcTable::with_identity(pid_t pid, uint64_t start_time) const {
  const auto key = std::pair(pid, start_time);
  const auto lo = std::partition_point(by_start_.begin(), by_start_.end(), [&](uint32_t i) {
    return std::pair(entries_[i].innermost_pid(), entries_[i].start_time) < key;
  });
  const auto hi = std::partition_point(lo, by_start_.end(), [&](uint32_t i) {
    return std::pair(entries_[i].innermost_pid(), entries_[i].start_time) == key;
  });
  return {lo, hi};
}

std::span<const uint32_t> ProcTable::with_pod(pid_t pid, std::string_view pod_uid) const {
  const auto before = [&](uint32_t i) {
    const ProcEntry& e = entries_[i];
    if (e.innermost_pid() != pid) return e.innermost_pid() < pid;
    return std::string_view(e.pod_uid) < pod_uid;
  };
  const auto lo = std::partition_point(by_pod_.begin(), by_pod_.end(), before);
  const auto hi = std::partition_point(lo, by_pod_.end(), [&](uint32_t i) {
    return entries_[i].innermost_pid() == pid && entries_[i].pod_uid == pod_uid;
  });
  return {lo, hi};
}

std::string_view Resolution::reason() const {
  switch (status) {
    case ResolveStatus::kResolved:
      return "resolved";
    case ResolveStatus::kNotFound:
      return "no matching process";
    case ResolveStatus::kAmbiguous:
      return "several processes match";
    case ResolveStatus::kExited:
      return "the process has exited";
    case ResolveStatus::kNoHint:
      return "untagged slot and no pod UID to match";
  }
  return "unknown";
}

Resolution resolve_host_pid(const ProcTable& table, pid_t container_pid, uint64_t start_time,
                            std::string_view pod_uid) {
  Resolution r;
  if (container_pid <= 0) return r;
  const std::string norm_hint = normalize_pod_uid(pod_uid);
  if (start_time == 0) {
    if (norm_hint.empty()) {
      r.status = ResolveStatus::kNoHint;
      return r;
    }
  }
  const ProcEntry* match = nullptr;
  const auto count = [&](std::span<const uint32_t> idx, auto&& keep) {
    for (uint32_t i : idx) {
      const ProcEntry& e = table.entries()[i];
      if (!keep(e)) continue;
      ++r.candidates;
      match = &e;
    }
  };
  const auto all = [](const ProcEntry&) { return true; };
  if (start_time != 0) {
    count(table.with_identity(container_pid, start_time), [&](const ProcEntry& e) {
      return norm_hint.empty() || e.pod_uid.empty() || e.pod_uid == norm_hint;
    });
  } else {
    count(table.with_pod(container_pid, norm_hint), all);
    // Processes whose cgroup named no pod we recognise: match the text.
    count(table.with_pod(container_pid, ""),
          [&](const ProcEntry& e) { return cgroup_mentions_pod(e.cgroup, norm_hint); });
  }
  if (r.candidates == 0) {
    r.status = ResolveStatus::kNotFound;
  } else if (r.candidates > 1) {
    r.status = ResolveStatus::kAmbiguous;
  } else if (match->exited()) {
    r.status = ResolveStatus::kExited;
  } else {
    r.status = ResolveStatus::kResolved;
    r.host_pid = match->host_pid;
  }
  return r;
}

}  // namespace hami::monitor
