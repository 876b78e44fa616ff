#include "deviceplugin/gpu.hpp"

#include <algorithm>
#include <cmath>

#include "protocol/annotations.hpp"

namespace hami::deviceplugin {

using protocol::device_type;
using protocol::NodeDevice;

std::vector<std::string> virtual_ids(const Gpu& gpu, int split_count) {
  if (gpu.dynamic_mig) split_count = gpu.dynamic_mig->count;
  std::vector<std::string> ids;
  ids.reserve(static_cast<size_t>(split_count));
  for (int i = 0; i < split_count; ++i)
    ids.push_back(gpu.uuid + "-" + std::to_string(i));
  return ids;
}

std::string physical_uuid(std::string_view id) {
  const size_t dash = id.rfind('-');
  if (dash == std::string_view::npos || dash + 1 == id.size()) return std::string(id);
  for (size_t i = dash + 1; i < id.size(); ++i) {
    if (id[i] < '0' || id[i] > '9') return std::string(id);
  }
  return std::string(id.substr(0, dash));
}

const char* registered_mode(const Gpu& gpu) {
  return gpu.mig || gpu.dynamic_mig ? protocol::kModeMig : registered_mode(gpu.mode);
}

std::vector<NodeDevice> node_devices(const std::vector<Gpu>& gpus, const PluginConfig& cfg) {
  std::vector<NodeDevice> out;
  out.reserve(gpus.size());
  for (const Gpu& g : gpus) {
    NodeDevice d;
    d.id = g.uuid;
    d.index = g.index;
    d.count = g.dynamic_mig ? g.dynamic_mig->count : cfg.device_split_count;
    // A MIG device's memory and SMs are the hardware's: as upstream does in
    // MIG mode, neither is scaled.
    const bool mig = g.mig || g.dynamic_mig;
    const double scale = mig ? 1.0 : cfg.device_memory_scaling;
    const double mib = static_cast<double>(g.memory_total >> 20) * scale;
    d.devmem = static_cast<int32_t>(std::min(mib, 2147483647.0));
    d.devcore = mig ? 100 : static_cast<int32_t>(std::lround(cfg.device_core_scaling * 100));
    d.type = device_type(g.name);
    d.numa = g.numa.value_or(0);
    d.mode = registered_mode(g);
    d.health = g.healthy;
    if (g.dynamic_mig) d.mig_profiles = g.dynamic_mig->profiles;
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<protocol::DeviceLinks> device_links(const std::vector<Gpu>& gpus) {
  std::vector<protocol::DeviceLinks> out;
  const bool any =
      std::any_of(gpus.begin(), gpus.end(), [](const Gpu& g) { return !g.peers.empty(); });
  if (!any) return out;
  out.reserve(gpus.size());
  for (const Gpu& g : gpus)
    out.push_back({g.uuid, g.peers});
  return out;
}

}  // namespace hami::deviceplugin
