// Raw input to layout detection and the parser: the first 8 bytes claim a file
// size (any value), the rest are the file's first bytes. Short inputs exercise
// every refusal path of detect_layout and parse_region.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "region/layouts.hpp"
#include "region/snapshot.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto* bytes = reinterpret_cast<const std::byte*>(data);
  (void)hami::region::parse_region(std::span(bytes, size), "fuzz");
  if (size < 8) return 0;
  uint64_t claimed = 0;
  std::memcpy(&claimed, data, 8);
  auto d = hami::region::detect_layout(std::span(bytes + 8, size - 8), claimed, "fuzz");
  if (d && d->layout == nullptr) __builtin_trap();  // success always names a layout
  return 0;
}
