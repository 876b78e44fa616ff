// The scheduler's pod annotations as the device plugin reads them:
// hami.io/vgpu-devices-to-allocate (before the first NUL) and the node lock
// hami.io/mutex.lock (after it). Whatever decodes must encode back to text
// that decodes to the same devices.
#include <cstddef>
#include <cstdint>
#include <string>

#include "deviceplugin/pod_devices.hpp"
#include "protocol/node_lock.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string devices = input.substr(0, nul);
  const std::string lock = nul == std::string::npos ? "" : input.substr(nul + 1);

  auto pd = hami::protocol::decode_pod_devices(devices);
  if (pd) {
    auto again = hami::protocol::encode_pod_devices(*pd);
    if (!again) __builtin_trap();
    auto back = hami::protocol::decode_pod_devices(*again);
    if (!back || *back != *pd) __builtin_trap();
    for (const auto& c : *pd) {
      for (const auto& d : c) {
        if (d.uuid.empty() || d.mem_mib < 0 || d.cores < 0) __builtin_trap();
      }
    }
  } else if (pd.error().message.empty()) {
    __builtin_trap();
  }

  auto l = hami::protocol::parse_node_lock(lock);
  if (l && l->names_pod() && (l->ns.empty() || l->name.find(',') != std::string::npos))
    __builtin_trap();
  if (!l && l.error().message.empty()) __builtin_trap();
  return 0;
}
