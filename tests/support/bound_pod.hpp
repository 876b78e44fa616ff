#pragma once
// A pod as our scheduler leaves it once bound to a node, for the device
// plugin's tests: its decision annotations (unsigned: sign it where the test
// has a key), bind-phase allocating, spec.nodeName set, Pending.
//
//   api.put("pods", test::bound_pod("p", "node-1", "GPU-a,NVIDIA,3000,30:;",
//                                   json::array({test::gpu_container("main", 1)})));

#include <ctime>
#include <string>

#include <nlohmann/json.hpp>

namespace hami::test {

// One container asking for `gpus` nvidia.com/gpu.
inline nlohmann::json gpu_container(const std::string& name, int gpus) {
  return {{"name", name},
          {"image", "cuda"},
          {"resources", {{"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}};
}

inline nlohmann::json bound_pod(const std::string& name, const std::string& node,
                                const std::string& devices, nlohmann::json containers) {
  const std::string now = std::to_string(std::time(nullptr));
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", name},
            {"namespace", "default"},
            {"annotations",
             {{"hami.io/vgpu-node", node},
              {"hami.io/vgpu-time", now},
              {"hami.io/bind-time", now},
              {"hami.io/bind-phase", "allocating"},
              {"hami.io/vgpu-devices-to-allocate", devices},
              {"hami.io/vgpu-devices-allocated", devices}}}}},
          {"spec",
           {{"nodeName", node}, {"schedulerName", "hami-scheduler"}, {"containers", containers}}},
          {"status", {{"phase", "Pending"}}}};
}

}  // namespace hami::test
