#include "deviceplugin/discovery.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "common/log.hpp"
#include "common/small_file.hpp"

namespace hami::deviceplugin {
namespace {

// NVML's bus id has an 8-digit domain ("00000000:18:00.0"); sysfs a 4-digit
// one, lower case ("0000:18:00.0").
std::optional<int> sysfs_numa(const std::string& sysfs_pci, std::string bus_id) {
  if (bus_id.empty()) return std::nullopt;
  std::transform(bus_id.begin(), bus_id.end(), bus_id.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (const size_t colon = bus_id.find(':'); colon == 8) bus_id = bus_id.substr(4);
  auto text = read_small_file(sysfs_pci + "/" + bus_id + "/numa_node", 64);
  if (!text) return std::nullopt;
  int v = -1;
  const std::string& t = *text;
  const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || v < 0) return std::nullopt;
  return v;
}

}  // namespace

Result<std::vector<Gpu>> discover_gpus(nvml::Library& nvml, const PluginConfig& cfg,
                                       const std::string& sysfs_pci) {
  auto count = nvml.device_count();
  if (!count) return Error{"cannot count the GPUs: " + count.error().message};
  std::vector<Gpu> gpus;
  for (int i = 0; i < *count; ++i) {
    auto info = nvml.device(i);
    if (!info) {
      log::error("GPU %d left out: %s", i, info.error().message.c_str());
      continue;
    }
    if (cfg.filtered(info->uuid, i)) {
      log::info("GPU %d (%s) left out: filterdevices in the config", i, info->uuid.c_str());
      continue;
    }
    Gpu g;
    g.index = i;
    g.uuid = info->uuid;
    g.name = info->name;
    g.memory_total = info->memory_total;
    g.numa = info->numa_node ? info->numa_node : sysfs_numa(sysfs_pci, info->pci_bus_id);
    gpus.push_back(std::move(g));
  }
  return gpus;
}

void check_health(nvml::Library& nvml, DeviceState& state) {
  for (const Gpu& g : state.gpus()) {
    auto mem = nvml.memory(g.index);
    if (mem) {
      if (state.set_health(g.index, true, {}))
        log::info("GPU %d (%s) is healthy again", g.index, g.uuid.c_str());
    } else if (state.set_health(g.index, false, mem.error().message)) {
      log::error("GPU %d (%s) is unhealthy: %s", g.index, g.uuid.c_str(),
                 mem.error().message.c_str());
    }
  }
}

}  // namespace hami::deviceplugin
