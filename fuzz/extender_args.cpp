// kube-scheduler's ExtenderArgs and ExtenderBindingArgs as the extender reads
// them: any body parses or gives a message; the fast read of the usual bodies
// agrees with the complete JSON parse (same result, same error); a parsed one
// runs through filter and prioritize against a small cache, and every answer
// is valid JSON.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "protocol/node_register.hpp"
#include "scheduler/cache.hpp"
#include "scheduler/extender.hpp"
#include "scheduler/feed.hpp"
#include "scheduler/protocol.hpp"

namespace {

using namespace hami::scheduler;

struct World {
  ClusterCache cache;
  CacheFeed feed{cache};
  SchedulerConfig config;
  Extender ext{cache, config, nullptr, nullptr};
  World() {
    for (const char* n : {"node-1", "node-2"}) {
      std::vector<hami::protocol::NodeDevice> d = {{.id = std::string("GPU-") + n,
                                                    .count = 10,
                                                    .devmem = 16000,
                                                    .devcore = 100,
                                                    .type = "NVIDIA-Tesla T4",
                                                    .mode = "hami-core",
                                                    .health = true}};
      feed.node_changed(
          {{"metadata",
            {{"name", n},
             {"annotations",
              {{"hami.io/node-nvidia-register", hami::protocol::encode_node_devices(d)}}}}}});
    }
  }
};

void must_parse(const std::string& text) {
  if (nlohmann::json::parse(text, nullptr, false).is_discarded()) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World w;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  auto args = parse_extender_args(input);
  auto full = parse_extender_args_full(input);
  if (static_cast<bool>(args) != static_cast<bool>(full)) __builtin_trap();
  if (!args && args.error().message != full.error().message) __builtin_trap();
  if (args && (args->pod != full->pod || args->node_names != full->node_names ||
               args->node_items != full->node_items)) {
    __builtin_trap();
  }
  if (!args) {
    if (args.error().message.empty()) __builtin_trap();
    must_parse(filter_error_json(args.error().message));
  } else {
    FilterResult r = w.ext.filter(args->pod, args->node_names);
    must_parse(filter_result_json(*args, r));
    if (r.ours && r.error.empty() && r.nodes.size() + r.failed.size() < args->node_names.size()) {
      // Every distinct name is answered one way or the other.
      bool dup = false;
      for (size_t i = 0; i < args->node_names.size() && !dup; ++i)
        for (size_t j = i + 1; j < args->node_names.size(); ++j)
          dup |= args->node_names[i] == args->node_names[j];
      if (!dup) __builtin_trap();
    }
    auto p = w.ext.prioritize(args->pod, args->node_names);
    if (p) {
      for (const auto& h : *p)
        if (h.score < 0 || h.score > kMaxExtenderPriority) __builtin_trap();
      must_parse(priorities_json(*p));
    }
  }
  auto bind = parse_binding_args(input);
  if (!bind && bind.error().message.empty()) __builtin_trap();
  must_parse(binding_result_json(bind ? std::string() : bind.error().message));
  return 0;
}
