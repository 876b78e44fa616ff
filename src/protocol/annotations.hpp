#pragma once
// The annotation keys and values of HAMi's protocol between the scheduler and
// the NVIDIA device plugin (upstream pkg/device/nvidia and pkg/util), kept in
// one place so every reader and writer agrees on the exact strings.
//
//   pod.meta.annotations.at(hami::protocol::kDevicesToAllocate);
//   client.patch_annotations(path, {{kBindPhase, std::string(kPhaseSuccess)}});

namespace hami::protocol {

// Node annotations.
inline constexpr const char* kNodeRegister = "hami.io/node-nvidia-register";
inline constexpr const char* kNodeHandshake = "hami.io/node-handshake";
inline constexpr const char* kNodeLock = "hami.io/mutex.lock";
// How the node's GPUs connect (node_register.hpp): upstream's pair scores, and
// our P2P status per pair, which upstream's scheduler does not read.
inline constexpr const char* kNodeScore = "hami.io/node-nvidia-score";
inline constexpr const char* kNodeP2p = "hami.io/node-nvidia-p2p";
// Set by our device plugin, never by upstream's: it matches each Allocate to
// its pod among the pods bound to the node (deviceplugin/pod_match.hpp), so
// our scheduler binds there without the node lock and several pods are in
// flight at once (docs/scheduler-protocol.md). Nodes without it keep
// upstream's lock.
inline constexpr const char* kNodeAllocateProtocol = "hami.io/node-allocate-protocol";
inline constexpr const char* kAllocateMatchPods = "match-pods/v1";

// Pod annotations written by the scheduler (and the phase by us).
inline constexpr const char* kDevicesToAllocate = "hami.io/vgpu-devices-to-allocate";
inline constexpr const char* kDevicesAllocated = "hami.io/vgpu-devices-allocated";
inline constexpr const char* kAssignedNode = "hami.io/vgpu-node";
inline constexpr const char* kBindTime = "hami.io/bind-time";
inline constexpr const char* kBindPhase = "hami.io/bind-phase";

inline constexpr const char* kPhaseAllocating = "allocating";
inline constexpr const char* kPhaseSuccess = "success";
inline constexpr const char* kPhaseFailed = "failed";

// The device plugin's side of the handshake: "Reported_<YYYY-MM-DD HH:MM:SS>";
// the scheduler answers "Requesting_<...>".
inline constexpr const char* kHandshakeReported = "Reported_";

// Device mode in the registration JSON.
inline constexpr const char* kModeHamiCore = "hami-core";
// A GPU shared through its MPS server (docs/sharing-modes.md).
inline constexpr const char* kModeMps = "mps";
// A MIG device (docs/mig.md): upstream's mode word for MIG.
inline constexpr const char* kModeMig = "mig";

}  // namespace hami::protocol
