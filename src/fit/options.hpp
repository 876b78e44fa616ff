#pragma once
// A pod's placement options, parsed from the values of upstream HAMi's pod
// annotations (keys below): GPU model and UUID filters, NUMA binding, vGPU
// mode, node and GPU scheduling policies, device scoring weights. Strings in,
// typed values out; a bad value is an error that names the annotation and says
// what is accepted, where upstream mostly ignored it silently.
//
//   auto opts = hami::fit::parse_pod_options(
//       [&](std::string_view key) { return lookup_annotation(pod, key); }, defaults);
//   if (!opts) return reject(opts.error().message);
//   // "hami.io/gpu-scheduler-policy='bin-pack': unknown policy 'bin-pack' (…)"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/function_ref.hpp"
#include "common/result.hpp"
#include "fit/types.hpp"

namespace hami::fit {

inline constexpr const char* kAnnoUseGpuType = "nvidia.com/use-gputype";
inline constexpr const char* kAnnoNoUseGpuType = "nvidia.com/nouse-gputype";
inline constexpr const char* kAnnoUseGpuUuid = "nvidia.com/use-gpuuuid";
inline constexpr const char* kAnnoNoUseGpuUuid = "nvidia.com/nouse-gpuuuid";
inline constexpr const char* kAnnoNumaBind = "nvidia.com/numa-bind";
inline constexpr const char* kAnnoVgpuMode = "nvidia.com/vgpu-mode";
inline constexpr const char* kAnnoNodePolicy = "hami.io/node-scheduler-policy";
inline constexpr const char* kAnnoGpuPolicy = "hami.io/gpu-scheduler-policy";
inline constexpr const char* kAnnoScoringWeights = "hami.io/device-scoring-weights";

enum class NodePolicy : uint8_t { kBinpack, kSpread };

// A sort key of a policy chain ("numa,binpack").
enum class SortKey : uint8_t { kBinpack, kSpread, kNuma };

// hami.io/gpu-scheduler-policy. A single value keeps upstream's single-value
// ordering (binpack, spread, mutex; topology-aware orders as spread). A comma
// chain, or a bare "numa", orders lexicographically by its binpack/spread/numa
// keys; its mutex and topology-aware entries only act as filters.
struct GpuPolicy {
  enum class Order : uint8_t { kSpread, kBinpack, kMutex, kChain };
  Order order = Order::kSpread;
  std::array<SortKey, 3> chain{};  // the first chain_len entries, kChain only
  uint8_t chain_len = 0;
  bool mutex = false;           // a GPU already in use is refused
  bool topology_aware = false;  // accepted; NVLink-pair selection is not implemented

  bool operator==(const GpuPolicy&) const = default;
};

// hami.io/device-scoring-weights: every key required, non-negative, one > 0.
struct ScoringWeights {
  int64_t slot = 1;
  int64_t core = 1;
  int64_t memory = 1;
  bool operator==(const ScoringWeights&) const = default;
};

// The scheduler's flags (--node-scheduler-policy, --gpu-scheduler-policy),
// which a pod's annotations override.
struct PolicyDefaults {
  NodePolicy node = NodePolicy::kBinpack;
  GpuPolicy gpu{};
};

struct PodOptions {
  std::vector<std::string> use_types;    // upper-cased; a model must contain one
  std::vector<std::string> nouse_types;  // upper-cased; a model must contain none
  std::vector<std::string> use_uuids;    // exact; the GPU must be one of these
  std::vector<std::string> nouse_uuids;  // exact; the GPU must be none of these
  bool numa_bind = false;
  std::optional<std::string> vgpu_mode;  // the device's mode must be a substring of it
  NodePolicy node_policy = NodePolicy::kBinpack;
  GpuPolicy gpu_policy{};
  ScoringWeights weights{};
  // Not an annotation: the pod's runAsUser (its GPU container's, else the
  // pod's), set by the caller; an MPS GPU takes pods of one user only.
  int64_t user = kUserUndeclared;
};

using AnnotationLookup = FunctionRef<std::optional<std::string_view>(std::string_view key)>;

// Every option from the pod's annotations, defaults for those absent. The
// first bad value is the error.
Result<PodOptions> parse_pod_options(AnnotationLookup annotation, const PolicyDefaults& defaults);

// The single parsers, for flags and for callers with one value in hand. Each
// error message starts with the value quoted; parse_pod_options prefixes the key.
Result<NodePolicy> parse_node_policy(std::string_view value);
Result<GpuPolicy> parse_gpu_policy(std::string_view value);
Result<ScoringWeights> parse_scoring_weights(std::string_view value);
// Go's strconv.ParseBool set: 1 t T TRUE true True 0 f F FALSE false False.
Result<bool> parse_go_bool(std::string_view value);
// A comma list, entries trimmed, empty entries dropped ("A100, ,V100" → 2).
std::vector<std::string> parse_list(std::string_view value);

}  // namespace hami::fit
