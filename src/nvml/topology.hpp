#pragma once
// How a node's GPUs reach each other, pair by pair, as NVML reports it: the
// closest PCIe ancestor two GPUs share, the NVLinks between them (direct, or
// through NVSwitches) and whether peer-to-peer access works. The device plugin
// registers it for topology-aware placement (docs/device-plugin.md);
// tests/gpu/topology_probe.cpp prints it on a real machine.
//
// Nothing fails as a whole: a question NVML cannot answer (an old driver, a
// VM that hides the PCIe tree) leaves that fact unknown and says why in
// `problems`, so registration goes on with what is known.
//
//   auto nvml = hami::nvml::Library::open();
//   hami::nvml::Topology t = hami::nvml::read_topology(**nvml, {0, 1, 2, 3});
//   for (const hami::nvml::PairLink& p : t.pairs)
//     printf("%d-%d: %d NVLinks, ancestor %s\n", p.a, p.b, p.nvlinks,
//            hami::nvml::topology_level_name(p.common_ancestor).c_str());

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "nvml/nvml.hpp"

namespace hami::nvml {

// One GPU's side: its PCI bus id and its enabled NVLinks.
struct GpuLinks {
  int index = 0;       // NVML index
  std::string bus_id;  // "00000000:18:00.0"; "" when NVML cannot say
  std::vector<NvLink> nvlinks;
};

// One unordered pair of GPUs.
struct PairLink {
  int a = 0;  // NVML indices, in the order read_topology was given them
  int b = 0;
  std::optional<int> common_ancestor;  // a kTopology* level
  // NVLinks between the two: direct GPU-to-GPU links (the smaller count when
  // the two GPUs disagree), or, where neither has a direct link to the other
  // but both reach NVSwitches, the smaller of their switch link counts (every
  // switch-connected GPU reaches every other at that width).
  int nvlinks = 0;
  bool via_nvswitch = false;
  // nvmlDeviceGetP2PStatus by capability (kP2pRead ... kP2pPci); unknown when
  // the call failed.
  std::array<std::optional<int>, 5> p2p{};
};

struct Topology {
  std::vector<GpuLinks> gpus;         // in the order given
  std::vector<PairLink> pairs;        // (0,1), (0,2), ... (1,2), ...: each pair once
  std::vector<std::string> problems;  // what NVML could not answer, and why
};

Topology read_topology(Library& nvml, const std::vector<int>& indices);

// "SYS", "NODE", "PHB", "PXB", "PIX", "BOARD": nvidia-smi topo -m's names;
// "unknown" for nullopt or a value NVML does not define.
std::string topology_level_name(std::optional<int> level);
// "ok", "chipset_not_supported", ... (nvmlGpuP2PStatus_t, lower case, without
// the prefix); "unknown" for nullopt too.
std::string p2p_status_name(std::optional<int> status);

// Whether two PCI bus ids name the same device, whatever their domain width
// ("00000000:18:00.0" and "0000:18:00.0") or letter case.
bool same_bus_id(const std::string& a, const std::string& b);

}  // namespace hami::nvml
