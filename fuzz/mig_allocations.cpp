// hami.io/vgpu-mig-allocations (protocol/mig_allocations.hpp), which the device
// plugin reads from pods: anything that decodes encodes back to text that
// decodes to the same allocations, and every refusal says why.
#include <cstddef>
#include <cstdint>
#include <string>

#include "protocol/mig_allocations.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hami::protocol;
  const std::string input(reinterpret_cast<const char*>(data), size);
  auto d = decode_mig_allocations(input);
  if (!d) {
    if (d.error().message.empty()) __builtin_trap();
    return 0;
  }
  auto back = decode_mig_allocations(encode_mig_allocations(*d));
  if (!back || *back != *d) __builtin_trap();
  return 0;
}
