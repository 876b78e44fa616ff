#pragma once
// Keeps this node's hami.io/node-nvidia-register annotation (node_register.hpp),
// its GPU topology (hami.io/node-nvidia-score and hami.io/node-nvidia-p2p, on
// nodes of two GPUs or more) and the handshake (hami.io/node-handshake =
// "Reported_<local time>") up to date for the scheduler. Each pass reads the
// node and patches only when the device list or topology differs from the
// annotations (a GPU's health changed, someone removed one) or the scheduler
// has answered the handshake ("Requesting_…"), as upstream's protocol document
// describes. Passes run every interval and at once when a GPU's health changes.
// While dynamic MIG's apply lock is held (mig_manager.hpp) passes wait: NVML
// answers oddly while instances are made or removed.
//
//   NodeRegistrar reg(client, cfg, state, "node-1");
//   std::jthread t([&](std::stop_token st) { reg.run(st, 30s); });

#include <chrono>
#include <stop_token>
#include <string>

#include "common/result.hpp"
#include "deviceplugin/config.hpp"
#include "deviceplugin/device_state.hpp"
#include "k8s/client.hpp"

namespace hami::deviceplugin {

class NodeRegistrar {
 public:
  // `match_pods`: register hami.io/node-allocate-protocol=match-pods/v1 (else
  // remove it), telling our scheduler to bind here without the node lock.
  // `mig_apply_lock`: dynamic MIG's apply lock file; "" when the node has
  // no GPU in that mode.
  NodeRegistrar(k8s::Client& client, const PluginConfig& cfg, DeviceState& state, std::string node,
                bool match_pods = false, std::string mig_apply_lock = {});

  // One pass; true when it patched the node.
  Result<bool> sync_once();
  // Passes until `stop`; after a failed pass the next comes within 5 s.
  void run(std::stop_token stop, std::chrono::milliseconds interval);

 private:
  k8s::Client& client_;
  const PluginConfig& cfg_;
  DeviceState& state_;
  std::string node_;
  bool match_pods_;
  std::string mig_apply_lock_;
};

// "Reported_2024-05-01 10:00:00" (local time, Go's time.DateTime).
std::string handshake_reported(std::chrono::system_clock::time_point t);

}  // namespace hami::deviceplugin
