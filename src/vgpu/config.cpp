#include "vgpu/config.hpp"

#include <sys/stat.h>
#include <unistd.h>  // environ

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <map>

#include "common/small_file.hpp"
#include "protocol/container_contract.hpp"

namespace hami::vgpu {
namespace {

namespace contract = protocol;
constexpr size_t kMaxLimitsFileSize = contract::kMaxLimitsFileSize;

// The record's limits into the process's Config.
void take_limits(const contract::ContainerLimits& l, Config& cfg) {
  cfg.memory_limit = l.memory_limit;
  cfg.memory_denied = l.memory_denied;
  cfg.sm_limit = l.sm_limit;
  if (l.priority) cfg.priority = *l.priority;
  if (l.policy) cfg.core_policy = *l.policy;
  cfg.errors.insert(cfg.errors.end(), l.errors.begin(), l.errors.end());
  cfg.warnings.insert(cfg.warnings.end(), l.warnings.begin(), l.warnings.end());
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
  if (auto alt = src.env(contract::kEnvControlFile); alt && !alt->empty()) return *alt;
  return {};
}

Config load_config(const ConfigSources& src) {
  Config cfg;
  cfg.control_file = control_file_path(src);
  if (auto sf = src.env(contract::kEnvStateFile); sf && !sf->empty()) {
    cfg.state_file = *sf;
    cfg.state_file_from_env = true;
  } else {
    cfg.state_file = contract::kDefaultStateFile;
  }

  // The fixed path wins; the variable is only a fallback for standalone use,
  // so a tenant cannot point the library at a file of its own.
  std::string file = src.fixed_limits_file;
  auto content = src.read_file(file);
  if (content && !*content) {
    if (auto alt = src.env(contract::kEnvLimitsFile); alt && !alt->empty()) {
      file = *alt;
      content = src.read_file(file);
      if (content && !*content) {
        cfg.errors.push_back(std::string(contract::kEnvLimitsFile) + "=" + file +
                             ": no such file; refusing allocations on every device until it "
                             "exists or the variable is unset");
        cfg.memory_denied.fill(true);
        cfg.limits_file = file;
        return cfg;
      }
    }
  }

  if (!content) {
    cfg.errors.push_back(content.error().message +
                         "; refusing allocations on every device until the limits file can be "
                         "read");
    cfg.memory_denied.fill(true);
    cfg.limits_file = file;
    return cfg;
  }
  std::optional<bool> oversubscribe;
  if (*content) {
    cfg.limits_file = file;
    const contract::ContainerLimits l = contract::parse_limits_file(**content, file);
    if (l.corrupt) {
      cfg.errors = l.errors;
      cfg.errors.push_back(file +
                           ": corrupt; refusing allocations on every device until it is fixed");
      cfg.memory_denied.fill(true);
      return cfg;
    }
    take_limits(l, cfg);
    cfg.mps_client = l.mps_threads.has_value();
    oversubscribe = l.oversubscribe;
    if (!l.state_file.empty()) {
      if (auto env = src.env(contract::kEnvStateFile); env && *env != l.state_file) {
        cfg.warnings.push_back(std::string(contract::kEnvStateFile) + "=" + *env +
                               " in the environment is ignored: " + file + " names " +
                               l.state_file);
      }
      cfg.state_file = l.state_file;
      cfg.state_file_from_env = false;
      cfg.state_file_from_limits = true;
    }
    cfg.device_uuids = l.device_uuids;
    for (const char* k : {contract::kEnvMemoryLimit, contract::kEnvSmLimit}) {
      if (src.env(k)) {
        cfg.warnings.push_back(std::string(k) + " in the environment is ignored: " + file +
                               " governs");
      }
    }
    if (src.env_names) {
      for (const std::string& name : src.env_names()) {
        auto why = contract::unreadable_index(name);
        if (!why) continue;
        cfg.warnings.push_back(name + "=" + src.env(name).value_or("") +
                               " in the environment is ignored: " + cfg.limits_file +
                               " governs (and " + *why + ")");
      }
    }
  } else {
    std::map<std::string, std::string> values;
    auto take = [&](const std::string& key) {
      if (auto v = src.env(key)) values[key] = *v;
    };
    for (const char* k : {contract::kEnvMemoryLimit, contract::kEnvSmLimit, contract::kEnvPriority,
                          contract::kEnvCorePolicy, contract::kEnvSmSustain}) {
      take(k);
    }
    for (int d = 0; d < kMaxDevices; ++d) {
      take(contract::indexed_key(contract::kEnvMemoryLimit, d));
      take(contract::indexed_key(contract::kEnvSmLimit, d));
    }
    std::vector<std::string> names;
    if (src.env_names) names = src.env_names();
    for (const std::string& name : names)
      if (contract::unreadable_index(name)) take(name);  // to name it with its value
    take_limits(contract::parse_limits_env(values, names), cfg);
  }
  // The device plugin sets CUDA_OVERSUBSCRIBE in the environment; a limits
  // file may set it too and then wins.
  if (!oversubscribe) {
    if (auto env = src.env(contract::kEnvOversubscribe)) {
      const contract::ContainerLimits l =
          contract::parse_limits_env({{contract::kEnvOversubscribe, *env}}, {});
      cfg.errors.insert(cfg.errors.end(), l.errors.begin(), l.errors.end());
      oversubscribe = l.oversubscribe;
    }
  }
  cfg.oversubscribe = oversubscribe.value_or(false);
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
