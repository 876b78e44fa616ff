#pragma once
// Human-readable byte counts for logs and CLI output ("1.63 GiB", "512 MiB",
// "0 B"). Binary units, because limits are configured in binary units.
//
//   std::string s = hami::format_bytes(4ull << 30);   // "4 GiB"
//   std::string t = hami::format_bytes(1536ull << 20); // "1.50 GiB"

#include <cstdint>
#include <string>

namespace hami {

std::string format_bytes(uint64_t bytes);

}  // namespace hami
