#include "deviceplugin/node_registrar.hpp"

#include <ctime>
#include <map>
#include <optional>
#include <thread>

#include "common/log.hpp"
#include "deviceplugin/gpu.hpp"
#include "deviceplugin/mig_manager.hpp"
#include "k8s/paths.hpp"
#include "protocol/annotations.hpp"
#include "protocol/node_register.hpp"

namespace hami::deviceplugin {

using protocol::encode_node_devices;
using protocol::encode_p2p;
using protocol::encode_pair_scores;
using protocol::kAllocateMatchPods;
using protocol::kHandshakeReported;
using protocol::kNodeAllocateProtocol;
using protocol::kNodeHandshake;
using protocol::kNodeP2p;
using protocol::kNodeRegister;
using protocol::kNodeScore;

std::string handshake_reported(std::chrono::system_clock::time_point t) {
  const std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  ::localtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return std::string(kHandshakeReported) + buf;
}

NodeRegistrar::NodeRegistrar(k8s::Client& client, const PluginConfig& cfg, DeviceState& state,
                             std::string node, bool match_pods, std::string mig_apply_lock)
    : client_(client),
      cfg_(cfg),
      state_(state),
      node_(std::move(node)),
      match_pods_(match_pods),
      mig_apply_lock_(std::move(mig_apply_lock)) {}

Result<bool> NodeRegistrar::sync_once() {
  const std::vector<Gpu>& gpus = state_.gpus();
  const std::string want = encode_node_devices(node_devices(gpus, cfg_));
  // The topology is read once at discovery; a node without it (one GPU)
  // leaves whatever those annotations hold alone.
  std::map<std::string, std::optional<std::string>> want_links;
  if (const auto links = device_links(gpus); !links.empty()) {
    want_links[kNodeScore] = encode_pair_scores(links);
    want_links[kNodeP2p] = encode_p2p(links);
  }
  auto node = client_.get(k8s::node_path(node_));
  if (!node) return Error{"cannot read node " + node_ + ": " + node.error().message};
  std::string have;
  std::string handshake;
  bool links_differ = false;
  const nlohmann::json none = nlohmann::json::object();
  const nlohmann::json* an = &none;
  if (auto md = node->find("metadata"); md != node->end() && md->is_object()) {
    if (auto a = md->find("annotations"); a != md->end() && a->is_object()) an = &*a;
  }
  have = an->value(kNodeRegister, "");
  handshake = an->value(kNodeHandshake, "");
  for (const auto& [key, value] : want_links)
    links_differ = links_differ || an->value(key, "") != *value;
  const bool answered = handshake.rfind(kHandshakeReported, 0) != 0;
  // With --allocate-protocol match-pods this plugin matches each Allocate to
  // its pod (pod_match.hpp): our scheduler need not lock the node. Otherwise
  // a marker left by an earlier run goes, and binds lock the node again.
  const bool protocol_differs = match_pods_
                                    ? an->value(kNodeAllocateProtocol, "") != kAllocateMatchPods
                                    : an->contains(kNodeAllocateProtocol);
  if (have == want && !links_differ && !answered && !protocol_differs) return false;
  std::map<std::string, std::optional<std::string>> changes = want_links;
  changes[kNodeAllocateProtocol] =
      match_pods_ ? std::optional<std::string>(kAllocateMatchPods) : std::nullopt;
  changes[kNodeRegister] = want;
  changes[kNodeHandshake] = handshake_reported(std::chrono::system_clock::now());
  auto r = client_.patch_annotations(k8s::node_path(node_), changes);
  if (!r) return Error{"cannot annotate node " + node_ + ": " + r.error().message};
  if (have != want) log::info("registered on node %s: %s", node_.c_str(), want.c_str());
  if (links_differ) {
    log::info("registered the pair scores and P2P status of %zu GPUs on node %s", gpus.size(),
              node_.c_str());
  }
  return true;
}

void NodeRegistrar::run(std::stop_token stop, std::chrono::milliseconds interval) {
  std::stop_callback wake(stop, [this] { state_.wake_all(); });
  uint64_t seen = state_.version();
  bool paused = false;
  bool told = false;  // the first pause at info, the rest at debug: one per Allocate
  while (!stop.stop_requested()) {
    seen = state_.version();
    if (!mig_apply_lock_.empty() && MigApplyLock::held(mig_apply_lock_)) {
      if (!paused) {
        log::write(told ? log::Level::kDebug : log::Level::kInfo,
                   "node registration waits while %s is held (MIG instances are being changed)",
                   mig_apply_lock_.c_str());
      }
      paused = told = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    paused = false;
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
