#include "protocol/node_lock.hpp"

#include "k8s/time.hpp"

namespace hami::protocol {

Result<NodeLock> parse_node_lock(std::string_view value) {
  const size_t c1 = value.find(',');
  NodeLock lock;
  auto t = k8s::parse_time(value.substr(0, c1));
  if (!t) {
    return Error{"node lock '" + std::string(value.substr(0, 64)) +
                 "': the time is not RFC 3339: " + t.error().message};
  }
  lock.time = *t;
  if (c1 == std::string_view::npos) return lock;  // legacy: the time alone
  const size_t c2 = value.find(',', c1 + 1);
  if (c2 == std::string_view::npos) {
    return Error{"node lock '" + std::string(value.substr(0, 64)) +
                 "': expected <time>,<namespace>,<pod>"};
  }
  lock.ns = value.substr(c1 + 1, c2 - c1 - 1);
  lock.name = value.substr(c2 + 1);
  if (lock.ns.empty() || lock.name.empty() || lock.name.find(',') != std::string::npos) {
    return Error{"node lock '" + std::string(value.substr(0, 64)) +
                 "': expected <time>,<namespace>,<pod> with both names set"};
  }
  return lock;
}

std::string format_node_lock(std::chrono::system_clock::time_point t, const std::string& ns,
                             const std::string& name) {
  return k8s::format_time(t) + "," + ns + "," + name;
}

}  // namespace hami::protocol
