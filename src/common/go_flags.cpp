#include "common/go_flags.hpp"

#include <cctype>

namespace hami::goflags {

std::vector<std::string> normalize(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  out.reserve(args.size());
  bool positional = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    // args[0] is the program; after "--" everything is an operand.
    if (i == 0 || positional || a.size() < 2 || a[0] != '-' || a[1] == '-' ||
        !std::isalpha(static_cast<unsigned char>(a[1]))) {
      if (a == "--") positional = true;
      out.push_back(a);
      continue;
    }
    // "-v", "-h" and "-v4" (pflag's shorthand with its value) stay short
    // options; "-v=4", "-debug", "-config-file=x" are Go's single-dash long names.
    out.push_back(a);
    if (a.size() > 2 && !std::isdigit(static_cast<unsigned char>(a[2]))) {
      out.back().insert(0, 1, '-');
    }
  }
  return out;
}

Argv::Argv(int argc, const char* const* argv)
    : args_(normalize(std::vector<std::string>(argv, argv + argc))) {
  ptrs_.reserve(args_.size() + 1);
  for (auto& a : args_)
    ptrs_.push_back(a.data());
}

log::Level klog_level(int v) {
  return v >= 4 ? log::Level::kDebug : log::Level::kInfo;
}

Result<std::vector<std::pair<std::string, std::string>>> parse_string_map(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  if (text.empty()) return out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string_view item = text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      std::string msg = "'";
      msg.append(item).append("' is not key=value (expected key=value[,key=value...])");
      return Error{msg};
    }
    std::string key(item.substr(0, eq));
    std::string value(item.substr(eq + 1));
    bool replaced = false;
    for (auto& [k, v] : out) {
      if (k == key) {
        v = value;
        replaced = true;
      }
    }
    if (!replaced) out.emplace_back(std::move(key), std::move(value));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string not_supported(std::string_view flag, std::string_view why) {
  return std::string(flag) + ": not supported by this build: " + std::string(why);
}

}  // namespace hami::goflags
