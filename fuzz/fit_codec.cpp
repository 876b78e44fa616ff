// The pod allocation annotation (hami.io/vgpu-devices-allocated), which the
// extender, the device plugin and the node agent read from pods anyone can
// annotate. Whatever decodes must encode, and decode again to the same value;
// the encoding of a decoded value is a fixed point.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "protocol/device_codec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto pd = hami::protocol::decode_pod_devices(text);
  if (!pd) {
    if (pd.error().message.empty()) __builtin_trap();
    return 0;
  }
  auto encoded = hami::protocol::encode_pod_devices(*pd);
  if (!encoded) __builtin_trap();
  auto again = hami::protocol::decode_pod_devices(*encoded);
  if (!again || *again != *pd) __builtin_trap();
  auto encoded_again = hami::protocol::encode_pod_devices(*again);
  if (!encoded_again || *encoded_again != *encoded) __builtin_trap();
  return 0;
}
