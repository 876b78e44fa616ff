#include "k8s/quantity.hpp"

#include <limits>
#include <string>

namespace hami::k8s {
namespace {

using i128 = __int128;

hami::Error fail(std::string_view text, const char* why) {
  return hami::Error{"quantity \"" + std::string(text.substr(0, 64)) + "\": " + why};
}

// Decimal and binary exponents of a suffix; false when it is not one.
bool parse_suffix(std::string_view s, int& dexp, int& bexp) {
  dexp = 0;
  bexp = 0;
  if (s.empty()) return true;
  if (s.size() == 2 && s[1] == 'i') {
    const std::string_view order = "KMGTPE";
    const auto at = order.find(s[0]);
    if (at == std::string_view::npos) return false;
    bexp = 10 * static_cast<int>(at + 1);
    return true;
  }
  if (s.size() == 1) {
    switch (s[0]) {
      case 'm':
        dexp = -3;
        return true;
      case 'k':
        dexp = 3;
        return true;
      case 'M':
        dexp = 6;
        return true;
      case 'G':
        dexp = 9;
        return true;
      case 'T':
        dexp = 12;
        return true;
      case 'P':
        dexp = 15;
        return true;
      case 'E':
        dexp = 18;
        return true;
      default:
        return false;
    }
  }
  if (s[0] == 'e' || s[0] == 'E') {
    size_t i = 1;
    bool neg = false;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
    if (i == s.size()) return false;
    int v = 0;
    for (; i < s.size(); ++i) {
      if (s[i] < '0' || s[i] > '9') return false;
      v = v * 10 + (s[i] - '0');
      if (v > 100000) return false;  // no meaningful quantity is this large or small
    }
    dexp = neg ? -v : v;
    return true;
  }
  return false;
}

hami::Result<int64_t> parse(std::string_view text, int extra_dexp) {
  if (text.empty()) return fail(text, "empty");
  size_t i = 0;
  bool negative = false;
  if (text[i] == '+' || text[i] == '-') negative = text[i++] == '-';
  i128 mantissa = 0;
  int significant = 0;  // digits in the mantissa once leading zeros are dropped
  int frac_digits = 0;
  int digit_count = 0;
  bool dot = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '.') {
      if (dot) return fail(text, "two decimal points");
      dot = true;
      continue;
    }
    if (c < '0' || c > '9') break;
    ++digit_count;
    if (dot) ++frac_digits;
    if (mantissa == 0 && c == '0') continue;
    if (++significant > 36) return fail(text, "too many digits");
    mantissa = mantissa * 10 + (c - '0');
  }
  if (digit_count == 0) return fail(text, "not a number");
  int dexp = 0;
  int bexp = 0;
  if (!parse_suffix(text.substr(i), dexp, bexp)) return fail(text, "unknown suffix");
  if (mantissa == 0) return int64_t{0};

  // value = mantissa * 10^d * 2^bexp, computed exactly.
  int d = dexp + extra_dexp - frac_digits;
  while (d < 0) {
    if (mantissa % 10 == 0) {
      mantissa /= 10;
    } else if (mantissa % 5 == 0 && bexp > 0) {
      mantissa /= 5;  // and /2 taken from the binary exponent
      --bexp;
    } else {
      return fail(text, extra_dexp == 0 ? "not a whole number" : "finer than 1m");
    }
    ++d;
  }
  constexpr i128 kMax = std::numeric_limits<int64_t>::max();
  const i128 limit = negative ? kMax + 1 : kMax;
  for (; d > 0; --d) {
    mantissa *= 10;
    if (mantissa > limit) return fail(text, "out of range");
  }
  for (; bexp > 0; --bexp) {
    mantissa *= 2;
    if (mantissa > limit) return fail(text, "out of range");
  }
  if (mantissa > limit) return fail(text, "out of range");
  return static_cast<int64_t>(negative ? -mantissa : mantissa);
}

}  // namespace

hami::Result<int64_t> parse_quantity(std::string_view text) {
  return parse(text, 0);
}
hami::Result<int64_t> parse_milli_quantity(std::string_view text) {
  return parse(text, 3);
}

}  // namespace hami::k8s
