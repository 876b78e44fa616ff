#pragma once
// A pod no scheduler placed that carries the scheduler's decision annotations
// (issue 36's attack): bound to `node` by its own annotations, bind-time 0 so
// upstream's fallback took it first, Pending. For the tests that check the
// scheduler and the device plugin never count or serve it.
//
//   api.put("pods", test::forged_pod("attacker", "node-1", devices,
//                                    {{"nvidia.com/gpu", "1"}}, "nobody", true));

#include <string>

#include <nlohmann/json.hpp>

namespace hami::test {

// `limits` empty: a container asking for nothing. `preset_node`: spec.nodeName
// set to `node`, as if created past the webhook.
inline nlohmann::json forged_pod(const std::string& name, const std::string& node,
                                 const std::string& devices, const nlohmann::json& limits,
                                 const std::string& scheduler, bool preset_node) {
  nlohmann::json c = {{"name", "main"}, {"image", "cuda"}};
  if (!limits.empty()) c["resources"] = {{"limits", limits}};
  nlohmann::json p = {{"apiVersion", "v1"},
                      {"kind", "Pod"},
                      {"metadata",
                       {{"name", name},
                        {"namespace", "default"},
                        {"annotations",
                         {{"hami.io/vgpu-node", node},
                          {"hami.io/bind-time", "0"},
                          {"hami.io/bind-phase", "allocating"},
                          {"hami.io/vgpu-devices-to-allocate", devices},
                          {"hami.io/vgpu-devices-allocated", devices}}}}},
                      {"spec", {{"schedulerName", scheduler}, {"containers", {c}}}},
                      {"status", {{"phase", "Pending"}}}};
  if (preset_node) p["spec"]["nodeName"] = node;
  return p;
}

}  // namespace hami::test
