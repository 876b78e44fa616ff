#include "fit/options.hpp"

#include <cctype>
#include <charconv>
#include <initializer_list>

#include "common/text.hpp"

namespace hami::fit {
namespace {

// Built with append: GCC 12 misreports "literal" + std::string (-Wrestrict).
std::string cat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view p : parts)
    out.append(p);
  return out;
}

Error value_error(std::string_view value, std::string_view why) {
  std::string m = "'";
  m.append(value);
  m.append("': ");
  m.append(why);
  return Error{std::move(m)};
}

template <class F>
void for_each_part(std::string_view value, char sep, F&& f) {
  while (true) {
    const size_t cut = value.find(sep);
    f(value.substr(0, cut));
    if (cut == std::string_view::npos) return;
    value.remove_prefix(cut + 1);
  }
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

Error keyed(const char* key, const Error& e) {
  std::string m = key;
  m.append("=");
  m.append(e.message);
  return Error{std::move(m)};
}

}  // namespace

std::vector<std::string> parse_list(std::string_view value) {
  std::vector<std::string> out;
  for_each_part(value, ',', [&](std::string_view part) {
    part = trim(part);
    if (!part.empty()) out.emplace_back(part);
  });
  return out;
}

Result<bool> parse_go_bool(std::string_view value) {
  const std::string_view v = trim(value);
  for (const char* t : {"1", "t", "T", "TRUE", "true", "True"})
    if (v == t) return true;
  for (const char* f : {"0", "f", "F", "FALSE", "false", "False"})
    if (v == f) return false;
  return value_error(value, "not a boolean (true or false)");
}

Result<NodePolicy> parse_node_policy(std::string_view value) {
  const std::string_view v = trim(value);
  if (v == "binpack") return NodePolicy::kBinpack;
  if (v == "spread") return NodePolicy::kSpread;
  return value_error(value, "unknown node policy (binpack or spread)");
}

Result<GpuPolicy> parse_gpu_policy(std::string_view value) {
  GpuPolicy p;
  const std::string_view v = trim(value);
  const bool chain = v.find(',') != std::string_view::npos || v == "numa";
  bool bad = false;
  std::string_view bad_part;
  for_each_part(v, ',', [&](std::string_view part) {
    part = trim(part);
    if (bad || part.empty()) return;  // "numa,binpack," is still a chain
    SortKey key{};
    if (part == "binpack") {
      key = SortKey::kBinpack;
    } else if (part == "spread") {
      key = SortKey::kSpread;
    } else if (part == "numa") {
      key = SortKey::kNuma;
    } else if (part == "mutex") {
      p.mutex = true;
      return;
    } else if (part == "topology-aware") {
      p.topology_aware = true;
      return;
    } else {
      bad = true;
      bad_part = part;
      return;
    }
    for (uint8_t i = 0; i < p.chain_len; ++i)
      if (p.chain[i] == key) return;  // upstream drops repeated keys
    p.chain[p.chain_len++] = key;
  });
  if (bad) {
    std::string why = "unknown GPU policy '";
    why.append(bad_part);
    why.append("' (binpack, spread, numa, mutex, topology-aware, or a comma chain of them)");
    return value_error(value, why);
  }
  if (chain) {
    p.order = GpuPolicy::Order::kChain;
    // A chain naming no sort key ("mutex,topology-aware") sorts as spread.
    if (p.chain_len == 0) p.chain[p.chain_len++] = SortKey::kSpread;
    return p;
  }
  p.chain = {};
  p.chain_len = 0;
  if (v == "binpack") {
    p.order = GpuPolicy::Order::kBinpack;
  } else if (v == "mutex") {
    p.order = GpuPolicy::Order::kMutex;
  } else {
    p.order = GpuPolicy::Order::kSpread;  // spread, topology-aware
  }
  return p;
}

Result<ScoringWeights> parse_scoring_weights(std::string_view value) {
  ScoringWeights w{0, 0, 0};
  bool seen[3] = {false, false, false};
  size_t parts = 0;
  for_each_part(value, ',', [&](std::string_view) { ++parts; });
  if (parts != 3) return value_error(value, "expected slot, core and memory weights");
  std::optional<Error> err;
  for_each_part(value, ',', [&](std::string_view part) {
    if (err) return;
    part = trim(part);
    const size_t eq = part.find('=');
    if (eq == std::string_view::npos) {
      err = value_error(value, "expected key=value entries");
      return;
    }
    const std::string_view key = trim(part.substr(0, eq));
    const std::string_view num = trim(part.substr(eq + 1));
    int slot = key == "slot" ? 0 : key == "core" ? 1 : key == "memory" ? 2 : -1;
    if (slot < 0) {
      err = value_error(value, cat({"unknown weight '", key, "' (slot, core, memory)"}));
      return;
    }
    if (seen[slot]) {
      err = value_error(value, cat({"duplicate '", key, "' weight"}));
      return;
    }
    int64_t n = 0;
    const char* first = num.data();
    const char* last = num.data() + num.size();
    if (!num.empty() && *first == '+') ++first;  // Go's ParseInt takes a plus sign
    const auto [ptr, ec] = std::from_chars(first, last, n);
    if (num.empty() || ec != std::errc() || ptr != last) {
      err = value_error(value, cat({"'", key, "' weight must be an integer"}));
      return;
    }
    if (n < 0) {
      err = value_error(value, cat({"'", key, "' weight must not be negative"}));
      return;
    }
    seen[slot] = true;
    (slot == 0 ? w.slot : slot == 1 ? w.core : w.memory) = n;
  });
  if (err) return *err;
  if (w.slot == 0 && w.core == 0 && w.memory == 0)
    return value_error(value, "at least one weight must be positive");
  return w;
}

Result<PodOptions> parse_pod_options(AnnotationLookup annotation, const PolicyDefaults& defaults) {
  PodOptions o;
  o.node_policy = defaults.node;
  o.gpu_policy = defaults.gpu;
  if (auto v = annotation(kAnnoUseGpuType)) {
    o.use_types = parse_list(*v);
    for (auto& t : o.use_types)
      t = upper(t);
  }
  if (auto v = annotation(kAnnoNoUseGpuType)) {
    o.nouse_types = parse_list(*v);
    for (auto& t : o.nouse_types)
      t = upper(t);
  }
  if (auto v = annotation(kAnnoUseGpuUuid)) o.use_uuids = parse_list(*v);
  if (auto v = annotation(kAnnoNoUseGpuUuid)) o.nouse_uuids = parse_list(*v);
  if (auto v = annotation(kAnnoNumaBind)) {
    auto b = parse_go_bool(*v);
    if (!b) return keyed(kAnnoNumaBind, b.error());
    o.numa_bind = *b;
  }
  if (auto v = annotation(kAnnoVgpuMode)) {
    const std::string_view mode = trim(*v);
    if (!mode.empty()) o.vgpu_mode = std::string(mode);
  }
  if (auto v = annotation(kAnnoNodePolicy)) {
    auto p = parse_node_policy(*v);
    if (!p) return keyed(kAnnoNodePolicy, p.error());
    o.node_policy = *p;
  }
  if (auto v = annotation(kAnnoGpuPolicy)) {
    auto p = parse_gpu_policy(*v);
    if (!p) return keyed(kAnnoGpuPolicy, p.error());
    o.gpu_policy = *p;
  }
  if (auto v = annotation(kAnnoScoringWeights)) {
    auto w = parse_scoring_weights(*v);
    if (!w) return keyed(kAnnoScoringWeights, w.error());
    o.weights = *w;
  }
  return o;
}

}  // namespace hami::fit
