#include "nvml/topology.hpp"

#include <algorithm>
#include <cctype>

#include "nvml/nvml_abi.hpp"

namespace hami::nvml {
namespace {

std::string normal_bus_id(const std::string& id) {
  std::string out;
  out.reserve(id.size());
  for (const char c : id)
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  // NVML's 8-digit domain against sysfs' and older NVML's 4 digits.
  if (out.find(':') == 8 && out.compare(0, 4, "0000") == 0) out.erase(0, 4);
  return out;
}

// How many of `from`'s links end at `to` (a GPU, or an end the driver cannot
// name but whose bus id is the GPU's).
int direct_links(const GpuLinks& from, const GpuLinks& to) {
  if (to.bus_id.empty()) return 0;
  int n = 0;
  for (const NvLink& l : from.nvlinks) {
    if (l.remote_type != kNvLinkRemoteGpu && l.remote_type != kNvLinkRemoteUnknown) continue;
    if (!l.remote_bus_id.empty() && same_bus_id(l.remote_bus_id, to.bus_id)) ++n;
  }
  return n;
}

int switch_links(const GpuLinks& g) {
  return static_cast<int>(std::count_if(g.nvlinks.begin(), g.nvlinks.end(), [](const NvLink& l) {
    return l.remote_type == kNvLinkRemoteSwitch;
  }));
}

}  // namespace

bool same_bus_id(const std::string& a, const std::string& b) {
  return normal_bus_id(a) == normal_bus_id(b);
}

Topology read_topology(Library& nvml, const std::vector<int>& indices) {
  Topology t;
  for (const int i : indices) {
    GpuLinks g;
    g.index = i;
    if (auto info = nvml.device(i)) {
      g.bus_id = info->pci_bus_id;
    } else {
      t.problems.push_back("GPU " + std::to_string(i) + ": " + info.error().message);
    }
    if (auto links = nvml.nvlinks(i)) {
      g.nvlinks = std::move(*links);
    } else {
      t.problems.push_back("GPU " + std::to_string(i) + " NVLinks: " + links.error().message);
    }
    t.gpus.push_back(std::move(g));
  }
  for (size_t x = 0; x < t.gpus.size(); ++x) {
    for (size_t y = x + 1; y < t.gpus.size(); ++y) {
      const GpuLinks& ga = t.gpus[x];
      const GpuLinks& gb = t.gpus[y];
      PairLink p;
      p.a = ga.index;
      p.b = gb.index;
      const std::string pair = "GPUs " + std::to_string(p.a) + "-" + std::to_string(p.b);
      if (auto level = nvml.common_ancestor(p.a, p.b)) {
        p.common_ancestor = *level;
      } else {
        t.problems.push_back(pair + ": " + level.error().message);
      }
      const int ab = direct_links(ga, gb);
      const int ba = direct_links(gb, ga);
      if (ab != ba) {
        t.problems.push_back(pair + ": asymmetric NVLinks (" + std::to_string(ab) + " one way, " +
                             std::to_string(ba) + " the other); counting " +
                             std::to_string(std::min(ab, ba)));
      }
      p.nvlinks = std::min(ab, ba);
      if (p.nvlinks == 0) {
        const int sa = switch_links(ga);
        const int sb = switch_links(gb);
        if (sa > 0 && sb > 0) {
          p.nvlinks = std::min(sa, sb);
          p.via_nvswitch = true;
        }
      }
      for (int cap = kP2pRead; cap <= kP2pPci; ++cap) {
        if (auto s = nvml.p2p_status(p.a, p.b, cap)) {
          p.p2p[static_cast<size_t>(cap)] = *s;
        } else if (cap == kP2pRead) {
          // The one placement reads; the others are for the probe's record.
          t.problems.push_back(pair + " P2P: " + s.error().message);
        }
      }
      t.pairs.push_back(p);
    }
  }
  return t;
}

std::string topology_level_name(std::optional<int> level) {
  if (!level) return "unknown";
  switch (*level) {
    case kTopologyInternal:
      return "BOARD";
    case kTopologySingle:
      return "PIX";
    case kTopologyMultiple:
      return "PXB";
    case kTopologyHostBridge:
      return "PHB";
    case kTopologyNode:
      return "NODE";
    case kTopologySystem:
      return "SYS";
    default:
      return "unknown";
  }
}

std::string p2p_status_name(std::optional<int> status) {
  if (!status) return "unknown";
  switch (*status) {
    case abi::NVML_P2P_STATUS_OK:
      return "ok";
    case abi::NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED:
      return "chipset_not_supported";
    case abi::NVML_P2P_STATUS_GPU_NOT_SUPPORTED:
      return "gpu_not_supported";
    case abi::NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED:
      return "ioh_topology_not_supported";
    case abi::NVML_P2P_STATUS_DISABLED_BY_REGKEY:
      return "disabled_by_regkey";
    case abi::NVML_P2P_STATUS_NOT_SUPPORTED:
      return "not_supported";
    default:
      return "unknown";
  }
}

}  // namespace hami::nvml
