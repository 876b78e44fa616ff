#pragma once
// Builders for the scheduler tests: nodes with upstream's registration
// annotation, pods with GPU limits and allocation annotations, as the API
// server would hold them.

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/decision.hpp"
#include "protocol/node_register.hpp"

namespace hami::test {

// A node with `gpus` GPUs "GPU-<name>-<i>" of 16000 MiB, split 10, NUMA i/4.
inline nlohmann::json sched_node(const std::string& name, int gpus = 2, int mem_mib = 16000,
                                 const std::string& type = "NVIDIA-Tesla T4") {
  std::vector<protocol::NodeDevice> devs;
  for (int i = 0; i < gpus; ++i) {
    devs.push_back({.id = "GPU-" + name + "-" + std::to_string(i),
                    .index = i,
                    .count = 10,
                    .devmem = mem_mib,
                    .devcore = 100,
                    .type = type,
                    .numa = i / 4,
                    .mode = "hami-core",
                    .health = true});
  }
  return {
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata",
       {{"name", name},
        {"annotations", {{"hami.io/node-nvidia-register", protocol::encode_node_devices(devs)}}}}}};
}

// A node with one H100 80GB in dynamic MIG mode, "GPU-<name>-0", registering
// its profiles (migProfiles) as the device plugin does: 2g.20gb at slices
// 0, 2 and 4, the 7g only whole.
inline nlohmann::json mig_node(const std::string& name) {
  auto every = [](unsigned size, std::vector<unsigned> starts) {
    std::vector<protocol::MigPlacement> out;
    for (unsigned s : starts)
      out.push_back({s, size});
    return out;
  };
  std::vector<protocol::NodeDevice> devs = {
      {.id = "GPU-" + name + "-0",
       .index = 0,
       .count = 7,
       .devmem = 81920,
       .devcore = 100,
       .type = "NVIDIA H100 80GB HBM3",
       .mode = "mig",
       .health = true,
       .mig_profiles = {{"1g.10gb", 9984, 14, 1, every(1, {0, 1, 2, 3, 4, 5, 6})},
                        {"2g.20gb", 20096, 28, 2, every(2, {0, 2, 4})},
                        {"3g.40gb", 40192, 42, 3, every(4, {0, 4})},
                        {"7g.80gb", 80896, 100, 7, every(8, {0})}}}};
  nlohmann::json n = sched_node(name, 0);
  n["metadata"]["annotations"]["hami.io/node-nvidia-register"] =
      protocol::encode_node_devices(devs);
  return n;
}

// A pod with one container asking for `limits`.
inline nlohmann::json sched_pod(const std::string& name,
                                const std::map<std::string, std::string>& limits,
                                const std::string& uid = "",
                                const std::map<std::string, std::string>& annotations = {},
                                const std::string& ns = "default") {
  nlohmann::json c = {{"name", "main"}, {"image", "cuda"}};
  if (!limits.empty()) c["resources"] = {{"limits", limits}};
  nlohmann::json pod = {{"apiVersion", "v1"},
                        {"kind", "Pod"},
                        {"metadata", {{"name", name}, {"namespace", ns}}},
                        {"spec", {{"containers", nlohmann::json::array({c})}}}};
  if (!uid.empty()) pod["metadata"]["uid"] = uid;
  if (!annotations.empty()) pod["metadata"]["annotations"] = annotations;
  return pod;
}

// sched_pod as the webhook leaves it: on our scheduler, pending. Only such a
// pod is bound (bind_guard.hpp).
inline nlohmann::json bindable_pod(const std::string& name,
                                   const std::map<std::string, std::string>& limits,
                                   const std::string& uid = "",
                                   const std::map<std::string, std::string>& annotations = {}) {
  nlohmann::json p = sched_pod(name, limits, uid, annotations);
  p["spec"]["schedulerName"] = "hami-scheduler";
  p["status"] = {{"phase", "Pending"}};
  return p;
}

// A pod already placed by our scheduler: vgpu-node and vgpu-devices-allocated
// set, bound to the node. Unsigned, as a scheduler without a decision key
// leaves it (protocol/decision.hpp); sign() adds what one with a key writes.
inline nlohmann::json placed_pod(const std::string& name, const std::string& uid,
                                 const std::string& node, const std::string& allocated) {
  auto p = sched_pod(name, {{"nvidia.com/gpu", "1"}}, uid,
                     {{"hami.io/vgpu-node", node}, {"hami.io/vgpu-devices-allocated", allocated}});
  p["spec"]["schedulerName"] = "hami-scheduler";
  p["spec"]["nodeName"] = node;
  p["status"] = {{"phase", "Running"}};
  return p;
}

// The pod with the signature `keys` give its decision as it stands.
inline nlohmann::json sign(nlohmann::json pod, const protocol::DecisionKeys& keys) {
  const nlohmann::json& md = pod["metadata"];
  const nlohmann::json& an = md["annotations"];
  const std::string mig = an.value(protocol::kMigAllocations, "");
  pod["metadata"]["annotations"][protocol::kDecisionSignature] =
      keys.sign({md.value("uid", ""), md.value("namespace", ""), md.value("name", ""),
                 an.value(protocol::kAssignedNode, ""), an.value(protocol::kDevicesAllocated, ""),
                 mig.empty() ? std::string() : protocol::mig_scheduler_part(mig)});
  return pod;
}

// A decision key for tests.
inline protocol::DecisionKeys test_keys(const std::string& key = std::string(40, 'k')) {
  return *protocol::DecisionKeys::parse(key, "test key");
}

}  // namespace hami::test
