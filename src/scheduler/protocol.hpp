#pragma once
// kube-scheduler's extender wire format (k8s.io/kube-scheduler/extender/v1):
// the structs have no JSON tags, so keys are Go field names ("Pod",
// "NodeNames", "PodUID"); Go's decoder matches them case-insensitively, and
// so does this one (an exact match wins). The pod inside is a v1.Pod with its
// usual lower-case JSON. Errors say which field is wrong; nothing throws.
//
//   auto args = hami::scheduler::parse_extender_args(body);
//   if (!args) return reply_error(args.error().message);
//   FilterResult r = extender.filter(args->pod, args->node_names);
//   std::string out = hami::scheduler::filter_result_json(*args, r);
//
// Both forms are answered in kind: NodeNames in → NodeNames out; Nodes (a
// v1.NodeList, nodeCacheCapable: false) in → Nodes out with the fitting
// items, unchanged.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/json_limits.hpp"
#include "common/result.hpp"
#include "k8s/objects.hpp"
#include "scheduler/extender.hpp"

namespace hami::scheduler {

// Request bodies larger than this are refused (upstream: 1 MiB for filter).
// 5,000 node names take ~100 KiB; the Nodes form (nodeCacheCapable: false)
// carries whole Node objects, ~5 KiB each, so it fits ~3,000 nodes.
inline constexpr size_t kMaxExtenderBody = 16u << 20;
inline constexpr size_t kMaxBindingBody = 64u << 10;
// Every body's JSON is checked against these before it is parsed, so a
// request's parse costs at most ~100 MB (common/json_limits.hpp).
inline constexpr JsonLimits kExtenderJsonLimits{};

struct ExtenderArgs {
  k8s::Pod pod;
  std::vector<std::string> node_names;
  // The Nodes form: the items, by name order of node_names.
  std::optional<std::vector<nlohmann::json>> node_items;
};

// The value of `key` in `object`, matched as Go does; nullptr if absent.
const nlohmann::json* go_field(const nlohmann::json& object, std::string_view key);

Result<ExtenderArgs> parse_extender_args(std::string_view body);
// The same through a complete JSON parse of the body. parse_extender_args
// reads the usual bodies faster and falls back to this for everything else;
// exposed for the fuzz target that checks both agree.
Result<ExtenderArgs> parse_extender_args_full(std::string_view body);
Result<BindRequest> parse_binding_args(std::string_view body);

std::string filter_result_json(const ExtenderArgs& args, const FilterResult& result);
std::string filter_error_json(const std::string& error);
std::string priorities_json(const std::vector<HostPriority>& priorities);
std::string binding_result_json(const std::string& error);

}  // namespace hami::scheduler
