#pragma once
// Who may decide where a pod's GPUs are (docs/security.md, "Only the
// scheduler decides"). The decision is a set of pod annotations
// (annotations.hpp) that anyone who can create or edit a pod can also write,
// so neither the scheduler's cache nor the device plugin takes them at their
// word. The scheduler signs what it decides (HMAC-SHA256 over the pod's UID,
// namespace, name, node, hami.io/vgpu-devices-allocated and the scheduler's
// part of hami.io/vgpu-mig-allocations, with a key it
// shares with the device plugins), and a decision counts only when:
//
//  - the pod is bound to the node the decision names (spec.nodeName equals
//    hami.io/vgpu-node), and
//  - its hami.io/decision-signature verifies under one of the keys, or, for
//    schedulers that sign nothing (upstream HAMi's, in a mixed cluster), its
//    spec.schedulerName is one the operator lists as trusted.
//
// The UID makes a signature useless on any other pod, including one created
// again under the same name.
//
//   auto keys = hami::protocol::DecisionKeys::load("/decision-key/key");
//   annotations[kDecisionSignature] = keys->sign(decision_of(pod, node, encoded));
//   DecisionTrust trust{.keys = *keys, .unsigned_schedulers = {}};
//   if (std::string why = decision_refusal(pod, trust); !why.empty()) ignore(pod, why);

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"
#include "k8s/objects.hpp"
#include "protocol/annotations.hpp"
#include "protocol/mig_allocations.hpp"

namespace hami::protocol {

inline constexpr const char* kDecisionSignature = "hami.io/decision-signature";
inline constexpr const char* kVgpuTime = "hami.io/vgpu-time";

// Every pod annotation that only the scheduler and the device plugin write:
// what the webhook refuses from anyone else. hami.io/mutex.lock belongs on
// nodes; on a pod it is refused all the same, so nobody reads a forged one.
inline constexpr std::array<const char*, 9> kDecisionAnnotations = {
    kAssignedNode, kDevicesToAllocate, kDevicesAllocated,  kBindPhase,     kBindTime,
    kVgpuTime,     kNodeLock,          kDecisionSignature, kMigAllocations};

// What a signature covers.
struct Decision {
  std::string uid;
  std::string ns;
  std::string name;
  std::string node;
  std::string devices;  // hami.io/vgpu-devices-allocated, as written
  // The scheduler's part of hami.io/vgpu-mig-allocations (dynamic MIG):
  // the entries without the fields the device plugin adds once it has made
  // the instances (mig_scheduler_part), "" when the pod has none. Covered
  // only when not empty, so signatures of other pods read as before.
  std::string mig;
};

// hami.io/vgpu-mig-allocations as the scheduler wrote it: re-encoded without
// migUUID, gpuInstanceID and computeInstanceID. Text that does not decode is
// returned as is (it then verifies only if signed so, i.e. never).
std::string mig_scheduler_part(std::string_view annotation);

// The decision a pod's annotations state (empty fields where absent).
Decision decision_of(const k8s::Pod& pod);

// Keys shared by the scheduler and the device plugins: one per line, each at
// least 32 bytes; the first signs, every one verifies (so a new key can be
// rolled out ahead of signing with it).
class DecisionKeys {
 public:
  static Result<DecisionKeys> parse(std::string_view text, const std::string& source);
  static Result<DecisionKeys> load(const std::string& path);

  // "v1:<base64 of HMAC-SHA256>".
  std::string sign(const Decision& d) const;
  bool verify(const Decision& d, std::string_view signature) const;

 private:
  std::vector<std::string> keys_;
};

struct DecisionTrust {
  std::optional<DecisionKeys> keys;
  // spec.schedulerName values whose unsigned decisions are honoured on bound
  // pods. Without keys, nothing is signed: the daemons default this to our
  // own scheduler's name, as far as pods alone can tell who decided.
  std::vector<std::string> unsigned_schedulers = {"hami-scheduler"};
};

// "" when the pod's decision may be honoured, else why not, naming the pod,
// what is wrong and what to do. Only pods carrying hami.io/vgpu-node and
// hami.io/vgpu-devices-allocated are judged; the caller checks that.
std::string decision_refusal(const k8s::Pod& pod, const DecisionTrust& trust);

// Parses --trusted-schedulers: names separated by commas, blanks dropped.
std::vector<std::string> parse_name_list(std::string_view text);

}  // namespace hami::protocol
