#include "vgpu/limiter/core_policy.hpp"

#include <cctype>
#include <string>

namespace hami::vgpu::limiter {

std::optional<CorePolicy> parse_core_policy(std::string_view text) {
  std::string lower;
  for (char c : text)
    lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "default") return CorePolicy::kDefault;
  if (lower == "force") return CorePolicy::kForce;
  if (lower == "disable") return CorePolicy::kDisable;
  return std::nullopt;
}

const char* to_string(CorePolicy p) {
  switch (p) {
    case CorePolicy::kForce:
      return "force";
    case CorePolicy::kDisable:
      return "disable";
    case CorePolicy::kDefault:
      break;
  }
  return "default";
}

}  // namespace hami::vgpu::limiter
