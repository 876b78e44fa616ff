#include "common/bind_address.hpp"

#include <charconv>

namespace hami {

Result<std::pair<std::string, int>> parse_bind_address(const std::string& bind) {
  const size_t colon = bind.rfind(':');
  if (colon == std::string::npos) {
    return Error{"bind address '" + bind + "': expected [host]:port, e.g. :9394 or 127.0.0.1:9394"};
  }
  std::string host = bind.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) host = "0.0.0.0";
  const std::string port_text = bind.substr(colon + 1);
  int port = -1;
  auto [p, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc{} || p != port_text.data() + port_text.size() || port < 0 || port > 65535) {
    return Error{"bind address '" + bind + "': port '" + port_text + "' is not 0-65535"};
  }
  return std::make_pair(host, port);
}

}  // namespace hami
