#include "scheduler/config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <limits>
#include <sstream>

namespace hami::scheduler {
namespace {

bool iequals(const std::string& a, const std::string& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

Result<int32_t> as_int(const YAML::Node& v, const std::string& where, int32_t min) {
  try {
    const auto n = v.as<int64_t>();
    if (n < min || n > std::numeric_limits<int32_t>::max()) {
      return Error{where + ": " + std::to_string(n) + " is out of range"};
    }
    return static_cast<int32_t>(n);
  } catch (const YAML::Exception&) {
    return Error{where + ": expected an integer"};
  }
}

// What the API server accepts as a RuntimeClass name (a DNS subdomain).
bool rfc1123_subdomain(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(s.front()) || !alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [&](char c) { return alnum(c) || c == '-' || c == '.'; });
}

Result<bool> as_bool(const YAML::Node& v, const std::string& where) {
  try {
    return v.as<bool>();
  } catch (const YAML::Exception&) {
    return Error{where + ": expected true or false"};
  }
}

Result<std::string> as_string(const YAML::Node& v, const std::string& where) {
  if (!v.IsScalar() || v.Scalar().empty()) return Error{where + ": expected a non-empty string"};
  return v.Scalar();
}

}  // namespace

Result<void> apply_device_config_text(SchedulerConfig& cfg, const std::string& text,
                                      const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Error{source + ": not YAML: " + e.what()};
  }
  if (!root.IsMap()) return Error{source + ": expected a mapping at the top"};
  YAML::Node nvidia;
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (iequals(it->first.Scalar(), "nvidia")) nvidia = it->second;
  }
  if (!nvidia) return {};
  if (!nvidia.IsMap()) return Error{source + ": nvidia: expected a mapping"};
  for (auto it = nvidia.begin(); it != nvidia.end(); ++it) {
    const std::string key = it->first.Scalar();
    const std::string where = source + ": nvidia." + key;
    const YAML::Node v = it->second;  // a copy: it-> yields a temporary
    auto str = [&](std::string& out) -> Result<void> {
      auto s = as_string(v, where);
      if (!s) return s.error();
      out = *s;
      return {};
    };
    auto num = [&](int32_t& out, int32_t min) -> Result<void> {
      auto n = as_int(v, where, min);
      if (!n) return n.error();
      out = *n;
      return {};
    };
    Result<void> r;
    if (iequals(key, "resourceCountName")) {
      r = str(cfg.resources.count_name);
    } else if (iequals(key, "resourceMemoryName")) {
      r = str(cfg.resources.memory_name);
    } else if (iequals(key, "resourceMemoryPercentageName")) {
      r = str(cfg.resources.memory_percentage_name);
    } else if (iequals(key, "resourceCoreName")) {
      r = str(cfg.resources.cores_name);
    } else if (iequals(key, "resourcePriorityName")) {
      r = str(cfg.priority_name);
    } else if (iequals(key, "defaultMemory")) {
      r = num(cfg.resources.default_memory_mib, 0);
    } else if (iequals(key, "defaultCores")) {
      r = num(cfg.resources.default_cores, 0);
    } else if (iequals(key, "defaultGPUNum")) {
      r = num(cfg.default_gpu_num, 0);
    } else if (iequals(key, "memoryFactor")) {
      r = num(cfg.resources.memory_factor, 1);
    } else if (iequals(key, "gpuCorePolicy")) {
      r = str(cfg.gpu_core_policy);
      if (r && cfg.gpu_core_policy != "default" && cfg.gpu_core_policy != "force" &&
          cfg.gpu_core_policy != "disable") {
        r = Error{where + ": '" + cfg.gpu_core_policy + "' is not default, force or disable"};
      }
    } else if (iequals(key, "runtimeClassName")) {
      // Upstream's chart writes "" when none is set.
      if (v.IsNull() || (v.IsScalar() && v.Scalar().empty())) {
        cfg.runtime_class_name.clear();
      } else {
        r = str(cfg.runtime_class_name);
        if (r && !rfc1123_subdomain(cfg.runtime_class_name)) {
          r = Error{where + ": '" + cfg.runtime_class_name +
                    "' is not a RuntimeClass name (lower-case letters, digits, '-' and '.')"};
        }
      }
    } else if (iequals(key, "overwriteEnv")) {
      auto b = as_bool(v, where);
      if (b) {
        cfg.overwrite_env = *b;
      } else {
        r = b.error();
      }
    }
    if (!r) return r.error();
  }
  return {};
}

Result<void> apply_device_config_file(SchedulerConfig& cfg, const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error::from_errno(path);
  std::ostringstream s;
  s << in.rdbuf();
  return apply_device_config_text(cfg, s.str(), path);
}

std::chrono::milliseconds bind_deadline_for(std::chrono::milliseconds http_timeout) {
  return std::clamp(http_timeout / 3, std::chrono::milliseconds(1),
                    std::chrono::milliseconds(10000));
}

}  // namespace hami::scheduler
