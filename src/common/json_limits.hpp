#pragma once
// Bounds on the shape of a JSON text from outside, checked before it is
// parsed. A DOM parser (nlohmann::json) spends ~80 bytes per value, so a body
// of small values costs ~30 times its size, and nesting costs one allocation
// per level: 57 MiB of nested objects took 1.6 GB. This scan allocates
// nothing and looks at each byte once; whatever it lets through has at most
// max_depth levels and max_values values, so the parse after it is bounded by
// the body's size plus max_values × ~100 bytes.
//
//   if (auto ok = hami::check_json_limits(body, {.max_depth = 64}); !ok)
//     return deny("AdmissionReview: " + ok.error().message);
//
// It is not a validator: invalid JSON may pass (the parser then refuses it),
// but a text the parser accepts passes only if it is within both bounds.

#include <cstddef>
#include <string_view>

#include "common/result.hpp"

namespace hami {

struct JsonLimits {
  int max_depth = 64;  // objects and arrays, one inside the other
  // Values as the parser builds them: objects, arrays, strings (keys
  // included), numbers and literals.
  size_t max_values = 1'000'000;
};

Result<void> check_json_limits(std::string_view text, const JsonLimits& limits = {});

}  // namespace hami
