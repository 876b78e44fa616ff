#include "deviceplugin/config.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>

#include <yaml-cpp/yaml.h>

#include "common/small_file.hpp"
#include "protocol/annotations.hpp"

namespace hami::deviceplugin {
namespace {

constexpr size_t kMaxConfigFile = 1 << 20;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// "<source>:<line>: <key>: " for every message about one value.
struct Where {
  const std::string& source;
  std::string key;
  const YAML::Node& node;
  std::string str() const {
    const auto m = node.Mark();
    std::string s = source;
    if (m.line >= 0) s.append(":").append(std::to_string(m.line + 1));
    s.append(": ").append(key).append(": ");
    return s;
  }
};

std::string shown(const YAML::Node& n) {
  if (n.IsScalar()) {
    // Appended piecewise: GCC 12 -Wrestrict misfires on "'" + s + "'".
    std::string out(1, '\'');
    out.append(n.Scalar(), 0, 64).push_back('\'');
    return out;
  }
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  return "nothing";
}

Result<int> as_int(const YAML::Node& n, const Where& w, int lo, int hi) {
  const std::string range = "expected a whole number from " + std::to_string(lo) + " to " +
                            std::to_string(hi) + ", got " + shown(n);
  if (!n.IsScalar()) return Error{w.str() + range};
  const std::string& s = n.Scalar();
  int v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size() || v < lo || v > hi)
    return Error{w.str() + range};
  return v;
}

Result<double> as_scale(const YAML::Node& n, const Where& w) {
  const std::string what = "expected a number greater than 0 and at most 100, got " + shown(n);
  if (!n.IsScalar() || n.Scalar().empty()) return Error{w.str() + what};
  const std::string& s = n.Scalar();
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v) || v <= 0 || v > 100)
    return Error{w.str() + what};
  return v;
}

Result<bool> as_bool(const YAML::Node& n, const Where& w) {
  if (n.IsScalar()) {
    const std::string s = lower(n.Scalar());
    if (s == "true") return true;
    if (s == "false") return false;
  }
  return Error{w.str() + "expected true or false, got " + shown(n)};
}

Result<std::string> as_resource_name(const YAML::Node& n, const Where& w) {
  // An extended resource name: <domain>/<name>, no blanks.
  if (n.IsScalar()) {
    const std::string& s = n.Scalar();
    const size_t slash = s.find('/');
    const bool blank = std::any_of(s.begin(), s.end(), [](unsigned char c) { return c <= ' '; });
    if (!blank && slash != std::string::npos && slash > 0 && slash + 1 < s.size() &&
        s.find('/', slash + 1) == std::string::npos && s.size() <= 253)
      return s;
  }
  return Error{w.str() + "expected a resource name like nvidia.com/gpu, got " + shown(n)};
}

// The keys a node entry may override, shared by the nvidia block (camelCase in
// upstream's YAML) and the nodeconfig entries (lower case in upstream's JSON).
Result<bool> apply_node_key(PluginConfig& cfg, const std::string& key, const YAML::Node& v,
                            const Where& w) {
  if (key == "devicesplitcount") {
    auto r = as_int(v, w, 1, kMaxSplitCount);
    if (!r) return r.error();
    cfg.device_split_count = *r;
  } else if (key == "devicememoryscaling") {
    auto r = as_scale(v, w);
    if (!r) return r.error();
    cfg.device_memory_scaling = *r;
  } else if (key == "devicecorescaling") {
    auto r = as_scale(v, w);
    if (!r) return r.error();
    cfg.device_core_scaling = *r;
  } else if (key == "libcudaloglevel") {
    auto r = as_int(v, w, 0, 4);
    if (!r) return r.error();
    cfg.lib_cuda_log_level = *r;
  } else if (key == "enablenumatopology") {
    auto r = as_bool(v, w);
    if (!r) return r.error();
    cfg.enable_numa_topology = *r;
  } else {
    return false;
  }
  return true;
}

// A list of names (models or profiles), each a non-empty scalar.
Result<std::vector<std::string>> as_names(const YAML::Node& list, const Where& w) {
  std::vector<std::string> out;
  if (list.IsNull()) return out;
  if (!list.IsSequence()) return Error{w.str() + "expected a list, got " + shown(list)};
  for (const YAML::Node& item : list) {
    if (!item.IsScalar() || item.Scalar().empty())
      return Error{w.str() + "expected a name, got " + shown(item)};
    out.push_back(item.Scalar());
  }
  return out;
}

// migProfileAllowlist: [{models: [...], profiles: [...]}, ...].
Result<std::vector<fit::MigAllowEntry>> as_mig_allowlist(const YAML::Node& v, const Where& w,
                                                         std::vector<std::string>& warnings) {
  std::vector<fit::MigAllowEntry> out;
  if (v.IsNull()) return out;
  if (!v.IsSequence()) return Error{w.str() + "expected a list, got " + shown(v)};
  for (const YAML::Node& entry : v) {
    const Where ew{w.source, w.key + "[" + std::to_string(out.size()) + "]", entry};
    if (!entry.IsMap()) return Error{ew.str() + "expected {models: [...], profiles: [...]}"};
    fit::MigAllowEntry e;
    for (auto it = entry.begin(); it != entry.end(); ++it) {
      const std::string key = lower(it->first.Scalar());
      const YAML::Node list = it->second;  // a copy: it-> yields a temporary
      const Where lw{w.source, ew.key + "." + it->first.Scalar(), list};
      if (key != "models" && key != "profiles") {
        warnings.push_back(lw.str() + "unknown key, ignored");
        continue;
      }
      auto names = as_names(list, lw);
      if (!names) return names.error();
      (key == "models" ? e.models : e.profiles) = std::move(*names);
    }
    out.push_back(std::move(e));
  }
  return out;
}

Result<void> apply_nvidia(PluginConfig& cfg, const YAML::Node& block, const std::string& source) {
  if (block.IsNull()) return {};
  if (!block.IsMap()) return Error{Where{source, "nvidia", block}.str() + "expected a mapping"};
  // Read by the scheduler and webhook only; fine to find here.
  static const char* const kSchedulerKeys[] = {
      "overwriteenv",     "defaultmemory",      "defaultcores",
      "defaultgpunum",    "memoryfactor",       "gpucorepolicy",
      "runtimeclassname", "knownmiggeometries", "preconfigureddevicememory"};
  for (auto it = block.begin(); it != block.end(); ++it) {
    const std::string name = it->first.Scalar();
    const std::string key = lower(name);
    const YAML::Node v = it->second;  // a copy: it-> yields a temporary
    const Where w{source, "nvidia." + name, v};
    auto node_key = apply_node_key(cfg, key, v, w);
    if (!node_key) return node_key.error();
    if (*node_key) continue;
    std::string* res = nullptr;
    if (key == "resourcecountname") res = &cfg.resource_count_name;
    if (key == "resourcememoryname") res = &cfg.resource_memory_name;
    if (key == "resourcememorypercentagename") res = &cfg.resource_memory_percentage_name;
    if (key == "resourcecorename") res = &cfg.resource_core_name;
    if (key == "resourcepriorityname") res = &cfg.resource_priority_name;
    if (res != nullptr) {
      auto r = as_resource_name(v, w);
      if (!r) return r.error();
      *res = *r;
    } else if (key == "disablecorelimit") {
      auto r = as_bool(v, w);
      if (!r) return r.error();
      cfg.disable_core_limit = *r;
    } else if (key == "migprofileallowlist") {
      auto r = as_mig_allowlist(v, w, cfg.warnings);
      if (!r) return r.error();
      cfg.mig_profile_allowlist = std::move(*r);
    } else if (std::find(std::begin(kSchedulerKeys), std::end(kSchedulerKeys), key) ==
               std::end(kSchedulerKeys)) {
      cfg.warnings.push_back(w.str() + "unknown key, ignored");
    }
  }
  return {};
}

Result<void> apply_filter(PluginConfig& cfg, const YAML::Node& f, const std::string& source,
                          const std::string& prefix) {
  if (f.IsNull()) return {};
  if (!f.IsMap()) return Error{Where{source, prefix, f}.str() + "expected a mapping"};
  for (auto it = f.begin(); it != f.end(); ++it) {
    const std::string key = lower(it->first.Scalar());
    const YAML::Node list = it->second;  // a copy: it-> yields a temporary
    const Where w{source, prefix + "." + it->first.Scalar(), list};
    if (key != "uuid" && key != "index") {
      cfg.warnings.push_back(w.str() + "unknown key, ignored");
      continue;
    }
    if (list.IsNull()) continue;
    if (!list.IsSequence()) return Error{w.str() + "expected a list, got " + shown(list)};
    for (const YAML::Node& item : list) {
      if (key == "index") {
        auto r = as_int(item, w, 0, 1023);
        if (!r) return r.error();
        cfg.filter_indices.push_back(*r);
      } else {
        if (!item.IsScalar() || item.Scalar().empty())
          return Error{w.str() + "expected a GPU UUID, got " + shown(item)};
        cfg.filter_uuids.push_back(item.Scalar());
      }
    }
  }
  return {};
}

// An operating mode: a sharing mode, or mig.
struct ModeChoice {
  SharingMode sharing = SharingMode::kTimeslice;
  bool mig = false;
};

// An operating mode; `what` names the node or GPU it is for. "hami-core" is
// upstream's word for timeslice, kept so upstream's config.json reads as is.
Result<ModeChoice> as_mode(const YAML::Node& n, const Where& w, const std::string& what) {
  if (n.IsScalar()) {
    const std::string s = lower(n.Scalar());
    if (s.empty() || s == "timeslice" || s == "hami-core") return ModeChoice{};
    if (s == "mps") return ModeChoice{SharingMode::kMps, false};
    if (s == "mig") return ModeChoice{SharingMode::kTimeslice, true};
  }
  return Error{w.str() + what + ": expected timeslice (also written hami-core), mps or mig, got " +
               shown(n)};
}

Result<MigStrategy> as_mig_strategy(const YAML::Node& n, const Where& w) {
  if (n.IsScalar()) {
    const std::string s = lower(n.Scalar());
    if (s.empty() || s == "none") return MigStrategy::kNone;
    if (s == "single") return MigStrategy::kSingle;
    if (s == "mixed") return MigStrategy::kMixed;
  }
  return Error{w.str() + "expected none, single or mixed, got " + shown(n)};
}

// devicemodes: [{uuid: GPU-..., operatingmode: mps}, {index: 1, operatingmode: timeslice}]
Result<void> apply_device_modes(PluginConfig& cfg, const YAML::Node& list,
                                const std::string& source, const std::string& prefix,
                                const std::string& node_name) {
  if (list.IsNull()) return {};
  if (!list.IsSequence())
    return Error{Where{source, prefix, list}.str() + "expected a list, got " + shown(list)};
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node entry = list[i];
    const std::string at = prefix + "[" + std::to_string(i) + "]";
    if (!entry.IsMap())
      return Error{Where{source, at, entry}.str() + "expected a mapping, got " + shown(entry)};
    GpuModeOverride o;
    std::optional<YAML::Node> mode;
    for (auto it = entry.begin(); it != entry.end(); ++it) {
      const std::string name = it->first.Scalar();
      const std::string key = lower(name);
      const YAML::Node v = it->second;  // a copy: it-> yields a temporary
      const Where w{source, at + "." + name, v};
      if (key == "uuid") {
        if (!v.IsScalar() || v.Scalar().empty())
          return Error{w.str() + "expected a GPU UUID, got " + shown(v)};
        o.uuid = v.Scalar();
      } else if (key == "index") {
        auto r = as_int(v, w, 0, 1023);
        if (!r) return r.error();
        o.index = *r;
      } else if (key == "operatingmode") {
        mode = v;
      } else {
        cfg.warnings.push_back(w.str() + "unknown key, ignored");
      }
    }
    const Where w{source, at, entry};
    if (o.uuid.empty() == (o.index < 0))
      return Error{w.str() + "name the GPU by exactly one of uuid or index"};
    if (!mode) return Error{w.str() + "operatingmode missing (timeslice, mps or mig)"};
    const std::string gpu =
        "GPU " + (o.uuid.empty() ? std::to_string(o.index) : o.uuid) + " on node " + node_name;
    auto m = as_mode(*mode, Where{source, at + ".operatingmode", *mode}, gpu);
    if (!m) return m.error();
    o.mode = m->sharing;
    o.mig = m->mig;
    cfg.gpu_modes.push_back(std::move(o));
  }
  return {};
}

Result<void> apply_node_entry(PluginConfig& cfg, const YAML::Node& entry, const std::string& source,
                              const std::string& prefix, const std::string& node_name) {
  for (auto it = entry.begin(); it != entry.end(); ++it) {
    const std::string name = it->first.Scalar();
    const std::string key = lower(name);
    const YAML::Node v = it->second;  // a copy: it-> yields a temporary
    const Where w{source, prefix + "." + name, v};
    auto node_key = apply_node_key(cfg, key, v, w);
    if (!node_key) return node_key.error();
    if (*node_key || key == "name") continue;
    if (key == "migstrategy") {
      // Upstream's per-node --mig-strategy (parsed there, unused); ours applies it.
      auto r = as_mig_strategy(v, w);
      if (!r) return r.error();
      cfg.mig_strategy = *r;
    } else if (key == "operatingmode") {
      auto r = as_mode(v, w, "node " + node_name);
      if (!r) return r.error();
      cfg.sharing_mode = r->sharing;
      cfg.mig_mode = r->mig;
    } else if (key == "devicemodes") {
      auto r = apply_device_modes(cfg, v, source, w.key, node_name);
      if (!r) return r.error();
    } else if (key == "enablegetpreferredallocation") {
      auto r = as_bool(v, w);
      if (!r) return r.error();
      cfg.enable_get_preferred_allocation = *r;
    } else if (key == "filterdevices") {
      auto r = apply_filter(cfg, v, source, w.key);
      if (!r) return r.error();
    } else {
      cfg.warnings.push_back(w.str() + "unknown key, ignored");
    }
  }
  return {};
}

Result<void> apply_nodeconfig(PluginConfig& cfg, const YAML::Node& list, const std::string& source,
                              const std::string& node_name) {
  if (list.IsNull()) return {};
  if (!list.IsSequence())
    return Error{Where{source, "nodeconfig", list}.str() + "expected a list, got " + shown(list)};
  bool applied = false;
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node& entry = list[i];
    const std::string prefix = "nodeconfig[" + std::to_string(i) + "]";
    if (!entry.IsMap())
      return Error{Where{source, prefix, entry}.str() + "expected a mapping, got " + shown(entry)};
    std::string name;
    for (auto it = entry.begin(); it != entry.end(); ++it) {
      if (lower(it->first.Scalar()) == "name" && it->second.IsScalar()) name = it->second.Scalar();
    }
    if (name.empty()) return Error{Where{source, prefix, entry}.str() + "an entry without a name"};
    if (name != node_name) continue;
    if (applied) {
      cfg.warnings.push_back(Where{source, prefix, entry}.str() + "a second entry for node " +
                             node_name + "; it is applied over the first");
    }
    auto r = apply_node_entry(cfg, entry, source, prefix, node_name);
    if (!r) return r;
    applied = true;
    cfg.sources.push_back(source + " (" + prefix + ", node " + node_name + ")");
  }
  return {};
}

std::string fmt_double(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

bool PluginConfig::filtered(const std::string& uuid, int index) const {
  return std::find(filter_uuids.begin(), filter_uuids.end(), uuid) != filter_uuids.end() ||
         std::find(filter_indices.begin(), filter_indices.end(), index) != filter_indices.end();
}

SharingMode PluginConfig::mode_of(const std::string& uuid, int index) const {
  for (auto it = gpu_modes.rbegin(); it != gpu_modes.rend(); ++it) {
    if (it->uuid.empty() ? it->index == index : it->uuid == uuid) return it->mode;
  }
  return sharing_mode;
}

bool PluginConfig::mig_of(const std::string& uuid, int index) const {
  for (auto it = gpu_modes.rbegin(); it != gpu_modes.rend(); ++it) {
    if (it->uuid.empty() ? it->index == index : it->uuid == uuid) return it->mig;
  }
  return mig_mode;
}

const char* mig_strategy_name(MigStrategy s) {
  switch (s) {
    case MigStrategy::kSingle:
      return "single";
    case MigStrategy::kMixed:
      return "mixed";
    case MigStrategy::kNone:
      break;
  }
  return "none";
}

const char* sharing_mode_name(SharingMode m) {
  return m == SharingMode::kMps ? "mps" : "timeslice";
}

const char* registered_mode(SharingMode m) {
  return m == SharingMode::kMps ? protocol::kModeMps : protocol::kModeHamiCore;
}

std::string PluginConfig::describe() const {
  std::string s =
      "deviceSplitCount=" + std::to_string(device_split_count) +
      " deviceMemoryScaling=" + fmt_double(device_memory_scaling) +
      " deviceCoreScaling=" + fmt_double(device_core_scaling) +
      " disableCoreLimit=" + (disable_core_limit ? "true" : "false") +
      " enableNumaTopology=" + (enable_numa_topology ? "true" : "false") +
      " enableGetPreferredAllocation=" + (enable_get_preferred_allocation ? "true" : "false") +
      " resourceCountName=" + resource_count_name +
      " resourcePriorityName=" + resource_priority_name;
  s += std::string(" operatingMode=") + (mig_mode ? "mig" : sharing_mode_name(sharing_mode));
  for (const auto& o : gpu_modes) {
    s += " GPU " + (o.uuid.empty() ? std::to_string(o.index) : o.uuid) + "=" +
         (o.mig ? "mig" : sharing_mode_name(o.mode));
  }
  s += std::string(" migStrategy=") + mig_strategy_name(mig_strategy);
  if (lib_cuda_log_level) s += " libCudaLogLevel=" + std::to_string(*lib_cuda_log_level);
  if (!filter_uuids.empty() || !filter_indices.empty()) {
    s += " filterdevices=";
    for (const auto& u : filter_uuids)
      s += u + ",";
    for (int i : filter_indices)
      s += std::to_string(i) + ",";
    s.pop_back();
  }
  return s;
}

Result<void> apply_config_text(PluginConfig& cfg, std::string_view text, const std::string& source,
                               const std::string& node_name) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return Error{source + ":" + std::to_string(e.mark.line + 1) + ": not valid YAML: " + e.msg};
  }
  if (root.IsNull()) return {};
  if (!root.IsMap()) return Error{source + ": expected a mapping at the top, got " + shown(root)};
  try {
    for (auto it = root.begin(); it != root.end(); ++it) {
      if (!it->first.IsScalar()) continue;
      const std::string key = lower(it->first.Scalar());
      Result<void> r;
      if (key == "nvidia") {
        r = apply_nvidia(cfg, it->second, source);
        if (r) cfg.sources.push_back(source + " (nvidia)");
      } else if (key == "nodeconfig") {
        r = apply_nodeconfig(cfg, it->second, source, node_name);
      }
      // Other top-level keys are other vendors' blocks: not ours to judge.
      if (!r) return r;
    }
  } catch (const YAML::Exception& e) {
    // yaml-cpp throws for shapes we did not expect (a non-scalar key, say).
    return Error{source + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg};
  }
  return {};
}

Result<void> apply_config_file(PluginConfig& cfg, const std::string& path,
                               const std::string& node_name) {
  auto text = read_small_file(path, kMaxConfigFile);
  if (!text) return Error{"config file " + text.error().message};
  return apply_config_text(cfg, *text, path, node_name);
}

bool XidPolicy::critical(uint64_t xid) const {
  if (!watch) return false;
  return std::find(std::begin(kApplicationXids), std::end(kApplicationXids), xid) ==
             std::end(kApplicationXids) &&
         std::find(ignored.begin(), ignored.end(), xid) == ignored.end();
}

std::string XidPolicy::describe() const {
  if (!watch) return "Xid events are not watched (--ignore-xids all)";
  std::string s = "ignoring Xids ";
  for (uint64_t x : kApplicationXids)
    s += std::to_string(x) + ",";
  for (uint64_t x : ignored)
    s += std::to_string(x) + ",";
  s.pop_back();
  s += "; a critical Xid makes its GPU unhealthy ";
  if (recovery.count() == 0) return s + "until the plugin restarts";
  return s + "for " + std::to_string(recovery.count()) + " ms";
}

Result<void> parse_ignore_xids(std::string_view list, XidPolicy& policy) {
  std::vector<uint64_t> ids;
  bool all = false;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string_view::npos) end = list.size();
    std::string_view item = list.substr(start, end - start);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front())))
      item.remove_prefix(1);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back())))
      item.remove_suffix(1);
    start = end + 1;
    if (item.empty()) continue;
    const std::string word = lower(std::string(item));
    if (word == "all" || word == "xids") {
      all = true;
      continue;
    }
    uint64_t v = 0;
    const auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc() || p != item.data() + item.size()) {
      return Error{"--ignore-xids: '" + std::string(item) +
                   "' is not an Xid number (expected e.g. 48,79, or all)"};
    }
    ids.push_back(v);
  }
  policy.watch = !all;
  policy.ignored = std::move(ids);
  return {};
}

}  // namespace hami::deviceplugin
