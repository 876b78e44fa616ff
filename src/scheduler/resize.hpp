#pragma once
// A running pod's resize: the user asks with one annotation, the scheduler
// checks it as it would place a new pod on the pod's own GPUs, and answers by
// rewriting the pod's allocation (or with an Event naming the refusal).
//
//   kubectl annotate pod P nvidia.com/vgpu-resize='gpumem=8000,gpucores=60' --overwrite
//   kubectl annotate pod P nvidia.com/vgpu-resize='main:gpumem=8000;side:gpucores=20' --overwrite
//
// The first form names no container: the pod's only GPU container. gpumem is
// MiB per GPU (as the resource), gpucores percent per GPU; what is not named
// stays. The check (decide_resize), on plain data:
//   - capacity: on each of the container's GPUs, with the pod's own charges
//     taken off, the new size must fit as a new pod's would (memory, cores, an
//     exclusive GPU, the pod's type and mode options), through src/fit;
//   - quota: what the pod grows by must fit its namespace's quotas;
//   - MPS: a client can only have its memory lowered live
//     (protocol::mps_resize_refusal).
// Refusals start with kReasonResize.
//
//   auto targets = parse_resize(pod.annotations.at(kResizeAnnotation));
//   ResizeDecision d = decide_resize({node, allocation, names, *targets, options}, quota);
//   if (!d.refusal.empty()) event(pod, "ResizeRefused", d.refusal); else patch(d.devices);

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"
#include "fit/options.hpp"
#include "fit/types.hpp"
#include "scheduler/cache.hpp"

namespace hami::scheduler {

inline constexpr const char* kResizeAnnotation = "nvidia.com/vgpu-resize";
inline constexpr const char* kReasonResize = "ResizeRefused";
inline constexpr size_t kMaxResizeText = 4096;

struct ResizeTarget {
  std::string container;  // empty: the pod's only GPU container
  std::optional<int32_t> mem_mib;
  std::optional<int32_t> cores;
  bool operator==(const ResizeTarget&) const = default;
};

// The annotation's value; an error names what cannot be read.
Result<std::vector<ResizeTarget>> parse_resize(std::string_view text);

struct ResizeInput {
  const fit::NodeDevices& node;                // the pod's node, its charges included
  const fit::PodDevices& allocation;           // the pod's allocation, positional
  const std::vector<std::string>& containers;  // container names, same positions
  const std::vector<ResizeTarget>& targets;
  fit::PodOptions options;  // the pod's own (type, mode, user); GPUs are pinned here
};

// The quota side: the namespace's quotas and what it holds now.
struct ResizeQuota {
  std::string ns;
  NamespaceUsage used;
  // "" when `grow` fits on top of `used` (QuotaTracker::check), else why.
  std::function<std::string(const std::string& ns, const NamespaceUsage& used, int64_t mem_mib,
                            int64_t cores)>
      check;
};

struct ResizeDecision {
  fit::PodDevices devices;  // the new allocation, when allowed
  std::string refusal;      // "" when allowed
  bool changed = false;     // allowed and different from the allocation
};

ResizeDecision decide_resize(const ResizeInput& in, const ResizeQuota& quota);

}  // namespace hami::scheduler
