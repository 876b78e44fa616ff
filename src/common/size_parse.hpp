#pragma once
// Parses memory sizes as HAMi users write them: "4g", "3000m", "512K",
// "4294967296" (bytes), also "4Gi"/"4GiB"/"4gb". Units are binary (K = 1024).
// Unlike upstream HAMi-core (strtoul base 0), digits are always decimal, so
// "010m" is 10 MiB, not 8; trailing garbage is an error, not ignored.
//
//   auto bytes = hami::parse_size("3000m");    // 3145728000
//   if (!bytes) log(bytes.error().message);     // "'3k5' is not a size: ..."

#include <chrono>
#include <cstdint>
#include <string_view>

#include "common/result.hpp"

namespace hami {

Result<uint64_t> parse_size(std::string_view text);

// Integer percent in [0, 100] ("30", " 30 "); anything else is an error.
Result<uint64_t> parse_percent(std::string_view text);

// Durations as flags take them: "5s", "500ms", "2m", "1h", "250us"; a bare
// number is seconds. Whole units only ("1.5s" is an error: write "1500ms").
Result<std::chrono::microseconds> parse_duration(std::string_view text);

}  // namespace hami
