#include "vgpu/config.hpp"

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <map>

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

std::string indexed(const char* key, int dev) {
  return std::string(key) + "_" + std::to_string(dev);
}

bool known_key(const std::string& key) {
  if (key == kMemoryKey || key == kSmKey || key == kPriorityKey || key == kPolicyKey ||
      key == kSustainKey)
    return true;
  for (int d = 0; d < kMaxDevices; ++d) {
    if (key == indexed(kMemoryKey, d) || key == indexed(kSmKey, d)) return true;
  }
  return false;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  size_t e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// Values as a key -> text map, from the limits file or the environment.
using Values = std::map<std::string, std::string>;

// Returns false when the file is corrupt as a whole (a line that is not KEY=VALUE).
bool parse_limits_file(const std::string& path, const std::string& text, Values& out, Config& cfg) {
  size_t line_no = 0;
  size_t pos = 0;
  bool ok = true;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = trim(text.substr(pos, end - pos));
    pos = end + 1;
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    const size_t eq = line.find('=');
    if (eq == std::string::npos || eq == 0) {
      cfg.errors.push_back(path + ":" + std::to_string(line_no) + ": '" + line +
                           "' is not KEY=VALUE");
      ok = false;
      continue;
    }
    const std::string key = trim(line.substr(0, eq));
    if (!known_key(key)) {
      cfg.warnings.push_back(path + ":" + std::to_string(line_no) + ": unknown key " + key +
                             " ignored");
      continue;
    }
    out[key] = trim(line.substr(eq + 1));
  }
  return ok;
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

}  // namespace

bool Config::accounting_needed() const {
  if (state_file_from_env || !limits_file.empty()) return true;
  for (int d = 0; d < kMaxDevices; ++d) {
    if (has_memory_limit(d) || sm_limit[d] < 100) return true;
  }
  return false;
}

Config load_config(const ConfigSources& src) {
  Config cfg;
  if (auto sf = src.env("CUDA_DEVICE_MEMORY_SHARED_CACHE"); sf && !sf->empty()) {
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
    if ((*content)->size() > kMaxLimitsFileSize ||
        !parse_limits_file(file, **content, values, cfg)) {
      if ((*content)->size() > kMaxLimitsFileSize) {
        cfg.errors.push_back(file + ": larger than 64 KiB, not a limits file");
      }
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
  }
  resolve_memory(values, where, cfg);
  resolve_sm(values, where, cfg);
  resolve_priority(values, where, cfg);
  resolve_policy(values, where, cfg);
  resolve_obsolete(values, where, cfg);
  return cfg;
}

ConfigSources process_sources() {
  ConfigSources s;
  s.env = [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
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
