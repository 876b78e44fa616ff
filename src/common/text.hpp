#pragma once
// Small text helpers every parser shares.
//
//   hami::trim("  key = v \n");   // "key = v": spaces, tabs, CR and LF off both ends

#include <string_view>

namespace hami {

// `s` without leading and trailing blanks (space, \t, \r, \n, \v, \f).
std::string_view trim(std::string_view s);

}  // namespace hami
