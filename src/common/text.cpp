#include "common/text.hpp"

namespace hami {

std::string_view trim(std::string_view s) {
  constexpr std::string_view kBlank = " \t\r\n\v\f";
  const size_t b = s.find_first_not_of(kBlank);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kBlank) - b + 1);
}

}  // namespace hami
