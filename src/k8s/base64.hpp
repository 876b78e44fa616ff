#pragma once
// Standard base64 (RFC 4648, with padding), as kubeconfig's *-data fields and
// list continue tokens use it.
//
//   auto pem = hami::k8s::base64_decode(node["certificate-authority-data"].as<std::string>());
//   if (!pem) return error("certificate-authority-data: not valid base64");

#include <optional>
#include <string>
#include <string_view>

namespace hami::k8s {

std::string base64_encode(std::string_view bytes);
// nullopt on a character outside the alphabet or a bad length/padding. Whitespace
// (line breaks in wrapped PEM-style text) is skipped.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace hami::k8s
