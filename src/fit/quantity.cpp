#include "fit/quantity.hpp"

#include <string>

namespace hami::fit {
namespace {

Error bad(std::string_view text, const char* why) {
  std::string m = "quantity '";
  m.append(text);
  m.append("': ");
  m.append(why);
  return Error{std::move(m)};
}

struct Suffix {
  int exp10 = 0;
  int exp2 = 0;
  bool ok = true;
};

Suffix binary_or_decimal_suffix(std::string_view s) {
  if (s.empty()) return {};
  if (s.size() == 2 && s[1] == 'i') {
    switch (s[0]) {
      case 'K':
        return {0, 10};
      case 'M':
        return {0, 20};
      case 'G':
        return {0, 30};
      case 'T':
        return {0, 40};
      case 'P':
        return {0, 50};
      case 'E':
        return {0, 60};
      default:
        return {0, 0, false};
    }
  }
  if (s.size() == 1) {
    switch (s[0]) {
      case 'n':
        return {-9, 0};
      case 'u':
        return {-6, 0};
      case 'm':
        return {-3, 0};
      case 'k':
        return {3, 0};
      case 'M':
        return {6, 0};
      case 'G':
        return {9, 0};
      case 'T':
        return {12, 0};
      case 'P':
        return {15, 0};
      case 'E':
        return {18, 0};
      default:
        return {0, 0, false};
    }
  }
  return {0, 0, false};
}

}  // namespace

Result<int64_t> parse_whole_quantity(std::string_view text) {
  std::string_view s = text;
  bool negative = false;
  if (!s.empty() && (s.front() == '+' || s.front() == '-')) {
    negative = s.front() == '-';
    s.remove_prefix(1);
  }
  // The mantissa as an integer plus the count of digits after the point; 38
  // significant digits always fit in 128 bits, more can never be an int64.
  unsigned __int128 mantissa = 0;
  int significant = 0;
  int frac_digits = 0;
  bool any_digit = false;
  bool seen_point = false;
  size_t i = 0;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '.') {
      if (seen_point) return bad(text, "two decimal points");
      seen_point = true;
      continue;
    }
    if (c < '0' || c > '9') break;
    any_digit = true;
    if (seen_point) ++frac_digits;
    if (mantissa == 0 && c == '0') continue;
    if (++significant > 38) return bad(text, "too many digits");
    mantissa = mantissa * 10 + static_cast<unsigned>(c - '0');
  }
  if (!any_digit) return bad(text, "no number");

  const std::string_view rest = s.substr(i);
  int exp10 = 0;
  int exp2 = 0;
  // "1E3" is an exponent but "1E" and "1Ei" are suffixes.
  if (rest.size() > 1 && (rest[0] == 'e' || rest[0] == 'E') && rest != "Ei") {
    std::string_view e = rest.substr(1);
    bool exp_negative = false;
    if (e.front() == '+' || e.front() == '-') {
      exp_negative = e.front() == '-';
      e.remove_prefix(1);
    }
    if (e.empty()) return bad(text, "exponent without digits");
    for (char c : e) {
      if (c < '0' || c > '9') return bad(text, "exponent is not a whole number");
      if (exp10 > 1000) return bad(text, "exponent out of range");
      exp10 = exp10 * 10 + (c - '0');
    }
    if (exp_negative) exp10 = -exp10;
  } else {
    const Suffix suffix = binary_or_decimal_suffix(rest);
    if (!suffix.ok) return bad(text, "unknown suffix (use Ki, Mi, Gi, k, M, G, m or an exponent)");
    exp10 = suffix.exp10;
    exp2 = suffix.exp2;
  }

  if (mantissa == 0) return int64_t{0};
  constexpr unsigned __int128 kMax = static_cast<unsigned __int128>(INT64_MAX);
  // Dividing by 10 is dividing by 5 and by 2; the 2 may come out of a binary
  // suffix ("0.5Ki" is 5 × 2^10 / 10 = 512).
  for (int scale = exp10 - frac_digits; scale < 0; ++scale) {
    if (mantissa % 5 != 0) return bad(text, "not a whole number");
    mantissa /= 5;
    if (exp2 > 0) {
      --exp2;
    } else {
      if (mantissa % 2 != 0) return bad(text, "not a whole number");
      mantissa /= 2;
    }
  }
  for (int scale = exp10 - frac_digits; scale > 0; --scale) {
    if (mantissa > kMax / 10) return bad(text, "too large");
    mantissa *= 10;
  }
  if (mantissa > (kMax >> exp2)) return bad(text, "too large");
  mantissa <<= exp2;
  const auto v = static_cast<int64_t>(mantissa);
  return negative ? -v : v;
}

}  // namespace hami::fit
