#include "deviceplugin/pod_devices.hpp"

#include <charconv>
#include <limits>

namespace hami::deviceplugin {
namespace {

std::string_view trim(std::string_view s) {
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && blank(s.front()))
    s.remove_prefix(1);
  while (!s.empty() && blank(s.back()))
    s.remove_suffix(1);
  return s;
}

// Annotation text is shown back in errors; keep it short and printable.
std::string quote(std::string_view s) {
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < 80; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  }
  if (s.size() > 80) out += "...";
  return out + "'";
}

bool printable(std::string_view s) {
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c <= 0x20 || c >= 0x7f) return false;
  }
  return true;
}

Result<int32_t> parse_int32(std::string_view s, const char* what, const std::string& where) {
  int32_t v = 0;
  const auto* end = s.data() + s.size();
  const auto [p, ec] = std::from_chars(s.data(), end, v);
  if (s.empty() || ec != std::errc() || p != end || v < 0) {
    return Error{where + ": " + what + " " + quote(s) + " is not a whole number from 0 to " +
                 std::to_string(std::numeric_limits<int32_t>::max())};
  }
  return v;
}

Result<ContainerDevice> decode_device(std::string_view text, const std::string& where) {
  std::vector<std::string_view> f;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    f.push_back(text.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (f.size() != 4) {
    return Error{where + " " + quote(text) + ": expected UUID,Type,MiB,Cores (4 fields), found " +
                 std::to_string(f.size())};
  }
  if (f[0].empty() || !printable(f[0]))
    return Error{where + " " + quote(text) + ": the GPU UUID is empty or has blanks"};
  ContainerDevice d;
  d.uuid = f[0];
  d.type = f[1];
  auto mem = parse_int32(f[2], "memory (MiB)", where);
  if (!mem) return mem.error();
  auto cores = parse_int32(f[3], "cores (percent)", where);
  if (!cores) return cores.error();
  d.mem_mib = *mem;
  d.cores = *cores;
  return d;
}

Result<ContainerDevices> decode_container(std::string_view text, size_t container) {
  ContainerDevices out;
  size_t start = 0;
  size_t device = 0;
  while (start <= text.size()) {
    const size_t colon = text.find(':', start);
    const std::string_view part =
        text.substr(start, colon == std::string_view::npos ? colon : colon - start);
    if (!part.empty()) {
      auto d = decode_device(
          part, "container " + std::to_string(container) + ", device " + std::to_string(device));
      if (!d) return d.error();
      out.push_back(std::move(*d));
      ++device;
    }
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  return out;
}

}  // namespace

Result<PodDevices> decode_pod_devices(std::string_view text) {
  if (text.size() > kMaxPodDevicesText) {
    return Error{"the value is " + std::to_string(text.size()) + " bytes, more than the " +
                 std::to_string(kMaxPodDevicesText) + " a scheduler writes"};
  }
  text = trim(text);
  PodDevices out;
  size_t start = 0;
  while (start < text.size()) {
    const size_t semi = text.find(';', start);
    // Every entry ends with ';'; a final entry without one is accepted too.
    const std::string_view entry =
        text.substr(start, semi == std::string_view::npos ? semi : semi - start);
    auto c = decode_container(entry, out.size());
    if (!c) return c.error();
    out.push_back(std::move(*c));
    if (semi == std::string_view::npos) break;
    start = semi + 1;
  }
  return out;
}

std::string encode_pod_devices(const PodDevices& devices) {
  std::string out;
  for (const ContainerDevices& c : devices) {
    for (const ContainerDevice& d : c) {
      out += d.uuid + "," + d.type + "," + std::to_string(d.mem_mib) + "," +
             std::to_string(d.cores) + ":";
    }
    out += ";";
  }
  return out;
}

bool any_devices(const PodDevices& devices) {
  for (const ContainerDevices& c : devices) {
    if (!c.empty()) return true;
  }
  return false;
}

}  // namespace hami::deviceplugin
