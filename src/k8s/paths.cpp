#include "k8s/paths.hpp"

namespace hami::k8s {
namespace {

std::string tail(std::string_view resource, std::string_view ns, std::string_view name,
                 std::string_view subresource) {
  // Appended piece by piece: GCC 12 misreports `"/" + std::string` (-Wrestrict).
  std::string p;
  if (!ns.empty()) p.append("/namespaces/").append(url_encode(ns));
  p.append("/").append(url_encode(resource));
  if (!name.empty()) {
    p.append("/").append(url_encode(name));
    if (!subresource.empty()) p.append("/").append(url_encode(subresource));
  }
  return p;
}

}  // namespace

std::string url_encode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string core_path(std::string_view resource, std::string_view ns, std::string_view name,
                      std::string_view subresource) {
  return std::string("/api/v1").append(tail(resource, ns, name, subresource));
}

std::string group_path(std::string_view group, std::string_view version, std::string_view resource,
                       std::string_view ns, std::string_view name, std::string_view subresource) {
  std::string p("/apis/");
  p.append(url_encode(group)).append("/").append(url_encode(version));
  return p.append(tail(resource, ns, name, subresource));
}

}  // namespace hami::k8s
