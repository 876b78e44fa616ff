// The pod annotation values and resource quantities src/fit parses (the
// webhook and extender feed it whatever users write). The input is split at
// NUL bytes into the nine annotation values and four quantities, in the order
// of kKeys and kResources; a missing field is an absent annotation or
// resource. Whatever parses must be self-consistent, re-parse to the same
// value, and fit a small node without breaking the fitting invariants.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fit/fit.hpp"
#include "fit/options.hpp"
#include "fit/quantity.hpp"
#include "fit/resources.hpp"

namespace {

using namespace hami::fit;  // NOLINT

const char* const kKeys[] = {kAnnoUseGpuType,   kAnnoNoUseGpuType, kAnnoUseGpuUuid,
                             kAnnoNoUseGpuUuid, kAnnoNumaBind,     kAnnoVgpuMode,
                             kAnnoNodePolicy,   kAnnoGpuPolicy,    kAnnoScoringWeights};
const char* const kResources[] = {"nvidia.com/gpu", "nvidia.com/gpumem",
                                  "nvidia.com/gpumem-percentage", "nvidia.com/gpucores"};

NodeDevices small_node() {
  NodeDevices n{"n", {}};
  for (int i = 0; i < 4; ++i) {
    GpuDevice d;
    d.uuid = "GPU-" + std::to_string(i);
    d.index = i;
    d.type = i % 2 ? "NVIDIA A100" : "NVIDIA H200";
    d.numa = i / 2;
    d.total_mem_mib = 20000;
    d.used_tenants = i;
    d.used_mem_mib = 3000 * i;
    d.used_cores = 20 * i;
    n.devices.push_back(d);
  }
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> fields;
  for (size_t start = 0; start <= input.size();) {
    const size_t nul = input.find('\0', start);
    const size_t end = nul == std::string_view::npos ? input.size() : nul;
    fields.push_back(input.substr(start, end - start));
    start = end + 1;
  }
  auto field = [&](size_t i) -> std::optional<std::string_view> {
    if (i >= fields.size()) return std::nullopt;
    return fields[i];
  };

  for (std::string_view f : fields) {
    (void)parse_go_bool(f);
    (void)parse_node_policy(f);
    if (auto p = parse_gpu_policy(f)) {
      if ((p->order == GpuPolicy::Order::kChain) != (p->chain_len > 0)) __builtin_trap();
    }
    if (auto w = parse_scoring_weights(f)) {
      if (w->slot < 0 || w->core < 0 || w->memory < 0) __builtin_trap();
      if (w->slot + w->core + w->memory == 0) __builtin_trap();
    }
    if (auto q = parse_whole_quantity(f)) {
      auto again = parse_whole_quantity(std::to_string(*q));
      if (!again || *again != *q) __builtin_trap();
    } else if (q.error().message.empty()) {
      __builtin_trap();
    }
  }

  auto options = parse_pod_options(
      [&](std::string_view key) -> std::optional<std::string_view> {
        for (size_t i = 0; i < std::size(kKeys); ++i)
          if (key == kKeys[i]) return field(i);
        return std::nullopt;
      },
      PolicyDefaults{});
  auto limits = [&](std::string_view name) -> std::optional<std::string_view> {
    for (size_t i = 0; i < std::size(kResources); ++i)
      if (name == kResources[i]) return field(std::size(kKeys) + i);
    return std::nullopt;
  };
  auto none = [](std::string_view) -> std::optional<std::string_view> { return std::nullopt; };
  ResourceConfig config;
  config.memory_factor = 1 + static_cast<int32_t>(size % 4);
  auto request = container_request(limits, none, config);
  if (!options) {
    if (options.error().message.empty()) __builtin_trap();
    return 0;
  }
  for (const auto& t : options->use_types)
    if (t.empty()) __builtin_trap();
  if (!request) {
    if (request.error().message.empty()) __builtin_trap();
    return 0;
  }
  if (!*request) return 0;
  const ContainerRequest& c = **request;
  if (c.nums < 1 || c.mem_mib < 0 || c.cores < 0 || c.cores > 100) __builtin_trap();
  if (c.mem_percent != kMemPercentUnset && (c.mem_percent < 1 || c.mem_percent > 100)) {
    __builtin_trap();
  }
  if (c.mem_mib == 0 && c.mem_percent == kMemPercentUnset) __builtin_trap();

  // Keep the count small enough to fit sometimes.
  ContainerRequest small = c;
  small.nums = 1 + c.nums % 4;
  auto pod = PreparedPod::make(PodRequest{{small, small}}, *options);
  if (!pod) __builtin_trap();  // a parsed request is always a valid one
  const NodeDevices node = small_node();
  FitScratch scratch;
  Placement placement;
  const NodeFit f = fit_pod(node, *pod, scratch, &placement);
  if (!f.fits) {
    if (placement.assignments.size() != 0 || describe(f.failure).empty()) __builtin_trap();
    return 0;
  }
  // Each container got exactly nums distinct GPUs.
  for (uint16_t ci = 0; ci < 2; ++ci) {
    std::vector<uint16_t> got;
    for (const auto& a : placement.assignments) {
      if (a.device >= node.devices.size()) __builtin_trap();
      if (a.container == ci) got.push_back(a.device);
    }
    if (got.size() != static_cast<size_t>(small.nums)) __builtin_trap();
    for (size_t i = 0; i < got.size(); ++i)
      for (size_t j = i + 1; j < got.size(); ++j)
        if (got[i] == got[j]) __builtin_trap();
  }
  return 0;
}
