#pragma once
// One client connection to an HTTP(S) server on loopback, byte by byte under
// the test's control: what a well-behaved client does (a request, its answer,
// the next request on the same connection) and what a hostile one does (a
// byte at a time, a body that never ends, nothing at all). TLS through
// OpenSSL, optionally with a client certificate. Every wait has a deadline;
// nothing here throws.
//
//   hami::test::HttpConn c = hami::test::HttpConn::open(port, {.ca_file = "ca.crt"});
//   auto r = c.request("GET", "/healthz");          // keeps the connection
//   if (r && r->status == 200) ...
//   c.send("POST /webhook HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
//   bool gone = c.wait_closed(std::chrono::seconds(2));

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace hami::test {

struct TlsClient {
  std::string ca_file;    // verify the server against it (empty: do not verify)
  std::string cert_file;  // client certificate and key, both or neither
  std::string key_file;
};

struct HttpReply {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-case
  std::string body;
};

class HttpConn {
 public:
  // Connects (and with `tls`, completes the handshake); !ok() on failure,
  // with error() saying why.
  static HttpConn open(int port, std::optional<TlsClient> tls = std::nullopt,
                       std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // Connects without sending a byte (not even a TLS ClientHello).
  static HttpConn open_raw(int port);

  HttpConn(HttpConn&&) noexcept;
  HttpConn& operator=(HttpConn&&) noexcept;
  ~HttpConn();

  bool ok() const { return fd_ >= 0 && error_.empty(); }
  const std::string& error() const { return error_; }

  // Writes all of `bytes`; false once the server has closed or reset the
  // connection (or after `timeout` without progress).
  bool send(std::string_view bytes, std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // Reads one answer (Content-Length or chunked body).
  std::optional<HttpReply> read_reply(std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // Reads an answer's status line only, leaving the rest unread in the
  // server (a client that asks and never reads the answer).
  std::optional<int> read_status(std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // send + read_reply of a whole request with Content-Length, kept alive.
  std::optional<HttpReply> request(const std::string& method, const std::string& path,
                                   const std::string& body = "",
                                   std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // Whether the server closes the connection within `timeout` (bytes it
  // sends meanwhile are read and dropped).
  bool wait_closed(std::chrono::milliseconds timeout);

 private:
  HttpConn() = default;
  // Reads what is available into in_, waiting until `deadline`; false on
  // close, error or timeout.
  bool fill(std::chrono::steady_clock::time_point deadline);
  void reset();

  int fd_ = -1;
  void* ssl_ = nullptr;  // SSL*
  void* ctx_ = nullptr;  // SSL_CTX*
  std::string in_;
  std::string error_;
};

}  // namespace hami::test
