#pragma once
// The node's side of a live resize (docs/resize.md): when the scheduler
// rewrites a running pod's hami.io/vgpu-devices-allocated (and signs it
// again), the container's read-only limits file is replaced with the new
// memory limits and SM shares, and libvgpu.so in every process of the
// container applies it within a second.
//
// Only what this plugin allocated is touched: the container's limits file
// must already be there (Allocate wrote it). Only a trusted decision counts
// (protocol/decision.hpp, as at Allocate): a forged or altered allocation, one
// on other GPUs than the file's, an unreadable one, or an MPS client given
// more memory or another thread cap changes nothing and is logged. Everything
// else in the file (state file, GPU order, priority, policy, the opening
// comment) stays as Allocate wrote it; the file is rendered by the container
// contract as at Allocate and replaced by rename, only when its text changes,
// so a pod seen again (a restart lists every pod) costs a read.
//
//   LimitsFollower follow("node-1", "/usr/local", trust);
//   pods on the node (watch): follow.pod_changed(pod_json);

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "protocol/decision.hpp"

namespace hami::deviceplugin {

class LimitsFollower {
 public:
  LimitsFollower(std::string node, std::string hook_path, protocol::DecisionTrust trust)
      : node_(std::move(node)), hook_path_(std::move(hook_path)), trust_(std::move(trust)) {}

  // The limits files replaced for this pod (0 when nothing changed or the
  // pod's decision is not honoured).
  int pod_changed(const nlohmann::json& pod);

 private:
  const std::string node_;
  const std::string hook_path_;
  const protocol::DecisionTrust trust_;
};

}  // namespace hami::deviceplugin
