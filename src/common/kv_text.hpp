#pragma once
// KEY=VALUE text, one pair per line, '#' comments and blank lines skipped,
// spaces around keys and values trimmed: the format of the limits file the
// device plugin writes for each container (read by libvgpu.so and by the node
// agent). A line that is not KEY=VALUE is reported with its number, never
// guessed at.
//
//   KvText kv = hami::parse_kv_text(text);
//   for (const auto& bad : kv.malformed) log("line %zu: %s", bad.line, bad.text.c_str());
//   if (auto v = kv.find("CUDA_TASK_PRIORITY")) use(*v);

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hami {

struct KvEntry {
  size_t line = 0;  // 1-based
  std::string key;
  std::string value;
};

struct KvText {
  std::vector<KvEntry> entries;    // in file order; a repeated key appears twice
  std::vector<KvEntry> malformed;  // key empty, value the whole trimmed line
  // The last value given for `key`.
  std::optional<std::string> find(std::string_view key) const;
};

KvText parse_kv_text(std::string_view text);

}  // namespace hami
