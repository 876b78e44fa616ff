#include "cli/inspect.hpp"

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "cli/table.hpp"
#include "common/bytes.hpp"

namespace hami::cli {
namespace {

using region::kMaxDevices;
using region::RegionSnapshot;
using region::SlotSnapshot;

std::string memory_limit_text(uint64_t bytes) {
  return bytes == 0 ? "unlimited" : format_bytes(bytes);
}

// Upstream treats 0 and anything >= 100 as "no throttling".
std::string sm_limit_text(uint64_t pct) {
  if (pct == 0 || pct >= 100) return "100% (no cap)";
  return std::to_string(pct) + "%";
}

std::string priority_text(int32_t p) {
  switch (p) {
    case 0:
      return "0 (high)";
    case 1:
      return "1 (low)";
    default:
      return std::to_string(p);
  }
}

std::string utc_text(uint64_t t) {
  if (t > 253402300799ull) return std::to_string(t) + " (not a plausible time)";  // > year 9999
  const auto tt = static_cast<std::time_t>(t);
  std::tm tm{};
  if (gmtime_r(&tt, &tm) == nullptr) return std::to_string(t);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string age_text(uint64_t t, std::time_t now) {
  if (now < 0 || t > static_cast<uint64_t>(now)) return "in the future";
  const uint64_t s = static_cast<uint64_t>(now) - t;
  if (s < 120) return std::to_string(s) + " s ago";
  if (s < 7200) return std::to_string(s / 60) + " min ago";
  if (s < 172800) return std::to_string(s / 3600) + " h ago";
  return std::to_string(s / 86400) + " days ago";
}

std::string owner_text(const SlotSnapshot& s) {
  if (!s.owner_tagged) return "-";
  return std::string(region::liveness_name(s.liveness));
}

bool device_has_data(const SlotSnapshot& s, int d) {
  const auto& u = s.used[d];
  return u.total != 0 || u.context != 0 || u.data != 0 || s.nvml_used[d] != 0 || s.sm_util[d] != 0;
}

// Devices beyond the recorded ones often carry the global limit; say so once.
std::string absent_device_limits(const RegionSnapshot& snap, int rows) {
  if (rows >= kMaxDevices) return {};
  const uint64_t mem = snap.memory_limit[rows];
  const uint64_t sm = snap.sm_limit[rows];
  for (int d = rows + 1; d < kMaxDevices; ++d) {
    if (snap.memory_limit[d] != mem || snap.sm_limit[d] != sm) {
      return "  Device indices " + std::to_string(rows) +
             "-15 are not present and carry differing limits (see --json).\n";
    }
  }
  if (mem == 0 && (sm == 0 || sm >= 100)) return {};
  return "  Device indices " + std::to_string(rows) + "-15 are not present; their limits: memory " +
         memory_limit_text(mem) + ", SM " + sm_limit_text(sm) + ".\n";
}

bool has_share(const RegionSnapshot& snap, int d) {
  return snap.sm_limit[d] != 0 && snap.sm_limit[d] < 100;
}

// A device with a share that the file records, or any other whose clock a
// process has used.
bool shows_pacing(const RegionSnapshot& snap, const region::PaceSnapshot& pace, int d) {
  return has_share(snap, d) && (d < snap.device_rows() || pace.tat_ns[static_cast<size_t>(d)] != 0);
}

std::string seconds_text(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f s", static_cast<double>(ns) / 1e9);
  return buf;
}

// One line per device with a share: how far the admitted work reaches past
// now (launches wait while it is more than the pacer's 5 ms burst).
std::string pace_text(const RegionSnapshot& snap, const PaceInfo& pace) {
  std::string out = "SM pacing   ";
  if (!pace.error.empty()) return out + pace.error + "\n";
  if (!pace.snap) return out + "no " + pace.path + " yet: no process has paced\n";
  out += pace.path + "\n";
  if (!pace.snap->this_boot) {
    return out + "  written in another boot; its clocks are cleared when a process next starts\n";
  }
  for (int d = 0; d < kMaxDevices; ++d) {
    if (!shows_pacing(snap, *pace.snap, d)) continue;
    const auto i = static_cast<size_t>(d);
    const int64_t backlog = pace.snap->tat_ns[i] - pace.now_mono_ns;
    out += "  device " + std::to_string(d) + ": ";
    if (backlog > region::kPaceBurstNs) {
      out +=
          "at its share, launches wait (admitted work reaches " + seconds_text(backlog) + " ahead)";
    } else {
      out += "below its share, launches do not wait";
    }
    out += "\n";
  }
  return out;
}

nlohmann::json pace_json(const RegionSnapshot& snap, const PaceInfo& pace) {
  using nlohmann::json;
  json devices = json::array();
  if (pace.snap && pace.snap->this_boot) {
    for (int d = 0; d < kMaxDevices; ++d) {
      if (!shows_pacing(snap, *pace.snap, d)) continue;
      const auto i = static_cast<size_t>(d);
      devices.push_back(
          {{"index", d},
           {"backlog_ns", std::max<int64_t>(0, pace.snap->tat_ns[i] - pace.now_mono_ns)}});
    }
  }
  return {{"path", pace.path},
          {"present", pace.snap.has_value()},
          {"this_boot", pace.snap ? json(pace.snap->this_boot) : json(nullptr)},
          {"error", pace.error.empty() ? json(nullptr) : json(pace.error)},
          {"devices", std::move(devices)}};
}

}  // namespace

PaceInfo read_pace_info(const std::string& state_path) {
  PaceInfo info;
  info.path = state_path + ".pace";
  auto read = region::read_pace_clocks(info.path);
  info.now_mono_ns = region::pace_clock_now_ns();
  if (!read) {
    info.error = read.error().message;
  } else {
    info.snap = *read;
  }
  return info;
}

std::string render_inspect_text(const RegionSnapshot& snap, std::time_t now, const PaceInfo* pace) {
  std::string out;
  out += "State file  " + snap.source + "\n";
  out += "Layout      " + std::string(snap.layout->name) + ": " +
         std::string(snap.layout->description);
  if (snap.layout->versioned) {
    out += ", version " + std::to_string(snap.major) + "." + std::to_string(snap.minor);
  }
  out += ", " + std::to_string(snap.file_size) + " bytes\n";
  out += "Flags       utilization_switch=" + std::to_string(snap.utilization_switch) +
         "  recent_kernel=" + std::to_string(snap.recent_kernel) +
         "  priority=" + priority_text(snap.priority) + "\n";
  if (snap.last_kernel_time) {
    out += "Last kernel " + utc_text(*snap.last_kernel_time) + " (" +
           age_text(*snap.last_kernel_time, now) + ")\n";
  }
  for (const std::string& w : snap.warnings)
    out += "Warning     " + w + "\n";

  const int rows = snap.device_rows();
  out += "\nDevices: " + std::to_string(snap.device_num) + " recorded\n";
  Table devices({"DEV", "UUID", "MEMORY LIMIT", "SM LIMIT", "USED"});
  for (int d = 0; d < rows; ++d) {
    devices.add({std::to_string(d), snap.uuids[d].empty() ? "-" : snap.uuids[d],
                 memory_limit_text(snap.memory_limit[d]), sm_limit_text(snap.sm_limit[d]),
                 format_bytes(snap.device_used(d))});
  }
  if (rows > 0) out += devices.render("  ");
  out += absent_device_limits(snap, rows);
  bool any_share = false;
  for (int d = 0; d < kMaxDevices; ++d)
    any_share = any_share || has_share(snap, d);
  if (pace != nullptr && any_share) out += pace_text(snap, *pace);

  out += "\nProcesses: " + std::to_string(snap.slots.size()) + " slot" +
         (snap.slots.size() == 1 ? "" : "s") + " in use (proc_num " +
         std::to_string(snap.proc_num_raw) + ")\n";
  if (snap.slots.empty()) return out;
  Table procs({"SLOT", "PID", "HOST PID", "STATUS", "OWNER", "DEV", "USED", "CONTEXT", "DATA",
               "NVML USED", "SM%"});
  for (const SlotSnapshot& s : snap.slots) {
    std::vector<std::string> ident = {std::to_string(s.index), std::to_string(s.pid),
                                      s.host_pid == 0 ? "-" : std::to_string(s.host_pid),
                                      std::string(region::status_name(s.status)), owner_text(s)};
    bool any = false;
    for (int d = 0; d < kMaxDevices; ++d) {
      if (!device_has_data(s, d)) continue;
      std::vector<std::string> row =
          any ? std::vector<std::string>(ident.size(), "") : ident;  // identity on first row only
      const auto& u = s.used[d];
      row.insert(row.end(), {std::to_string(d), format_bytes(u.total), format_bytes(u.context),
                             format_bytes(u.data), format_bytes(s.nvml_used[d]),
                             std::to_string(s.sm_util[d])});
      procs.add(std::move(row));
      any = true;
    }
    if (!any) {
      ident.insert(ident.end(), {"-", "0 B", "0 B", "0 B", "0 B", "0"});
      procs.add(std::move(ident));
    }
  }
  out += procs.render("  ");
  return out;
}

nlohmann::json render_inspect_json(const RegionSnapshot& snap, const PaceInfo* pace) {
  using nlohmann::json;
  json j;
  j["path"] = snap.source;
  j["file_size"] = snap.file_size;
  j["layout"] = std::string(snap.layout->name);
  j["layout_description"] = std::string(snap.layout->description);
  j["version"] =
      snap.layout->versioned ? json{{"major", snap.major}, {"minor", snap.minor}} : json(nullptr);
  j["writable"] = snap.writable;
  j["device_num"] = snap.device_num;
  j["flags"] = {
      {"utilization_switch", snap.utilization_switch},
      {"recent_kernel", snap.recent_kernel},
      {"priority", snap.priority},
      {"last_kernel_time", snap.last_kernel_time ? json(*snap.last_kernel_time) : json(nullptr)}};
  j["proc_num"] = snap.proc_num_raw;

  json limits = json::array();
  for (int d = 0; d < kMaxDevices; ++d) {
    limits.push_back({{"index", d},
                      {"uuid", snap.uuids[d]},
                      {"memory_limit_bytes", snap.memory_limit[d]},
                      {"sm_limit_percent", snap.sm_limit[d]}});
  }
  j["limits"] = std::move(limits);

  json devices = json::array();
  for (int d = 0; d < snap.device_rows(); ++d) {
    devices.push_back({{"index", d},
                       {"uuid", snap.uuids[d]},
                       {"memory_limit_bytes", snap.memory_limit[d]},
                       {"sm_limit_percent", snap.sm_limit[d]},
                       {"used_bytes", snap.device_used(d)}});
  }
  j["devices"] = std::move(devices);

  json procs = json::array();
  for (const SlotSnapshot& s : snap.slots) {
    json devs = json::array();
    for (int d = 0; d < kMaxDevices; ++d) {
      if (!device_has_data(s, d)) continue;
      const auto& u = s.used[d];
      devs.push_back({{"index", d},
                      {"total_bytes", u.total},
                      {"context_bytes", u.context},
                      {"module_bytes", u.module},
                      {"data_bytes", u.data},
                      {"spilled_bytes", u.spilled},
                      {"nvml_used_bytes", s.nvml_used[d]},
                      {"sm_util_percent", s.sm_util[d]}});
    }
    procs.push_back(
        {{"slot", s.index},
         {"pid", s.pid},
         {"host_pid", s.host_pid},
         {"status", std::string(region::status_name(s.status))},
         {"status_code", s.status},
         {"owner_tagged", s.owner_tagged},
         {"owner_start_time", s.owner_tagged ? json(s.owner_start_time) : json(nullptr)},
         {"liveness", std::string(region::liveness_name(s.liveness))},
         {"devices", std::move(devs)}});
  }
  j["processes"] = std::move(procs);
  j["warnings"] = snap.warnings;
  j["sm_pacing"] = pace != nullptr ? pace_json(snap, *pace) : json(nullptr);
  return j;
}

int run_inspect(const std::string& path, bool json) {
  auto snap = region::read_snapshot(path);
  if (!snap) {
    std::cerr << "vgpu inspect: " << snap.error().message << "\n";
    return kExitBadFile;
  }
  const PaceInfo pace = read_pace_info(path);
  if (json) {
    std::cout << render_inspect_json(*snap, &pace).dump(2) << "\n";
  } else {
    std::cout << render_inspect_text(*snap, std::time(nullptr), &pace);
  }
  return kExitOk;
}

}  // namespace hami::cli
