#include "vgpu/config.hpp"

#include <sys/stat.h>
#include <unistd.h>  // environ

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <map>

#include "common/kv_text.hpp"
#include "common/size_parse.hpp"
#include "common/small_file.hpp"

namespace hami::vgpu {
namespace {

constexpr size_t kMaxLimitsFileSize = 64 * 1024;

const char* kMemoryKey = "CUDA_DEVICE_MEMORY_LIMIT";
const char* kSmKey = "CUDA_DEVICE_SM_LIMIT";
const char* kPriorityKey = "CUDA_TASK_PRIORITY";
const char* kPolicyKey = "GPU_CORE_UTILIZATION_POLICY";
// Read by earlier versions of this library only.
const char* kSustainKey = "CUDA_DEVICE_SM_SUSTAIN_MS";
const char* kStateFileKey = "CUDA_DEVICE_MEMORY_SHARED_CACHE";
const char* kUuidKey = "VGPU_DEVICE_UUID";
const char* kOversubscribeKey = "CUDA_OVERSUBSCRIBE";
// The device plugin records an MPS client's thread percentage for the node
// agent; the MPS server applies it from the environment, not this library.
const char* kMpsThreadKey = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE";
constexpr size_t kMaxUuidLength = 95;  // what the state file's table holds

std::string indexed(const char* key, int dev) {
  return std::string(key) + "_" + std::to_string(dev);
}

bool known_key(const std::string& key) {
  if (key == kMemoryKey || key == kSmKey || key == kPriorityKey || key == kPolicyKey ||
      key == kSustainKey || key == kStateFileKey || key == kOversubscribeKey ||
      key == kMpsThreadKey)
    return true;
  for (int d = 0; d < kMaxDevices; ++d) {
    if (key == indexed(kMemoryKey, d) || key == indexed(kSmKey, d) || key == indexed(kUuidKey, d))
      return true;
  }
  return false;
}

// "<KEY>_<suffix>" for one of the per-device keys, when the suffix is not a
// device index we read (CUDA_DEVICE_MEMORY_LIMIT_99, _16, _x): such a limit
// applies to no device, which must not pass unnoticed.
std::optional<std::string> unreadable_index(const std::string& key) {
  for (const char* base : {kMemoryKey, kSmKey}) {
    const std::string prefix = std::string(base) + "_";
    if (key.rfind(prefix, 0) != 0) continue;
    const std::string suffix = key.substr(prefix.size());
    if (known_key(key)) return std::nullopt;
    if (!suffix.empty() && suffix.find_first_not_of("0123456789") == std::string::npos)
      return "device index " + suffix + " is out of range (0-" + std::to_string(kMaxDevices - 1) +
             ")";
    return "'" + suffix + "' is not a device index (0-" + std::to_string(kMaxDevices - 1) + ")";
  }
  return std::nullopt;
}

std::string limit_kind(const std::string& key) {
  return key.rfind(kMemoryKey, 0) == 0 ? "memory limit" : "SM share";
}

// Values as a key -> text map, from the limits file or the environment.
using Values = std::map<std::string, std::string>;

// Returns false when the file is corrupt as a whole (a line that is not KEY=VALUE).
bool parse_limits_file(const std::string& path, const std::string& text, Values& out, Config& cfg) {
  const KvText kv = parse_kv_text(text);
  for (const KvEntry& bad : kv.malformed) {
    cfg.errors.push_back(path + ":" + std::to_string(bad.line) + ": '" + bad.value +
                         "' is not KEY=VALUE");
  }
  for (const KvEntry& e : kv.entries) {
    if (auto why = unreadable_index(e.key)) {
      cfg.errors.push_back(path + ":" + std::to_string(e.line) + ": " + e.key + ": " + *why +
                           "; this " + limit_kind(e.key) + " applies to no device");
      continue;
    }
    if (!known_key(e.key)) {
      cfg.warnings.push_back(path + ":" + std::to_string(e.line) + ": unknown key " + e.key +
                             " ignored");
      continue;
    }
    out[e.key] = e.value;
  }
  return kv.malformed.empty();
}

void resolve_memory(const Values& v, const std::string& where, Config& cfg) {
  std::optional<uint64_t> global;
  bool global_bad = false;
  if (auto it = v.find(kMemoryKey); it != v.end()) {
    auto parsed = parse_size(it->second);
    if (parsed) {
      global = *parsed;
    } else {
      global_bad = true;
      cfg.errors.push_back(where + kMemoryKey + "=" + it->second + ": " + parsed.error().message +
                           "; allocations are refused on every device without its own limit");
    }
  }
  for (int d = 0; d < kMaxDevices; ++d) {
    const std::string key = indexed(kMemoryKey, d);
    if (auto it = v.find(key); it != v.end()) {
      auto parsed = parse_size(it->second);
      if (parsed) {
        cfg.memory_limit[d] = *parsed;
      } else {
        cfg.memory_denied[d] = true;
        cfg.errors.push_back(where + key + "=" + it->second + ": " + parsed.error().message +
                             "; allocations on device " + std::to_string(d) + " are refused");
      }
    } else if (global_bad) {
      cfg.memory_denied[d] = true;
    } else if (global) {
      cfg.memory_limit[d] = *global;
    }
  }
}

// An unreadable SM share is not a safety issue (memory stays capped), so it
// falls back to "no cap" rather than stopping the workload.
void resolve_sm(const Values& v, const std::string& where, Config& cfg) {
  auto read = [&](const std::string& key) -> std::optional<uint64_t> {
    auto it = v.find(key);
    if (it == v.end()) return std::nullopt;
    auto p = parse_percent(it->second);
    if (!p) {
      cfg.errors.push_back(where + key + "=" + it->second + ": " + p.error().message +
                           "; no SM cap applied");
      return std::nullopt;
    }
    return *p == 0 ? 100 : *p;  // upstream: 0 means no limit
  };
  const auto global = read(kSmKey);
  for (int d = 0; d < kMaxDevices; ++d) {
    if (auto own = read(indexed(kSmKey, d))) {
      cfg.sm_limit[d] = *own;
    } else if (global) {
      cfg.sm_limit[d] = *global;
    }
  }
}

void resolve_priority(const Values& v, const std::string& where, Config& cfg) {
  auto it = v.find(kPriorityKey);
  if (it == v.end()) return;
  if (it->second == "0" || it->second == "1") {
    cfg.priority = it->second[0] - '0';
  } else {
    cfg.warnings.push_back(where + kPriorityKey + "=" + it->second +
                           " is not 0 (high) or 1 (low); using 1");
  }
}

void resolve_policy(const Values& v, const std::string& where, Config& cfg) {
  auto it = v.find(kPolicyKey);
  if (it == v.end() || it->second.empty()) return;
  if (auto p = limiter::parse_core_policy(it->second)) {
    cfg.core_policy = *p;
  } else {
    cfg.errors.push_back(where + kPolicyKey + "=" + it->second +
                         " is not force, default or disable; using default");
  }
}

void resolve_obsolete(const Values& v, const std::string& where, Config& cfg) {
  if (v.count(kSustainKey) != 0) {
    cfg.warnings.push_back(where + kSustainKey +
                           " is no longer used (the SM share is charged the GPU time kernels "
                           "take as they run); ignored");
  }
}

// Virtual device memory (spill.hpp). The device plugin sets it in the
// environment; a limits file may set it too and then wins. It lets nothing past
// the limit, so an unreadable value only keeps it off.
void resolve_oversubscribe(const Values& v, const std::string& where, const ConfigSources& src,
                           Config& cfg) {
  std::string value;
  std::string from = where;
  if (auto it = v.find(kOversubscribeKey); it != v.end()) {
    value = it->second;
  } else if (auto env = src.env(kOversubscribeKey)) {
    value = *env;
    from.clear();
  } else {
    return;
  }
  if (value == "true" || value == "1") {
    cfg.oversubscribe = true;
  } else if (value != "false" && value != "0" && !value.empty()) {
    cfg.errors.push_back(from + kOversubscribeKey + "=" + value +
                         " is not true or false; device memory is not oversubscribed "
                         "(allocations past the GPU's physical memory fail)");
  }
}

// The state file and the GPU table, which only a limits file can give.
// Returns false when a value is unusable (the file is then corrupt).
bool resolve_trusted_paths(const Values& v, const std::string& file, const ConfigSources& src,
                           Config& cfg) {
  bool ok = true;
  if (auto it = v.find(kStateFileKey); it != v.end()) {
    if (it->second.empty() || it->second[0] != '/') {
      cfg.errors.push_back(file + ": " + kStateFileKey + "=" + it->second +
                           " is not an absolute path");
      ok = false;
    } else {
      if (auto env = src.env(kStateFileKey); env && *env != it->second) {
        cfg.warnings.push_back(std::string(kStateFileKey) + "=" + *env +
                               " in the environment is ignored: " + file + " names " + it->second);
      }
      cfg.state_file = it->second;
      cfg.state_file_from_env = false;
      cfg.state_file_from_limits = true;
    }
  }
  for (int d = 0; d < kMaxDevices; ++d) {
    auto it = v.find(indexed(kUuidKey, d));
    if (it == v.end()) break;  // the table is the run of indices from 0
    const std::string& u = it->second;
    const bool printable =
        std::all_of(u.begin(), u.end(), [](char c) { return c > ' ' && c < 127; });
    if (u.empty() || u.size() > kMaxUuidLength || !printable) {
      cfg.errors.push_back(file + ": " + indexed(kUuidKey, d) + "=" + u.substr(0, 120) +
                           " is not a GPU UUID");
      ok = false;
      break;
    }
    cfg.device_uuids.push_back(u);
  }
  return ok;
}

void check_env_indices(const ConfigSources& src, Config& cfg, bool ignored_anyway) {
  if (!src.env_names) return;
  for (const std::string& name : src.env_names()) {
    auto why = unreadable_index(name);
    if (!why) continue;
    const std::string value = src.env(name).value_or("");
    if (ignored_anyway) {
      cfg.warnings.push_back(name + "=" + value + " in the environment is ignored: " +
                             cfg.limits_file + " governs (and " + *why + ")");
    } else {
      cfg.errors.push_back(name + "=" + value + ": " + *why + "; this " + limit_kind(name) +
                           " applies to no device");
    }
  }
}

}  // namespace

bool Config::accounting_needed() const {
  if (state_file_from_env || !limits_file.empty()) return true;
  for (int d = 0; d < kMaxDevices; ++d) {
    if (has_memory_limit(d) || sm_limit[d] < 100) return true;
  }
  return false;
}

// The fixed path when the device plugin mounted it; VGPU_CONTROL_FILE only
// without it (tests, hand-made setups), as VGPU_LIMITS_FILE.
std::string control_file_path(const ConfigSources& src) {
  if (src.exists && src.exists(src.fixed_control_file)) return src.fixed_control_file;
  if (auto alt = src.env("VGPU_CONTROL_FILE"); alt && !alt->empty()) return *alt;
  return {};
}

Config load_config(const ConfigSources& src) {
  Config cfg;
  cfg.control_file = control_file_path(src);
  if (auto sf = src.env(kStateFileKey); sf && !sf->empty()) {
    cfg.state_file = *sf;
    cfg.state_file_from_env = true;
  } else {
    cfg.state_file = kDefaultStateFile;
  }

  // The fixed path wins; the variable is only a fallback for standalone use,
  // so a tenant cannot point the library at a file of its own.
  std::string file = src.fixed_limits_file;
  auto content = src.read_file(file);
  if (content && !*content) {
    if (auto alt = src.env("VGPU_LIMITS_FILE"); alt && !alt->empty()) {
      file = *alt;
      content = src.read_file(file);
      if (content && !*content) {
        cfg.errors.push_back("VGPU_LIMITS_FILE=" + file +
                             ": no such file; refusing allocations on every device until it "
                             "exists or the variable is unset");
        cfg.memory_denied.fill(true);
        cfg.limits_file = file;
        return cfg;
      }
    }
  }

  Values values;
  std::string where;
  if (!content) {
    cfg.errors.push_back(content.error().message +
                         "; refusing allocations on every device until the limits file can be "
                         "read");
    cfg.memory_denied.fill(true);
    cfg.limits_file = file;
    return cfg;
  }
  if (*content) {
    cfg.limits_file = file;
    where = file + ": ";
    const bool too_big = (*content)->size() > kMaxLimitsFileSize;
    if (too_big || !parse_limits_file(file, **content, values, cfg) ||
        !resolve_trusted_paths(values, file, src, cfg)) {
      if (too_big) cfg.errors.push_back(file + ": larger than 64 KiB, not a limits file");
      cfg.errors.push_back(file +
                           ": corrupt; refusing allocations on every device until it is fixed");
      cfg.memory_denied.fill(true);
      return cfg;
    }
    for (const char* k : {kMemoryKey, kSmKey}) {
      if (src.env(k)) {
        cfg.warnings.push_back(std::string(k) + " in the environment is ignored: " + file +
                               " governs");
      }
    }
    check_env_indices(src, cfg, /*ignored_anyway=*/true);
  } else {
    auto take = [&](const std::string& key) {
      if (auto v = src.env(key)) values[key] = *v;
    };
    take(kMemoryKey);
    take(kSmKey);
    take(kPriorityKey);
    take(kPolicyKey);
    take(kSustainKey);
    for (int d = 0; d < kMaxDevices; ++d) {
      take(indexed(kMemoryKey, d));
      take(indexed(kSmKey, d));
    }
    check_env_indices(src, cfg, /*ignored_anyway=*/false);
  }
  resolve_memory(values, where, cfg);
  resolve_sm(values, where, cfg);
  resolve_priority(values, where, cfg);
  resolve_policy(values, where, cfg);
  resolve_obsolete(values, where, cfg);
  resolve_oversubscribe(values, where, src, cfg);
  return cfg;
}

ConfigSources process_sources() {
  ConfigSources s;
  s.env_names = [] {
    std::vector<std::string> names;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      const char* eq = std::strchr(*e, '=');
      names.emplace_back(*e, eq != nullptr ? static_cast<size_t>(eq - *e) : std::strlen(*e));
    }
    return names;
  };
  s.env = [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
  s.exists = [](const std::string& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0;
  };
  s.read_file = [](const std::string& path) -> Result<std::optional<std::string>> {
    auto text = read_small_file(path, kMaxLimitsFileSize);
    if (text) return std::optional<std::string>(std::move(*text));
    if (text.error().sys_errno == ENOENT) return std::optional<std::string>();
    return Error{text.error().message + " (limits file)", text.error().sys_errno};
  };
  return s;
}

}  // namespace hami::vgpu
