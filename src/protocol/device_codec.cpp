#include "protocol/device_codec.hpp"

#include <cctype>

#include <charconv>
#include <optional>

namespace hami::protocol {
namespace {

Error entry_error(size_t container, size_t device, std::string_view entry, std::string_view why) {
  std::string m = "container " + std::to_string(container);
  m.append(", device ");
  m.append(std::to_string(device));
  m.append(" '");
  m.append(entry);
  m.append("': ");
  m.append(why);
  return Error{std::move(m)};
}

bool parse_int32(std::string_view s, int32_t& out) {
  if (s.empty()) return false;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size() && out >= 0;
}

// Splits at sep; a trailing separator ends the last piece rather than opening
// an empty one.
template <class F>
bool for_each_terminated(std::string_view text, char sep, F&& f) {
  size_t n = 0;
  while (!text.empty()) {
    const size_t cut = text.find(sep);
    if (!f(text.substr(0, cut), n++)) return false;
    if (cut == std::string_view::npos) break;
    text.remove_prefix(cut + 1);
  }
  return true;
}

bool valid_field(std::string_view s) {
  return !s.empty() && s.find_first_of(",:;") == std::string_view::npos;
}

}  // namespace

Result<PodDevices> decode_pod_devices(std::string_view text) {
  if (text.size() > kMaxPodDevicesText) {
    return Error{"pod devices annotation of " + std::to_string(text.size()) +
                 " bytes is larger than any allocation (" + std::to_string(kMaxPodDevicesText) +
                 ")"};
  }
  // Surrounding whitespace is not part of the value (a YAML block scalar
  // written by hand ends in a newline).
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  PodDevices pod;
  std::optional<Error> err;
  for_each_terminated(text, ';', [&](std::string_view ctr, size_t ci) {
    ContainerDevices& devices = pod.emplace_back();
    return for_each_terminated(ctr, ':', [&](std::string_view entry, size_t di) {
      if (entry.empty()) {
        err = entry_error(ci, di, entry, "empty device entry");
        return false;
      }
      std::string_view fields[4];
      size_t nf = 0;
      std::string_view rest = entry;
      while (true) {
        const size_t cut = rest.find(',');
        if (nf == 4) {
          nf = 5;
          break;
        }
        fields[nf++] = rest.substr(0, cut);
        if (cut == std::string_view::npos) break;
        rest.remove_prefix(cut + 1);
      }
      if (nf != 4) {
        err = entry_error(ci, di, entry, "expected UUID,Type,Usedmem,Usedcores");
        return false;
      }
      ContainerDevice d;
      if (fields[0].empty() || fields[1].empty()) {
        err = entry_error(ci, di, entry, "empty UUID or type");
        return false;
      }
      if (!parse_int32(fields[2], d.mem_mib)) {
        err = entry_error(ci, di, entry, "memory is not a non-negative 32-bit integer");
        return false;
      }
      if (!parse_int32(fields[3], d.cores)) {
        err = entry_error(ci, di, entry, "cores is not a non-negative 32-bit integer");
        return false;
      }
      d.uuid = fields[0];
      d.type = fields[1];
      devices.push_back(std::move(d));
      return true;
    });
  });
  if (err) return *err;
  return pod;
}

Result<std::string> encode_pod_devices(const PodDevices& pod) {
  std::string out;
  for (size_t ci = 0; ci < pod.size(); ++ci) {
    for (size_t di = 0; di < pod[ci].size(); ++di) {
      const ContainerDevice& d = pod[ci][di];
      if (!valid_field(d.uuid) || !valid_field(d.type)) {
        return entry_error(ci, di, d.uuid, "UUID and type must be non-empty, without , : or ;");
      }
      if (d.mem_mib < 0 || d.cores < 0) {
        return entry_error(ci, di, d.uuid, "memory and cores must not be negative");
      }
      out += d.uuid;
      out += ',';
      out += d.type;
      out += ',';
      out += std::to_string(d.mem_mib);
      out += ',';
      out += std::to_string(d.cores);
      out += ':';
    }
    out += ';';
  }
  return out;
}

}  // namespace hami::protocol
