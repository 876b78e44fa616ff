// The node registration JSON (hami.io/node-nvidia-register) as a reader of
// upstream's annotation decodes it: anything that decodes encodes back to
// JSON that decodes to the same devices.
#include <cstddef>
#include <cstdint>
#include <string>

#include "protocol/node_register.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  auto d = hami::protocol::decode_node_devices(input);
  if (!d) {
    if (d.error().message.empty()) __builtin_trap();
    return 0;
  }
  auto back = hami::protocol::decode_node_devices(hami::protocol::encode_node_devices(*d));
  if (!back || *back != *d) __builtin_trap();
  return 0;
}
