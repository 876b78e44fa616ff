#include "common/kv_text.hpp"

#include "common/text.hpp"

namespace hami {

std::optional<std::string> KvText::find(std::string_view key) const {
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    if (it->key == key) return it->value;
  }
  return std::nullopt;
}

KvText parse_kv_text(std::string_view text) {
  KvText out;
  size_t pos = 0;
  size_t line_no = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = trim(text.substr(pos, end - pos));
    pos = end + 1;
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos || eq == 0 || trim(line.substr(0, eq)).empty()) {
      out.malformed.push_back(KvEntry{line_no, {}, std::string(line)});
      continue;
    }
    out.entries.push_back(KvEntry{line_no, std::string(trim(line.substr(0, eq))),
                                  std::string(trim(line.substr(eq + 1)))});
  }
  return out;
}

}  // namespace hami
