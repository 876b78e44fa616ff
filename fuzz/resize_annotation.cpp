// The resize annotation a user writes on a pod (nvidia.com/vgpu-resize):
// whatever the text, parsing never crashes, and what it accepts is in range
// and names each container once.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "scheduler/resize.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto targets = hami::scheduler::parse_resize(text);
  if (!targets) {
    if (targets.error().message.empty()) __builtin_trap();
    return 0;
  }
  std::set<std::string> seen;
  for (const auto& t : *targets) {
    if (!t.mem_mib && !t.cores) __builtin_trap();
    if (t.mem_mib && *t.mem_mib < 1) __builtin_trap();
    if (t.cores && (*t.cores < 0 || *t.cores > 100)) __builtin_trap();
    if (!seen.insert(t.container).second) __builtin_trap();
  }
  return 0;
}
