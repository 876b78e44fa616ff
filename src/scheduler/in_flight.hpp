#pragma once
// Pods bound to nodes whose device plugin matches each Allocate to its pod
// (match-pods/v1, docs/scheduler-protocol.md) that kubelet has not allocated
// yet, and whether one more may join them without being mistaken for one.
//
// kubelet's Allocate names no pod, only how many devices each container
// asks for; even the devices are steered by GetPreferredAllocation, which
// knows no more. So the plugin serves the pods of one node that ask for as
// many GPUs in bind order (hami.io/bind-time, then creation time), while
// kubelet admits them in the order their bindings reach it, and the pods of
// a batch that reaches it at once (a relist, a kubelet restart) in
// creation-time order. Both orders agree, so no pod can get another's plan,
// only when the pod bound earlier was also created strictly earlier
// (creation times have one-second resolution) and its binding was written
// before the later one's was sent. bind claims a pod's place here before it
// sends the binding and waits, bounded, while that does not hold; the pod
// watch removes a pod once it is allocated, gone or no longer pending.
//
//   InFlightAllocations f;
//   std::string who = f.claim({.node = "a", .uid = "u2", .who = "ns/p2",
//                              .keys = allocation_keys(devices), .created_s = t},
//                             std::chrono::milliseconds(500));
//   if (!who.empty()) ...           // "ns/p1" asks for as many GPUs, not told apart
//   bind ...; f.written("u2");       // or f.release("u2") when the binding failed
//   f.observe(pod_json);             // from the pod watch
//
// Thread-safe. Entries older than kStaleAfter (upstream's node-lock expiry)
// no longer hold anyone back: a plugin that never answers cannot stop a node
// for good, as upstream's lock cannot.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/decision.hpp"
#include "protocol/device_codec.hpp"

namespace hami::scheduler {

// One key per container with GPUs: how many it has. Two pods may be
// mistaken for each other when their keys intersect (kubelet calls Allocate
// per container).
std::vector<std::string> allocation_keys(const protocol::PodDevices& devices);

struct InFlightPod {
  std::string node;
  std::string uid;
  std::string who;  // "<ns>/<name>", for messages
  std::vector<std::string> keys;
  std::optional<int64_t> created_s;  // creation time, Unix seconds; unknown: never ordered
};

class InFlightAllocations {
 public:
  static constexpr std::chrono::minutes kStaleAfter{5};

  // `trust`: which decisions the watch may teach (a forged pod, bound with
  // bind-phase allocating, must not hold honest pods back).
  explicit InFlightAllocations(protocol::DecisionTrust trust = {}) : trust_(std::move(trust)) {}

  // Records `p` as being bound, once no pod in flight on its node could be
  // mistaken for it, waiting at most `wait` for that. "" when recorded, else
  // who it could be mistaken for.
  std::string claim(InFlightPod p, std::chrono::milliseconds wait);
  // Whom `p` could be mistaken for right now, without recording it: "" none.
  std::string blocker(const InFlightPod& p) const;
  // For each of `nodes` (p.node ignored), whether a pod in flight there could
  // be mistaken for `p`: blocker() for many nodes under one lock, for
  // ranking them. 1 blocked, 0 free.
  std::vector<uint8_t> blocked_on(const InFlightPod& p, std::span<const std::string> nodes) const;
  // The binding of `uid` was written: later pods may be ordered after it.
  void written(const std::string& uid);
  // The binding of `uid` failed: it is not in flight.
  void release(const std::string& uid);
  // A pod from the watch: in flight while bound, pending and
  // bind-phase=allocating with a decision `trust` honours (a restarted
  // scheduler learns them so); gone otherwise. A pod not bound yet says
  // nothing (its claim stands).
  void observe(const nlohmann::json& pod);
  void forget(const nlohmann::json& pod);
  size_t size() const;

 private:
  struct Entry {
    InFlightPod pod;
    bool writing = true;  // binding sent, not yet known to be written
    std::chrono::steady_clock::time_point since;
  };
  const Entry* find_blocker(const InFlightPod& p, std::chrono::steady_clock::time_point now) const;
  void erase_unlocked(const std::string& uid);

  const protocol::DecisionTrust trust_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::unordered_map<std::string, Entry> by_uid_;
  std::unordered_map<std::string, std::vector<std::string>> by_node_;  // node -> uids
};

}  // namespace hami::scheduler
