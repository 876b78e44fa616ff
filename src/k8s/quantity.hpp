#pragma once
// Kubernetes resource quantities ("3", "4Gi", "1.5Gi", "500m", "1e3"), parsed
// exactly: no floating point, so "1.5" is rejected as a device count instead of
// being rounded. The grammar is the API's: a signed decimal number (digits,
// "d.", ".d" or "d.d") followed by a binary suffix (Ki Mi Gi Ti Pi Ei), a
// decimal suffix (m k M G T P E) or an exponent (e3, E-2).
//
//   auto gpus = hami::k8s::parse_quantity("2");         // 2
//   auto mem = hami::k8s::parse_quantity("1.5Gi");      // 1610612736
//   auto bad = hami::k8s::parse_quantity("1.5");        // error: not a whole number
//   auto cpu = hami::k8s::parse_milli_quantity("250m"); // 250

#include <cstdint>
#include <string_view>

#include "common/result.hpp"

namespace hami::k8s {

// The quantity's value, which must be a whole number that fits in int64.
hami::Result<int64_t> parse_quantity(std::string_view text);
// The quantity in thousandths ("1.5" → 1500, "250m" → 250); finer than 1m is an error.
hami::Result<int64_t> parse_milli_quantity(std::string_view text);

}  // namespace hami::k8s
