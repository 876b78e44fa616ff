#pragma once
// The daemons' HTTP(S) server: the scheduler's extender and webhook, its
// /metrics, and the node agent's /metrics, /healthz and /containers. Built on
// Boost.Beast/Asio so that an open connection costs a socket and a few
// kilobytes, never a thread: one I/O thread reads and writes every connection,
// and a small pool of workers runs the handlers. A client that sends a byte a
// second, or connects and says nothing, holds no worker, so health checks and
// scrapes are answered while such clients are connected.
//
// What a client cannot do to it:
//  - send a bigger body than its route allows: the limit is checked against
//    Content-Length before anything is read and against the bytes as they
//    arrive for chunked bodies (413, connection closed);
//  - take longer than request_timeout from a request's first byte to its last
//    (slow senders), or than handshake_timeout for TLS, or stay idle past
//    idle_timeout, or not read the answer within write_timeout: the
//    connection is closed;
//  - open more than max_connections: the one that has waited longest on its
//    client is closed to make room; when every one has a request in our
//    hands, accepting pauses until one closes or waits on its client again
//    (new connections wait in the kernel's listen backlog, not refused);
//  - hold more memory than the daemon's MemoryBudget with bodies being read
//    or answers it does not read: a body is charged its declared length
//    before it is read (a chunked one as it grows), an answer its size until
//    it is written; a request that finds no room gets 503 and the connection
//    closes, after the upload that has been arriving longest, if it began
//    over stalled_upload (1 s) ago, has been closed to make room. A request without
//    a body only needs the budget not to be overspent, and inline routes
//    (health) are answered whatever the budget. What a closed request held is
//    handed back to the kernel (malloc_trim);
//  - reach a route marked Auth::kClientCert without a TLS client certificate
//    that verifies against client_ca_file (403).
// Every accepted socket has TCP_NODELAY: an answer written in two pieces
// (TLS records, header then body) would otherwise wait for the client's
// delayed ACK, ~40 ms a request.
//
//   hami::http::Server server({.bind = "0.0.0.0:8443", .cert_file = "tls.crt",
//                              .key_file = "tls.key", .client_ca_file = "client-ca.crt"},
//                             {{.method = "POST", .path = "/filter", .max_body = 16 << 20,
//                               .auth = hami::http::Auth::kClientCert,
//                               .handler = [](const Request& q, Response& r) { ... }},
//                              {.method = "GET", .path = "/healthz", .inline_handler = true,
//                               .handler = [](const Request&, Response& r) { r.body = "ok\n"; }}});
//   if (auto ok = server.start(); !ok) die(ok.error().message);
//   ... server.port();  server.stop();

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace hami::http {

struct Request {
  std::string method;  // "GET", "POST", ...
  std::string path;    // the target without its query
  std::string body;
  std::string peer;  // "10.0.0.5:41234"
  // A TLS client certificate was presented and verifies against the client CA.
  bool client_verified = false;
  std::string client_subject;  // its subject's CN, when verified
  // When the request was whole and handed to the workers' queue: the
  // handler's start minus this is how long it waited for a worker.
  std::chrono::steady_clock::time_point received{};
};

struct Response {
  int status = 200;
  std::string content_type = "text/plain";
  std::string body;
  void set_content(std::string text, std::string type) {
    body = std::move(text);
    content_type = std::move(type);
  }
};

using Handler = std::function<void(const Request&, Response&)>;

// Bytes of request bodies and unsent answers a daemon holds, across every
// connection of every Server given it (the scheduler's two listeners share
// one). Thread-safe.
//
//   auto budget = std::make_shared<hami::http::MemoryBudget>(128 << 20);
//   ServerOptions{.memory_budget = budget, ...};   // every server of the daemon
class MemoryBudget {
 public:
  explicit MemoryBudget(size_t limit) : limit_(limit) {}
  // Takes `n` bytes if they fit under the limit.
  bool try_take(size_t n);
  // Takes `n` bytes whatever the limit: memory already spent (an answer made).
  void take(size_t n) { used_.fetch_add(n, std::memory_order_relaxed); }
  void give_back(size_t n) { used_.fetch_sub(n, std::memory_order_relaxed); }
  size_t used() const { return used_.load(std::memory_order_relaxed); }
  size_t limit() const { return limit_; }
  bool overspent() const { return used() > limit_; }

 private:
  const size_t limit_;
  std::atomic<size_t> used_{0};
};

inline constexpr size_t kDefaultMemoryBudget = 64u << 20;

enum class Auth {
  kNone,        // anyone who reaches the port
  kClientCert,  // a TLS client certificate signed by client_ca_file
};

struct Route {
  std::string method;
  std::string path;
  size_t max_body = 0;  // bytes; larger bodies get 413 before they are read
  Auth auth = Auth::kNone;
  // Cheap and never blocking (health probes): answered on the I/O thread, so
  // it stays answerable even while every worker is busy.
  bool inline_handler = false;
  // Spends its time waiting on other servers (the API server, a node lock)
  // rather than computing: runs on the blocking workers, so a handful of
  // waiting requests cannot hold up the others.
  bool blocking = false;
  // Not 0: a request no worker has taken within this long is answered at
  // once on the I/O thread with what on_queue_timeout writes (given the
  // request without its body), and no worker runs it later. For callers
  // that give up after a timeout of their own (kube-scheduler's extender
  // httpTimeout) and must hear "no" before then, not "yes" after.
  std::chrono::milliseconds queue_timeout{0};
  Handler on_queue_timeout;
  Handler handler;
};

struct ServerOptions {
  std::string bind = "127.0.0.1:0";  // [host]:port; port 0 picks a free one
  std::string cert_file;             // both set: HTTPS
  std::string key_file;
  // PEM CA bundle for client certificates. Set: the server asks every TLS
  // client for a certificate (a client without one still connects) and
  // routes with Auth::kClientCert need one that verifies. Unset: such routes
  // are open (the daemon logs that it runs without client authentication).
  std::string client_ca_file;
  std::chrono::milliseconds handshake_timeout{10000};
  // From a request's first byte to its last (headers and body); a new
  // connection must start its first request within this too.
  std::chrono::milliseconds request_timeout{10000};
  // Between requests on a kept-alive connection.
  std::chrono::milliseconds idle_timeout{60000};
  std::chrono::milliseconds write_timeout{10000};
  size_t max_header_bytes = 16 * 1024;
  // Shared by the daemon's servers; null: one of kDefaultMemoryBudget for
  // this server alone. A route's max_body over the budget can never be met.
  std::shared_ptr<MemoryBudget> memory_budget;
  // An upload that began this long ago may be closed to make room in the
  // budget: a legitimate body of the largest size (16 MiB) arrives in
  // milliseconds over a datacenter network, a hostile one holds its room
  // until the request timeout.
  std::chrono::milliseconds stalled_upload{1000};
  size_t max_connections = 4096;
  int backlog = 1024;              // the kernel caps it at net.core.somaxconn
  unsigned workers = 4;            // for the computing routes
  unsigned blocking_workers = 16;  // for routes marked blocking (small bodies)
  // After a request with at least this many body bytes, freed memory is
  // handed back to the kernel (malloc_trim): a burst of large requests would
  // otherwise leave the parse's memory in glibc's per-thread arenas.
  size_t trim_after_body_bytes = 1 << 20;
  std::string name = "http";  // in log lines: "<name>: ..."
};

struct ServerStats {
  uint64_t accepted = 0;
  uint64_t open = 0;
  uint64_t refused_full = 0;    // max_connections all busy: accepting paused until one closes
  uint64_t evicted_idle = 0;    // closed to make room for a new connection
  uint64_t timed_out = 0;       // handshake, request, idle or write deadline passed
  uint64_t too_large = 0;       // 413 (body) or 431 (header)
  uint64_t unauthorized = 0;    // 403 on an Auth::kClientCert route
  uint64_t bad_requests = 0;    // 400: not HTTP
  uint64_t over_budget = 0;     // 503: no room in the memory budget
  uint64_t evicted_upload = 0;  // a stalled upload closed to make room in the budget
  uint64_t budget_used = 0;     // bytes of the budget held now, by every server sharing it
};

class Server {
 public:
  Server(ServerOptions options, std::vector<Route> routes);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds, listens and starts the I/O thread and the workers. Errors name the
  // address or the file that is wrong.
  Result<void> start();
  // Closes the listener and every connection; waits for running handlers.
  void stop();
  int port() const { return port_; }
  ServerStats stats() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace hami::http
