// Whole state files, built from a compact input so the fuzzer reaches the
// slot and header fields of full-size files:
//   byte 0       picks a file size (every known layout's size, exact and +1, and
//                two near misses)
//   byte 1       bit 0: write the real magic; bit 1: write version 1.2
//   then patches (offset: 3 bytes LE, scaled to the file; length: 1 byte; data)
// Each file goes through parse_region and both inspect renderers.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <vector>

#include "cli/inspect.hpp"
#include "region/layout_v1.hpp"
#include "region/snapshot.hpp"

namespace {

constexpr std::array<size_t, 10> kSizes = {804680,  804681,  1197896, 1197897, 2008952,
                                           2008953, 2008984, 2008985, 2008954, 1000};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static std::vector<std::byte> file;
  const size_t file_size = kSizes[data[0] % kSizes.size()];
  file.assign(file_size, std::byte{0});
  if ((data[1] & 1) && file_size >= 4) std::memcpy(file.data(), &hami::region::kMagic, 4);
  if ((data[1] & 2) && file_size >= 12) {
    const uint32_t ver[2] = {1, 2};
    std::memcpy(file.data() + 4, ver, 8);
  }
  size_t pos = 2;
  while (pos + 4 <= size) {
    const size_t raw_off = data[pos] | (data[pos + 1] << 8) | (data[pos + 2] << 16);
    const size_t len = data[pos + 3];
    pos += 4;
    // Scale the 24-bit offset over the whole file so every field is reachable.
    const size_t off = raw_off * file_size / (1u << 24);
    const size_t n = std::min({len, size - pos, file_size - off});
    std::memcpy(file.data() + off, data + pos, n);
    pos += n;
  }
  auto snap = hami::region::parse_region(file, "fuzz");
  if (!snap) return 0;
  if (snap->proc_num < 0 || snap->proc_num > hami::region::kMaxProcesses) __builtin_trap();
  if (snap->slots.size() > static_cast<size_t>(snap->proc_num)) __builtin_trap();
  const std::string text = hami::cli::render_inspect_text(*snap, std::time_t{1795296631});
  const std::string json = hami::cli::render_inspect_json(*snap).dump();
  if (text.empty() || json.empty()) __builtin_trap();
  return 0;
}
