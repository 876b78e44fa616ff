#pragma once
// A loopback TCP port the kernel just handed out and freed, for a daemon a
// test starts with a fixed --port. Another process could take it before the
// daemon binds; the daemon would then exit and the test says so.
//
//   const int port = hami::test::free_port();
//   Subprocess s({bin, "--http_bind=127.0.0.1:" + std::to_string(port)});

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace hami::test {

inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

}  // namespace hami::test
