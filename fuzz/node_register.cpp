// The node registration JSON (hami.io/node-nvidia-register) and the topology
// annotations (hami.io/node-nvidia-score, hami.io/node-nvidia-p2p) as a reader
// of upstream's annotations decodes them: anything that decodes encodes back
// to JSON that decodes to the same devices.
#include <cstddef>
#include <cstdint>
#include <string>

#include "protocol/node_register.hpp"

namespace {

template <class Decode, class Encode>
void round_trip(const std::string& input, Decode decode, Encode encode) {
  auto d = decode(input);
  if (!d) {
    if (d.error().message.empty()) __builtin_trap();
    return;
  }
  auto back = decode(encode(*d));
  if (!back || *back != *d) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hami::protocol;
  const std::string input(reinterpret_cast<const char*>(data), size);
  round_trip(input, decode_node_devices, encode_node_devices);
  round_trip(input, decode_pair_scores, encode_pair_scores);
  round_trip(input, decode_p2p, encode_p2p);
  return 0;
}
