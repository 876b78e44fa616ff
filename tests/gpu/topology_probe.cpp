// What NVML reports about every pair of this machine's GPUs, read with the
// device plugin's own code (src/nvml/topology.cpp), and the topology
// annotations the plugin registers from it (src/protocol/node_register.cpp):
//
//   topology-probe [--nvml-library PATH]      # default libnvidia-ml.so.1
//
// tests/gpu/topology.sh builds and runs it on a GPU machine; CI runs it on
// the simulated NVML (tests/CMakeLists.txt). Exit 1 when NVML cannot be
// opened or counted, 0 otherwise (what a query cannot answer is printed).
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "nvml/nvml.hpp"
#include "nvml/topology.hpp"
#include "protocol/node_register.hpp"

namespace {

using namespace hami;  // NOLINT

const char* remote_name(int type) {
  if (type == nvml::kNvLinkRemoteGpu) return "GPU";
  if (type == nvml::kNvLinkRemoteSwitch) return "NVSwitch";
  return "unknown";
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = "libnvidia-ml.so.1";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--nvml-library") == 0 && i + 1 < argc) {
      path = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--nvml-library PATH]\n", argv[0]);
      return 2;
    }
  }
  auto lib = nvml::Library::open(path);
  if (!lib) {
    std::printf("FAIL open: %s\n", lib.error().message.c_str());
    return 1;
  }
  nvml::Library& n = **lib;
  auto count = n.device_count();
  if (!count) {
    std::printf("FAIL count: %s\n", count.error().message.c_str());
    return 1;
  }
  auto driver = n.driver_version();
  std::printf("# NVML %s, driver %s, %d GPU(s)\n", path.c_str(),
              driver ? driver->c_str() : "unknown", *count);
  std::vector<int> indices;
  std::vector<std::string> uuids;
  for (int i = 0; i < *count; ++i) {
    auto d = n.device(i);
    if (!d) {
      std::printf("GPU %d: %s\n", i, d.error().message.c_str());
      continue;
    }
    indices.push_back(i);
    uuids.push_back(d->uuid);
    std::printf("GPU %d: %s %s bus %s numa %s\n", i, d->uuid.c_str(), d->name.c_str(),
                d->pci_bus_id.empty() ? "unknown" : d->pci_bus_id.c_str(),
                d->numa_node ? std::to_string(*d->numa_node).c_str() : "unknown");
  }

  const nvml::Topology t = nvml::read_topology(n, indices);
  for (const nvml::GpuLinks& g : t.gpus) {
    std::printf("GPU %d: %zu active NVLink(s)\n", g.index, g.nvlinks.size());
    for (const nvml::NvLink& l : g.nvlinks) {
      std::printf("  link %u -> %s %s\n", l.link, remote_name(l.remote_type),
                  l.remote_bus_id.empty() ? "(bus unknown)" : l.remote_bus_id.c_str());
    }
  }
  // The plugin's peers, as deviceplugin/discovery.cpp builds them.
  std::vector<protocol::DeviceLinks> links;
  for (const std::string& u : uuids)
    links.push_back({u, {}});
  static const char* const kCaps[] = {"read", "write", "nvlink", "atomics", "pci"};
  for (const nvml::PairLink& p : t.pairs) {
    const int32_t score = protocol::pair_score(p.common_ancestor, p.nvlinks);
    std::printf("pair %d-%d: ancestor %s (%s), %d NVLink(s)%s, P2P", p.a, p.b,
                nvml::topology_level_name(p.common_ancestor).c_str(),
                p.common_ancestor ? std::to_string(*p.common_ancestor).c_str() : "-", p.nvlinks,
                p.via_nvswitch ? " through NVSwitch" : "");
    for (size_t c = 0; c < p.p2p.size(); ++c)
      std::printf(" %s=%s", kCaps[c], nvml::p2p_status_name(p.p2p[c]).c_str());
    std::printf(", pair score %d\n", static_cast<int>(score));
    const std::optional<int> read = p.p2p[nvml::kP2pRead];
    const std::string p2p = read ? nvml::p2p_status_name(read) : std::string();
    for (size_t x = 0; x < indices.size(); ++x) {
      for (size_t y = 0; y < indices.size(); ++y) {
        if (indices[x] == p.a && indices[y] == p.b) {
          links[x].peers.push_back({uuids[y], score, p2p});
          links[y].peers.push_back({uuids[x], score, p2p});
        }
      }
    }
  }
  for (const std::string& problem : t.problems)
    std::printf("unknown: %s\n", problem.c_str());
  if (indices.size() >= 2) {
    std::printf("%s: %s\n", "hami.io/node-nvidia-score",
                protocol::encode_pair_scores(links).c_str());
    std::printf("%s: %s\n", "hami.io/node-nvidia-p2p", protocol::encode_p2p(links).c_str());
  } else {
    std::printf("one GPU: no pairs, nothing registered\n");
  }
  return 0;
}
