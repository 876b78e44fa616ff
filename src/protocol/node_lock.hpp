#pragma once
// The node lock the scheduler takes in bind and the device plugin releases
// after Allocate: node annotation hami.io/mutex.lock = "<RFC3339>,<ns>,<pod>"
// (upstream pkg/util/nodelock). Older schedulers wrote only the time; such a
// lock names no pod.
//
//   auto lock = hami::protocol::parse_node_lock(node.meta.annotations[kNodeLock]);
//   if (lock && lock->names_pod()) get(pod_path(lock->ns, lock->name));
//   std::string v = hami::protocol::format_node_lock(now, "default", "p");

#include <chrono>
#include <string>
#include <string_view>

#include "common/result.hpp"

namespace hami::protocol {

struct NodeLock {
  std::chrono::system_clock::time_point time;
  std::string ns;  // empty for a legacy (time-only) lock
  std::string name;

  bool names_pod() const { return !name.empty(); }
  bool held_by(std::string_view pod_ns, std::string_view pod_name) const {
    return ns == pod_ns && name == pod_name;
  }
};

Result<NodeLock> parse_node_lock(std::string_view value);
std::string format_node_lock(std::chrono::system_clock::time_point t, const std::string& ns,
                             const std::string& name);

}  // namespace hami::protocol
