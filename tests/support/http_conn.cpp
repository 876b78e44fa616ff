#include "support/http_conn.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <utility>

namespace hami::test {
namespace {

using Clock = std::chrono::steady_clock;

SSL* as_ssl(void* p) {
  return static_cast<SSL*>(p);
}

int ms_left(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::max<long long>(0, left));
}

bool wait_fd(int fd, short events, Clock::time_point deadline) {
  pollfd p{fd, events, 0};
  for (;;) {
    const int r = ::poll(&p, 1, ms_left(deadline));
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return false;
  }
}

std::string lower(std::string s) {
  for (char& c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

int connect_loopback(int port, std::string& error) {
  // A server that closes the connection while we write must not kill the test.
  ::signal(SIGPIPE, SIG_IGN);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    error = "connect to 127.0.0.1:" + std::to_string(port) + ": " + std::strerror(errno);
    ::close(fd);
    return -1;
  }
  // The client's own writes must not wait for ACKs either: the round trips
  // measured are the server's.
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

}  // namespace

HttpConn HttpConn::open_raw(int port) {
  HttpConn c;
  c.fd_ = connect_loopback(port, c.error_);
  return c;
}

HttpConn HttpConn::open(int port, std::optional<TlsClient> tls, std::chrono::milliseconds timeout) {
  HttpConn c = open_raw(port);
  if (!c.ok() || !tls) return c;
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  c.ctx_ = ctx;
  if (!tls->ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, tls->ca_file.c_str(), nullptr) != 1) {
      c.error_ = "cannot load CA " + tls->ca_file;
      return c;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  }
  if (!tls->cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx, tls->cert_file.c_str()) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx, tls->key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      c.error_ = "cannot load client certificate " + tls->cert_file;
      return c;
    }
  }
  SSL* ssl = SSL_new(ctx);
  c.ssl_ = ssl;
  SSL_set_fd(ssl, c.fd_);
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    ERR_clear_error();
    const int r = SSL_connect(ssl);
    if (r == 1) break;
    const int e = SSL_get_error(ssl, r);
    if (e == SSL_ERROR_WANT_READ && wait_fd(c.fd_, POLLIN, deadline)) continue;
    if (e == SSL_ERROR_WANT_WRITE && wait_fd(c.fd_, POLLOUT, deadline)) continue;
    char buf[256] = "timeout";
    if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
      ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
    }
    c.error_ = std::string("TLS handshake: ") + buf;
    return c;
  }
  return c;
}

HttpConn::HttpConn(HttpConn&& o) noexcept {
  *this = std::move(o);
}

HttpConn& HttpConn::operator=(HttpConn&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = std::exchange(o.fd_, -1);
    ssl_ = std::exchange(o.ssl_, nullptr);
    ctx_ = std::exchange(o.ctx_, nullptr);
    in_ = std::move(o.in_);
    error_ = std::move(o.error_);
  }
  return *this;
}

HttpConn::~HttpConn() {
  reset();
}

void HttpConn::reset() {
  if (ssl_) SSL_free(as_ssl(ssl_));
  if (ctx_) SSL_CTX_free(static_cast<SSL_CTX*>(ctx_));
  if (fd_ >= 0) ::close(fd_);
  ssl_ = ctx_ = nullptr;
  fd_ = -1;
}

bool HttpConn::send(std::string_view bytes, std::chrono::milliseconds timeout) {
  if (fd_ < 0) return false;
  const auto deadline = Clock::now() + timeout;
  while (!bytes.empty()) {
    ssize_t n;
    bool want_read = false;
    if (ssl_) {
      ERR_clear_error();
      const int r = SSL_write(as_ssl(ssl_), bytes.data(), static_cast<int>(bytes.size()));
      if (r > 0) {
        n = r;
      } else {
        const int e = SSL_get_error(as_ssl(ssl_), r);
        if (e != SSL_ERROR_WANT_WRITE && e != SSL_ERROR_WANT_READ) return false;
        want_read = e == SSL_ERROR_WANT_READ;
        n = -1;
        errno = EAGAIN;
      }
    } else {
      n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    }
    if (n > 0) {
      bytes.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!wait_fd(fd_, want_read ? POLLIN : POLLOUT, deadline)) return false;
      continue;
    }
    return false;
  }
  return true;
}

bool HttpConn::fill(Clock::time_point deadline) {
  char buf[16384];
  for (;;) {
    ssize_t n;
    bool want_write = false;
    if (ssl_) {
      ERR_clear_error();
      const int r = SSL_read(as_ssl(ssl_), buf, sizeof buf);
      if (r > 0) {
        n = r;
      } else {
        const int e = SSL_get_error(as_ssl(ssl_), r);
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) return false;
        want_write = e == SSL_ERROR_WANT_WRITE;
        n = -1;
        errno = EAGAIN;
      }
    } else {
      n = ::recv(fd_, buf, sizeof buf, 0);
    }
    if (n > 0) {
      in_.append(buf, static_cast<size_t>(n));
      return true;
    }
    if (n == 0) return false;
    if (errno != EAGAIN && errno != EINTR) return false;
    if (!wait_fd(fd_, want_write ? POLLOUT : POLLIN, deadline)) return false;
  }
}

std::optional<HttpReply> HttpConn::read_reply(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  size_t head_end;
  while ((head_end = in_.find("\r\n\r\n")) == std::string::npos) {
    if (!fill(deadline)) return std::nullopt;
  }
  HttpReply r;
  const std::string head = in_.substr(0, head_end);
  in_.erase(0, head_end + 4);
  size_t line_end = head.find("\r\n");
  const std::string status_line = head.substr(0, line_end);
  if (status_line.size() < 12 || status_line.compare(0, 5, "HTTP/") != 0) return std::nullopt;
  r.status = std::atoi(status_line.c_str() + 9);
  while (line_end != std::string::npos) {
    const size_t start = line_end + 2;
    line_end = head.find("\r\n", start);
    const std::string line =
        head.substr(start, line_end == std::string::npos ? std::string::npos : line_end - start);
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    r.headers[lower(line.substr(0, colon))] = value;
  }
  if (r.status / 100 == 1) return read_reply(timeout);  // 100 Continue
  if (lower(r.headers["transfer-encoding"]) == "chunked") {
    for (;;) {
      size_t eol;
      while ((eol = in_.find("\r\n")) == std::string::npos) {
        if (!fill(deadline)) return std::nullopt;
      }
      const size_t size = std::stoul(in_.substr(0, eol), nullptr, 16);
      while (in_.size() < eol + 2 + size + 2) {
        if (!fill(deadline)) return std::nullopt;
      }
      r.body += in_.substr(eol + 2, size);
      in_.erase(0, eol + 2 + size + 2);
      if (size == 0) break;
    }
    return r;
  }
  const size_t length = std::stoul(r.headers.count("content-length") ? r.headers["content-length"]
                                                                     : std::string("0"));
  while (in_.size() < length) {
    if (!fill(deadline)) return std::nullopt;
  }
  r.body = in_.substr(0, length);
  in_.erase(0, length);
  return r;
}

std::optional<int> HttpConn::read_status(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (in_.find("\r\n") == std::string::npos) {
    if (!fill(deadline)) return std::nullopt;
  }
  if (in_.size() < 12 || in_.compare(0, 5, "HTTP/") != 0) return std::nullopt;
  return std::atoi(in_.c_str() + 9);
}

std::optional<HttpReply> HttpConn::request(const std::string& method, const std::string& path,
                                           const std::string& body,
                                           std::chrono::milliseconds timeout) {
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  if (!body.empty() || method == "POST") {
    req +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  req += "\r\n";
  req += body;
  // One write: the request must not itself wait on Nagle.
  if (!send(req, timeout)) return std::nullopt;
  return read_reply(timeout);
}

bool HttpConn::wait_closed(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (Clock::now() >= deadline) return false;
    if (fill(deadline)) {
      in_.clear();
      continue;
    }
    // fill() is false on close, error or timeout: tell them apart.
    return Clock::now() < deadline;
  }
}

}  // namespace hami::test
