// /proc/<pid>/status and /proc/<pid>/cgroup text as the node agent reads them
// (a tenant chooses its processes' names, which appear in status).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "monitor/host_pid.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)hami::monitor::parse_nspid(text);
  const std::string uid = hami::monitor::extract_pod_uid(text);
  (void)hami::monitor::cgroup_mentions_pod(text, uid);
  (void)hami::monitor::cgroup_mentions_pod(text, text.substr(0, 40));
  return 0;
}
