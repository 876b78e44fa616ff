#include "common/json_limits.hpp"

#include <cstring>
#include <string>

namespace hami {

Result<void> check_json_limits(std::string_view text, const JsonLimits& limits) {
  const char* p = text.data();
  const char* const end = p + text.size();
  int depth = 0;
  size_t values = 0;
  // Inside a number or literal: its first byte counted it.
  bool in_scalar = false;
  auto too_many = [&]() -> Result<void> {
    return Error{"JSON has more than " + std::to_string(limits.max_values) + " values (at byte " +
                 std::to_string(p - text.data()) + ")"};
  };
  while (p < end) {
    switch (*p) {
      case '"': {
        in_scalar = false;
        if (++values > limits.max_values) return too_many();
        // To the closing quote: one not escaped by an odd run of backslashes.
        const char* q = p + 1;
        for (;;) {
          q = static_cast<const char*>(std::memchr(q, '"', static_cast<size_t>(end - q)));
          if (q == nullptr) return {};  // unterminated: the parser refuses it
          const char* b = q;
          while (b > p + 1 && b[-1] == '\\')
            --b;
          if ((q - b) % 2 == 0) break;
          ++q;
        }
        p = q + 1;
        continue;
      }
      case '{':
      case '[':
        in_scalar = false;
        if (++values > limits.max_values) return too_many();
        if (++depth > limits.max_depth) {
          return Error{"JSON nested deeper than " + std::to_string(limits.max_depth) +
                       " levels (at byte " + std::to_string(p - text.data()) + ")"};
        }
        break;
      case '}':
      case ']':
        if (depth > 0) --depth;
        in_scalar = false;
        break;
      case ',':
      case ':':
      case ' ':
      case '\t':
      case '\n':
      case '\r':
        in_scalar = false;
        break;
      default:
        if (!in_scalar) {
          in_scalar = true;
          if (++values > limits.max_values) return too_many();
        }
        break;
    }
    ++p;
  }
  return {};
}

}  // namespace hami
