#pragma once
// Whole-number resource quantities as a container's limits carry them
// ("2", "3000", "3k", "1e3", "2000m", "1Gi"): the value Kubernetes'
// Quantity.AsInt64 gives, or an error where that says "not an integer". The
// fitting core cannot depend on the Kubernetes client, so it keeps this
// small exact parser of its own (no floating point).
//
//   auto n = hami::fit::parse_whole_quantity("3k");    // 3000
//   auto bad = hami::fit::parse_whole_quantity("1.5"); // error: not a whole number

#include <cstdint>
#include <string_view>

#include "common/result.hpp"

namespace hami::fit {

Result<int64_t> parse_whole_quantity(std::string_view text);

}  // namespace hami::fit
