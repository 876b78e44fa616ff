// The container contract's limits file, as a node's files or a user give it:
// whatever the text, parsing never crashes, every device ends limited, denied
// or unlimited with an SM share of 1-100, and a record rendered from what was
// read reads back the same.
#include <cstddef>
#include <cstdint>
#include <string>

#include "protocol/container_contract.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hami::protocol;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const ContainerLimits l = parse_limits_file(text, "/etc/vgpu/limits.d/limits");
  for (int d = 0; d < kContainerMaxDevices; ++d) {
    if (l.sm_limit[d] == 0 || l.sm_limit[d] > 100) __builtin_trap();
  }
  for (const auto& e : l.errors) {
    if (e.empty()) __builtin_trap();
  }
  if (l.corrupt || !l.errors.empty()) return 0;
  ContainerSpec spec;
  for (size_t d = 0; d < l.device_uuids.size(); ++d) {
    spec.gpus.push_back(
        {l.device_uuids[d], l.memory_limit[d], static_cast<int32_t>(l.sm_limit[0])});
  }
  spec.mode = l.mode();
  spec.priority = l.priority;
  spec.policy = l.policy;
  spec.state_file = l.state_file;
  const ContainerLimits back = parse_limits_file(render_contract(spec).limits_text, "again");
  if (back.corrupt || !back.errors.empty()) __builtin_trap();
  if (back.device_uuids != l.device_uuids || back.state_file != l.state_file) __builtin_trap();
  for (size_t d = 0; d < l.device_uuids.size(); ++d) {
    if (back.memory_limit[d] != l.memory_limit[d]) __builtin_trap();
  }
  return 0;
}
