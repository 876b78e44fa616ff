#pragma once
// Small text helpers every parser shares.
//
//   hami::trim("  key = v \n");   // "key = v": spaces, tabs, CR and LF off both ends
//   hami::utf8_sequence_length("\xc3\xa9", 0);  // 2 (é); 0 for bytes that are not UTF-8

#include <cstddef>
#include <string_view>

namespace hami {

// `s` without leading and trailing blanks (space, \t, \r, \n, \v, \f).
std::string_view trim(std::string_view s);

// The length (1 to 4) of the well-formed UTF-8 sequence that starts at s[i],
// or 0 when the bytes there are not one (a stray continuation byte, a
// truncated or overlong sequence, a surrogate, past U+10FFFF). File names
// are bytes: whoever puts one in a label or JSON text checks it with this.
size_t utf8_sequence_length(std::string_view s, size_t i);

}  // namespace hami
