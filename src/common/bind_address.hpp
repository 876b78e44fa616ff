#pragma once
// The listen address of a daemon's flag ("--metrics-bind-address :9394"):
// "[host]:port", ":port" (every address) or "[v6]:port". Port 0 asks for a free
// one. Errors say what form is expected.
//
//   auto a = hami::parse_bind_address(":9394");   // {"0.0.0.0", 9394}
//   if (!a) die(a.error().message);

#include <string>
#include <utility>

#include "common/result.hpp"

namespace hami {

Result<std::pair<std::string, int>> parse_bind_address(const std::string& bind);

}  // namespace hami
