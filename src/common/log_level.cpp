#include "common/log_level.hpp"

#include <array>

namespace hami {

namespace {

constexpr std::array<const char*, 5> kNames = {"silent", "error", "warn", "info", "debug"};

}  // namespace

Result<log::Level> parse_log_level(std::string_view text) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (text == kNames[i] || (text.size() == 1 && text[0] == static_cast<char>('0' + i))) {
      return static_cast<log::Level>(i);
    }
  }
  return Error{"log level '" + std::string(text.substr(0, 32)) +
               "': expected error, warn, info, debug or silent (or 1, 2, 3, 4, 0)"};
}

const char* log_level_name(log::Level l) {
  const auto i = static_cast<size_t>(l);
  return i < kNames.size() ? kNames[i] : "debug";
}

std::string describe_log_level(log::Level l) {
  return std::to_string(static_cast<int>(l)) + " (" + log_level_name(l) + ")";
}

}  // namespace hami
