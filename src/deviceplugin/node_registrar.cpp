#include "deviceplugin/node_registrar.hpp"

#include <ctime>

#include "common/log.hpp"
#include "deviceplugin/gpu.hpp"
#include "k8s/paths.hpp"
#include "protocol/annotations.hpp"
#include "protocol/node_register.hpp"

namespace hami::deviceplugin {

using protocol::encode_node_devices;
using protocol::kHandshakeReported;
using protocol::kNodeHandshake;
using protocol::kNodeRegister;

std::string handshake_reported(std::chrono::system_clock::time_point t) {
  const std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  ::localtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return std::string(kHandshakeReported) + buf;
}

NodeRegistrar::NodeRegistrar(k8s::Client& client, const PluginConfig& cfg, DeviceState& state,
                             std::string node)
    : client_(client), cfg_(cfg), state_(state), node_(std::move(node)) {}

Result<bool> NodeRegistrar::sync_once() {
  const std::string want = encode_node_devices(node_devices(state_.gpus(), cfg_));
  auto node = client_.get(k8s::node_path(node_));
  if (!node) return Error{"cannot read node " + node_ + ": " + node.error().message};
  std::string have;
  std::string handshake;
  if (auto md = node->find("metadata"); md != node->end() && md->is_object()) {
    if (auto an = md->find("annotations"); an != md->end() && an->is_object()) {
      have = an->value(kNodeRegister, "");
      handshake = an->value(kNodeHandshake, "");
    }
  }
  const bool answered = handshake.rfind(kHandshakeReported, 0) != 0;
  if (have == want && !answered) return false;
  auto r = client_.patch_annotations(
      k8s::node_path(node_),
      {{kNodeRegister, want},
       {kNodeHandshake, handshake_reported(std::chrono::system_clock::now())}});
  if (!r) return Error{"cannot annotate node " + node_ + ": " + r.error().message};
  if (have != want) log::info("registered on node %s: %s", node_.c_str(), want.c_str());
  return true;
}

void NodeRegistrar::run(std::stop_token stop, std::chrono::milliseconds interval) {
  std::stop_callback wake(stop, [this] { state_.wake_all(); });
  uint64_t seen = state_.version();
  while (!stop.stop_requested()) {
    seen = state_.version();
    auto r = sync_once();
    if (!r) log::error("node registration: %s", r.error().message.c_str());
    const auto wait = r ? interval : std::min(interval, std::chrono::milliseconds(5000));
    const auto deadline = std::chrono::steady_clock::now() + wait;
    while (!stop.stop_requested() && state_.version() == seen &&
           std::chrono::steady_clock::now() < deadline) {
      state_.wait_change(seen, std::chrono::duration_cast<std::chrono::milliseconds>(
                                   deadline - std::chrono::steady_clock::now()));
    }
  }
}

}  // namespace hami::deviceplugin
