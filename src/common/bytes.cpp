#include "common/bytes.hpp"

#include <array>
#include <cstdio>

namespace hami {

std::string format_bytes(uint64_t bytes) {
  static constexpr std::array<const char*, 7> kUnits = {"B",   "KiB", "MiB", "GiB",
                                                        "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  unsigned unit = 0;
  while (unit + 1 < kUnits.size() && (bytes >> (10 * (unit + 1))) != 0)
    ++unit;
  const uint64_t scale = uint64_t{1} << (10 * unit);
  char buf[32];
  // Exact multiples print without decimals so "512 MiB" reads as configured.
  if (bytes % scale == 0) {
    std::snprintf(buf, sizeof buf, "%llu %s", static_cast<unsigned long long>(bytes / scale),
                  kUnits[unit]);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f %s",
                  static_cast<double>(bytes) / static_cast<double>(scale), kUnits[unit]);
  }
  return buf;
}

}  // namespace hami
