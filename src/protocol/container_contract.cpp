#include "protocol/container_contract.hpp"

#include <algorithm>
#include <cctype>

#include "common/kv_text.hpp"
#include "common/size_parse.hpp"

namespace hami::protocol {
namespace {

constexpr int kMaxDevices = kContainerMaxDevices;
constexpr size_t kMaxUuidLength = 95;  // what the state file's table holds

using Values = std::map<std::string, std::string>;

bool known_key(const std::string& key) {
  for (const char* k : {kEnvMemoryLimit, kEnvSmLimit, kEnvPriority, kEnvCorePolicy, kEnvSmSustain,
                        kEnvStateFile, kEnvOversubscribe, kEnvMpsThreads}) {
    if (key == k) return true;
  }
  for (const char* base : {kEnvMemoryLimit, kEnvSmLimit, kKeyDeviceUuid}) {
    const size_t n = std::char_traits<char>::length(base);
    if (key.size() < n + 2 || key.compare(0, n, base) != 0 || key[n] != '_') continue;
    const std::string suffix = key.substr(n + 1);
    if (suffix.size() > 2 || suffix.find_first_not_of("0123456789") != std::string::npos) continue;
    if (suffix.size() == 2 && suffix[0] == '0') continue;
    if (std::stoi(suffix) < kMaxDevices) return true;
  }
  return false;
}

std::string limit_kind(const std::string& key) {
  return key.rfind(kEnvMemoryLimit, 0) == 0 ? "memory limit" : "SM share";
}

void resolve_memory(const Values& v, const std::string& where, ContainerLimits& out) {
  std::optional<uint64_t> global;
  bool global_bad = false;
  if (auto it = v.find(kEnvMemoryLimit); it != v.end()) {
    auto parsed = parse_size(it->second);
    if (parsed) {
      global = *parsed;
    } else {
      global_bad = true;
      out.errors.push_back(where + kEnvMemoryLimit + "=" + it->second + ": " +
                           parsed.error().message +
                           "; allocations are refused on every device without its own limit");
    }
  }
  for (int d = 0; d < kMaxDevices; ++d) {
    const std::string key = indexed_key(kEnvMemoryLimit, d);
    if (auto it = v.find(key); it != v.end()) {
      auto parsed = parse_size(it->second);
      if (parsed) {
        out.memory_limit[d] = *parsed;
      } else {
        out.memory_denied[d] = true;
        out.errors.push_back(where + key + "=" + it->second + ": " + parsed.error().message +
                             "; allocations on device " + std::to_string(d) + " are refused");
      }
    } else if (global_bad) {
      out.memory_denied[d] = true;
    } else if (global) {
      out.memory_limit[d] = *global;
    }
  }
}

// An unreadable SM share is not a safety issue (memory stays capped), so it
// falls back to "no cap" rather than stopping the workload.
void resolve_sm(const Values& v, const std::string& where, ContainerLimits& out) {
  auto read = [&](const std::string& key) -> std::optional<uint64_t> {
    auto it = v.find(key);
    if (it == v.end()) return std::nullopt;
    auto p = parse_percent(it->second);
    if (!p) {
      out.errors.push_back(where + key + "=" + it->second + ": " + p.error().message +
                           "; no SM cap applied");
      return std::nullopt;
    }
    return *p == 0 ? 100 : *p;  // upstream: 0 means no limit
  };
  const auto global = read(kEnvSmLimit);
  for (int d = 0; d < kMaxDevices; ++d) {
    if (auto own = read(indexed_key(kEnvSmLimit, d))) {
      out.sm_limit[d] = *own;
    } else if (global) {
      out.sm_limit[d] = *global;
    }
  }
}

void resolve_rest(const Values& v, const std::string& where, ContainerLimits& out) {
  if (auto it = v.find(kEnvPriority); it != v.end()) {
    if (it->second == "0" || it->second == "1") {
      out.priority = it->second[0] - '0';
    } else {
      out.errors.push_back(where + kEnvPriority + "=" + it->second.substr(0, 100) +
                           " is not 0 (high) or 1 (low); using 1");
    }
  }
  if (auto it = v.find(kEnvCorePolicy); it != v.end() && !it->second.empty()) {
    if (auto p = parse_core_policy(it->second)) {
      out.policy = *p;
    } else {
      out.errors.push_back(where + kEnvCorePolicy + "=" + it->second +
                           " is not force, default or disable; using default");
    }
  }
  if (v.count(kEnvSmSustain) != 0) {
    out.warnings.push_back(where + kEnvSmSustain +
                           " is no longer used (the SM share is charged the GPU time kernels "
                           "take as they run); ignored");
  }
  if (auto it = v.find(kEnvMpsThreads); it != v.end()) {
    auto p = parse_percent(it->second);
    if (!p || *p == 0) {
      out.errors.push_back(where + kEnvMpsThreads + "=" + it->second.substr(0, 100) +
                           ": not a percentage from 1 to 100");
    } else {
      out.mps_threads = *p;
    }
  }
  // It lets nothing past the limit, so an unreadable value only keeps it off.
  if (auto it = v.find(kEnvOversubscribe); it != v.end()) {
    const std::string& value = it->second;
    if (value == "true" || value == "1") {
      out.oversubscribe = true;
    } else if (value == "false" || value == "0" || value.empty()) {
      out.oversubscribe = false;
    } else {
      out.errors.push_back(where + kEnvOversubscribe + "=" + value +
                           " is not true or false; device memory is not oversubscribed "
                           "(allocations past the GPU's physical memory fail)");
    }
  }
}

// The state file and the GPU table, which only a limits file gives. False
// when a value is unusable (the file is then corrupt).
bool resolve_trusted(const Values& v, const std::string& file, ContainerLimits& out) {
  if (auto it = v.find(kEnvStateFile); it != v.end()) {
    if (it->second.empty() || it->second[0] != '/') {
      out.errors.push_back(file + ": " + kEnvStateFile + "=" + it->second +
                           " is not an absolute path");
      return false;
    }
    out.state_file = it->second;
  }
  for (int d = 0; d < kMaxDevices; ++d) {
    auto it = v.find(indexed_key(kKeyDeviceUuid, d));
    if (it == v.end()) break;  // the table is the run of indices from 0
    const std::string& u = it->second;
    const bool printable =
        std::all_of(u.begin(), u.end(), [](char c) { return c > ' ' && c < 127; });
    if (u.empty() || u.size() > kMaxUuidLength || !printable) {
      out.errors.push_back(file + ": " + indexed_key(kKeyDeviceUuid, d) + "=" + u.substr(0, 120) +
                           " is not a GPU UUID");
      return false;
    }
    out.device_uuids.push_back(u);
  }
  return true;
}

}  // namespace

std::optional<CorePolicy> parse_core_policy(std::string_view text) {
  std::string lower;
  for (char c : text)
    lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "default") return CorePolicy::kDefault;
  if (lower == "force") return CorePolicy::kForce;
  if (lower == "disable") return CorePolicy::kDisable;
  return std::nullopt;
}

const char* to_string(CorePolicy p) {
  switch (p) {
    case CorePolicy::kForce:
      return "force";
    case CorePolicy::kDisable:
      return "disable";
    case CorePolicy::kDefault:
      break;
  }
  return "default";
}

std::string indexed_key(const char* key, int device) {
  return std::string(key) + "_" + std::to_string(device);
}

std::optional<std::string> unreadable_index(const std::string& key) {
  for (const char* base : {kEnvMemoryLimit, kEnvSmLimit}) {
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

std::string memory_text(uint64_t bytes) {
  constexpr uint64_t kMiB = 1ull << 20;
  if (bytes % kMiB == 0) return std::to_string(bytes / kMiB) + "m";
  return std::to_string(bytes);
}

Rendered render_contract(const ContainerSpec& spec) {
  Rendered r;
  const bool mps = spec.mode == SharingMode::kMps;
  for (size_t i = 0; i < spec.gpus.size(); ++i) {
    r.env.emplace_back(indexed_key(kEnvMemoryLimit, static_cast<int>(i)),
                       memory_text(spec.gpus[i].memory_bytes));
  }
  // Upstream hands the first GPU's share to every GPU of the container; the
  // library reads anything above 100 as "no cap", so say 100 plainly.
  const int32_t cores = spec.gpus.empty() ? 0 : std::clamp(spec.gpus[0].cores, 0, 100);
  if (!mps) r.env.emplace_back(kEnvSmLimit, std::to_string(cores));
  if (spec.priority) r.env.emplace_back(kEnvPriority, std::to_string(*spec.priority));
  // Settled on purpose: an MPS client is never paced by the library, whatever
  // the pod's policy or a stale SM figure in a state file says (the server
  // divides the SMs; pacing on top would halve the share).
  if (mps) {
    r.env.emplace_back(kEnvCorePolicy, to_string(CorePolicy::kDisable));
    const bool high_priority = spec.priority && *spec.priority == 0;
    if (cores > 0 && cores < 100 && !high_priority) r.mps_threads = cores;
  } else if (spec.policy) {
    r.env.emplace_back(kEnvCorePolicy, to_string(*spec.policy));
  }

  if (!spec.comment.empty()) r.limits_text = "# " + spec.comment + "\n";
  for (const auto& [k, v] : r.env)
    r.limits_text += k + "=" + v + "\n";
  // What the library and the node agent must not take from the writable state
  // file: which file it is, and which GPUs its device indices are.
  if (!spec.state_file.empty())
    r.limits_text += std::string(kEnvStateFile) + "=" + spec.state_file + "\n";
  for (size_t i = 0; i < spec.gpus.size(); ++i) {
    r.limits_text +=
        indexed_key(kKeyDeviceUuid, static_cast<int>(i)) + "=" + spec.gpus[i].uuid + "\n";
  }
  // The container is an MPS client: the node agent and `vgpu top` show this
  // as its share (100: no cap), whether or not the variable is set.
  if (mps) {
    r.limits_text +=
        std::string(kEnvMpsThreads) + "=" + std::to_string(r.mps_threads.value_or(100)) + "\n";
  }
  return r;
}

ContainerLimits parse_limits_file(std::string_view text, const std::string& path) {
  ContainerLimits out;
  if (text.size() > kMaxLimitsFileSize) {
    out.errors.push_back(path + ": larger than 64 KiB, not a limits file");
    out.corrupt = true;
    return out;
  }
  const KvText kv = parse_kv_text(text);
  for (const KvEntry& bad : kv.malformed) {
    out.errors.push_back(path + ":" + std::to_string(bad.line) + ": '" + bad.value.substr(0, 120) +
                         "' is not KEY=VALUE");
  }
  Values values;
  for (const KvEntry& e : kv.entries) {
    if (auto why = unreadable_index(e.key)) {
      out.errors.push_back(path + ":" + std::to_string(e.line) + ": " + e.key + ": " + *why +
                           "; this " + limit_kind(e.key) + " applies to no device");
      continue;
    }
    if (!known_key(e.key)) {
      out.warnings.push_back(path + ":" + std::to_string(e.line) + ": unknown key " +
                             e.key.substr(0, 120) + " ignored");
      continue;
    }
    values[e.key] = e.value;
  }
  if (!kv.malformed.empty() || !resolve_trusted(values, path, out)) {
    out.corrupt = true;
    return out;
  }
  const std::string where = path + ": ";
  resolve_memory(values, where, out);
  resolve_sm(values, where, out);
  resolve_rest(values, where, out);
  return out;
}

ContainerLimits parse_limits_env(const std::map<std::string, std::string>& values,
                                 const std::vector<std::string>& names) {
  ContainerLimits out;
  for (const std::string& name : names) {
    auto why = unreadable_index(name);
    if (!why) continue;
    auto it = values.find(name);
    out.errors.push_back(name + "=" + (it == values.end() ? "" : it->second) + ": " + *why +
                         "; this " + limit_kind(name) + " applies to no device");
  }
  Values known;
  for (const auto& [k, v] : values)
    if (known_key(k) && k != kEnvStateFile && k.rfind(kKeyDeviceUuid, 0) != 0) known[k] = v;
  resolve_memory(known, "", out);
  resolve_sm(known, "", out);
  resolve_rest(known, "", out);
  return out;
}

std::optional<std::string> mps_resize_refusal(uint64_t old_memory, uint64_t new_memory,
                                              int32_t old_cores, int32_t new_cores) {
  if (new_cores != old_cores) {
    return "the GPU is shared through MPS: a client's SM cap "
           "(CUDA_MPS_ACTIVE_THREAD_PERCENTAGE) is fixed when its process starts; recreate the "
           "pod to change gpucores";
  }
  if (new_memory > old_memory || (old_memory != 0 && new_memory == 0)) {
    return "the GPU is shared through MPS: the server holds a running client to the pinned "
           "memory limit it started with, so memory can only be lowered live";
  }
  return std::nullopt;
}

}  // namespace hami::protocol
