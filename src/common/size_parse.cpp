#include "common/size_parse.hpp"

#include <cctype>
#include <string>

#include "common/text.hpp"

namespace hami {
namespace {

// Built with append: GCC 12 misreports operator+ chains here (-Wrestrict).
std::string quoted(std::string_view text) {
  std::string s = "'";
  s.append(text);
  s.append("'");
  return s;
}

Error bad_size(std::string_view text, const char* why) {
  std::string m = quoted(text);
  m.append(" is not a size: ");
  m.append(why);
  m.append(" (write bytes, or a number with K, M, G or T, e.g. 4g or 3000m)");
  return Error{std::move(m)};
}

Result<uint64_t> parse_digits(std::string_view digits, std::string_view whole) {
  if (digits.empty()) return bad_size(whole, "no number");
  uint64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return bad_size(whole, "not a decimal number");
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return bad_size(whole, "too large");
    v = v * 10 + d;
  }
  return v;
}

}  // namespace

Result<uint64_t> parse_size(std::string_view text) {
  const std::string_view s = trim(text);
  size_t end = 0;
  while (end < s.size() && s[end] >= '0' && s[end] <= '9')
    ++end;
  auto number = parse_digits(s.substr(0, end), text);
  if (!number) return number;

  std::string_view unit = s.substr(end);
  unsigned shift = 0;
  if (!unit.empty()) {
    switch (std::tolower(static_cast<unsigned char>(unit.front()))) {
      case 'k':
        shift = 10;
        break;
      case 'm':
        shift = 20;
        break;
      case 'g':
        shift = 30;
        break;
      case 't':
        shift = 40;
        break;
      case 'b':
        shift = 0;
        break;
      default:
        return bad_size(text, "unknown unit");
    }
    if (shift != 0) unit.remove_prefix(1);
    if (!unit.empty() && (unit.front() == 'i' || unit.front() == 'I') && shift != 0) {
      unit.remove_prefix(1);
    }
    if (!unit.empty() && (unit.front() == 'b' || unit.front() == 'B')) unit.remove_prefix(1);
    if (!unit.empty()) return bad_size(text, "unknown unit");
  }
  if (shift != 0 && *number > (UINT64_MAX >> shift)) return bad_size(text, "too large");
  return *number << shift;
}

Result<uint64_t> parse_percent(std::string_view text) {
  const std::string_view s = trim(text);
  auto v = parse_digits(s, text);
  if (!v || *v > 100) {
    return Error{quoted(text) + " is not a percentage (a whole number from 0 to 100)"};
  }
  return v;
}

Result<std::chrono::microseconds> parse_duration(std::string_view text) {
  const std::string_view s = trim(text);
  size_t digits = 0;
  while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9')
    ++digits;
  const std::string_view unit = s.substr(digits);
  auto bad = [&](std::string_view why) {
    return Error{quoted(text) + " is not a duration (" + std::string(why) +
                 "; e.g. 5s, 500ms, 2m)"};
  };
  if (digits == 0) return bad("no number");
  auto v = parse_digits(s.substr(0, digits), text);
  if (!v) return bad("number too large");
  uint64_t scale = 0;  // microseconds per unit
  if (unit.empty() || unit == "s") {
    scale = 1'000'000;
  } else if (unit == "ms") {
    scale = 1'000;
  } else if (unit == "us") {
    scale = 1;
  } else if (unit == "m") {
    scale = 60'000'000;
  } else if (unit == "h") {
    scale = 3'600'000'000;
  } else {
    return bad("unknown unit '" + std::string(unit) + "'");
  }
  if (*v > static_cast<uint64_t>(INT64_MAX) / scale) return bad("too large");
  return std::chrono::microseconds(static_cast<int64_t>(*v * scale));
}

}  // namespace hami
