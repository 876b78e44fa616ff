// The device plugin's config files (upstream's device config YAML and the
// per-node config.json) as an operator may write them: any text gives a
// config within range or an error that says where.
#include <cstddef>
#include <cstdint>
#include <string>

#include "deviceplugin/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  hami::deviceplugin::PluginConfig cfg;
  auto r = hami::deviceplugin::apply_config_text(cfg, input, "fuzz.yaml", "node-1");
  if (!r) {
    if (r.error().message.rfind("fuzz.yaml", 0) != 0) __builtin_trap();
    return 0;
  }
  if (cfg.device_split_count < 1 || cfg.device_split_count > hami::deviceplugin::kMaxSplitCount)
    __builtin_trap();
  if (!(cfg.device_memory_scaling > 0) || !(cfg.device_core_scaling > 0)) __builtin_trap();
  if (cfg.resource_count_name.find('/') == std::string::npos) __builtin_trap();
  // Every per-GPU mode names its GPU one way.
  for (const auto& o : cfg.gpu_modes)
    if (o.uuid.empty() == (o.index < 0)) __builtin_trap();
  return 0;
}
