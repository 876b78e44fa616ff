#include "http/server.hpp"

#include <malloc.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <pthread.h>

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http.hpp>
#include <exception>
#include <list>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>
#include <unordered_set>
#include <utility>

#include "common/bind_address.hpp"
#include "common/log.hpp"

namespace hami::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using SslStream = asio::ssl::stream<tcp::socket>;

// The read buffer holds a request's header and the body bytes in flight;
// the body itself goes to the request's string.
constexpr size_t kMaxBuffered = 1 << 20;
// After an answer that closes the connection, what the client still sends is
// read and dropped for a while, so that closing does not reset the
// connection before the client has read the answer (a 413 to an upload).
constexpr auto kLinger = std::chrono::seconds(2);
constexpr size_t kLingerBytes = 4 << 20;
// A kept-alive connection's read buffer is given back between requests once
// larger than this: an idle connection should cost a socket, not 64 KiB.
constexpr size_t kIdleBuffer = 8 << 10;

std::string peer_text(const tcp::socket& s) {
  beast::error_code ec;
  const tcp::endpoint ep = s.remote_endpoint(ec);
  if (ec) return "?";
  return ep.address().to_string() + ":" + std::to_string(ep.port());
}

// At most one warning a minute per kind of trouble, with how often it
// happened: a hostile client must not be able to flood the log.
class Alarm {
 public:
  explicit Alarm(const char* what) : what_(what) {}
  // I/O thread only.
  void raise(const std::string& server, const std::string& latest) {
    ++count_;
    const auto now = Clock::now();
    if (reported_ && now - last_ < std::chrono::minutes(1)) return;
    log::warn("%s: %s: %llu time(s) since the last report, the latest %s", server.c_str(), what_,
              static_cast<unsigned long long>(count_), latest.c_str());
    count_ = 0;
    last_ = now;
    reported_ = true;
  }

 private:
  const char* what_;
  uint64_t count_ = 0;
  Clock::time_point last_{};
  bool reported_ = false;
};

// Bytes of a MemoryBudget, given back when the holder is destroyed: a body or
// an answer returns its bytes however its memory is freed (answered, refused,
// its connection closed, or dropped with the io_context at stop).
class Charge {
 public:
  Charge() = default;
  Charge(MemoryBudget* budget, size_t bytes) : budget_(budget), bytes_(bytes) {}
  Charge(Charge&& o) noexcept : budget_(o.budget_), bytes_(std::exchange(o.bytes_, 0)) {}
  Charge& operator=(Charge&& o) noexcept {
    if (this != &o) {
      reset();
      budget_ = o.budget_;
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  ~Charge() { reset(); }
  // `n` more bytes, already taken from `budget`.
  void add(MemoryBudget* budget, size_t n) {
    budget_ = budget;
    bytes_ += n;
  }
  void reset() {
    if (bytes_ != 0) budget_->give_back(bytes_);
    bytes_ = 0;
  }
  size_t bytes() const { return bytes_; }

 private:
  MemoryBudget* budget_ = nullptr;
  size_t bytes_ = 0;
};

std::string mib(size_t bytes) {
  return std::to_string((bytes + (1 << 19)) >> 20) + " MiB";
}

void invoke(const Route& route, const Request& q, Response& r) {
  try {
    route.handler(q, r);
  } catch (const std::exception& e) {
    log::error("%s %s from %s: %s", q.method.c_str(), q.path.c_str(), q.peer.c_str(), e.what());
    r = Response{.status = 500, .body = std::string("internal error: ") + e.what() + "\n"};
  } catch (...) {
    log::error("%s %s from %s: unknown exception", q.method.c_str(), q.path.c_str(),
               q.peer.c_str());
    r = Response{.status = 500, .body = "internal error\n"};
  }
}

}  // namespace

bool MemoryBudget::try_take(size_t n) {
  size_t used = used_.load(std::memory_order_relaxed);
  do {
    if (used > limit_ || n > limit_ - used) return false;
  } while (!used_.compare_exchange_weak(used, used + n, std::memory_order_relaxed));
  return true;
}

class ConnBase {
 public:
  virtual ~ConnBase() = default;
  virtual void close_now() = 0;
  // In Impl::waiting_ while the connection waits on its client.
  bool waiting = false;
  // Set once by close_now. A closed connection never enters waiting_ again:
  // a read that completed just before an eviction closed it still runs its
  // handler, and the connection would stay listed after it is freed.
  bool closed_ = false;
  std::list<ConnBase*>::iterator waiting_pos;
  // In Impl::uploads_ while it holds budget for a body being read.
  bool uploading = false;
  std::list<ConnBase*>::iterator upload_pos;
  Clock::time_point upload_began;
  std::string peer;  // "10.0.0.5:41234", for log lines
};

class Server::Impl {
 public:
  Impl(ServerOptions o, std::vector<Route> r)
      : opt(with_budget(std::move(o))), routes(std::move(r)), budget(opt.memory_budget.get()) {
    for (const Route& route : routes)
      max_body_any = std::max(max_body_any, route.max_body);
  }
  static ServerOptions with_budget(ServerOptions o) {
    if (!o.memory_budget) o.memory_budget = std::make_shared<MemoryBudget>(kDefaultMemoryBudget);
    return o;
  }

  Result<int> start();
  void stop();

  // I/O thread only.
  void wait_begin(ConnBase* c) {
    if (c->waiting || c->closed_) return;
    c->waiting_pos = waiting_.insert(waiting_.end(), c);
    c->waiting = true;
    // One that waits on its client can make room for the parked one.
    if (parked_) asio::post(ioc, [this] { resume_accepting(); });
  }
  void wait_end(ConnBase* c) {
    if (!c->waiting) return;
    waiting_.erase(c->waiting_pos);
    c->waiting = false;
  }
  void closed(ConnBase* c) {
    wait_end(c);
    all_.erase(c);
    open.fetch_sub(1, std::memory_order_relaxed);
    // Not from here: close_now may run inside on_accept's eviction.
    if (parked_) asio::post(ioc, [this] { resume_accepting(); });
  }
  // Any thread. One trim at a time; one asked for while another runs is
  // run again by that one, so memory freed just before is never left out.
  void trim() {
    trim_wanted_ = true;
    if (trim_running_.exchange(true)) return;
    do {
      trim_wanted_ = false;
      ::malloc_trim(0);
      trim_running_ = false;
    } while (trim_wanted_ && !trim_running_.exchange(true));
  }
  // I/O thread; what is to be trimmed is freed already.
  void trim_later() {
    if (stopping_) return;  // the workers may be gone
    asio::post(*workers, [this] { trim(); });
  }

  // I/O thread. Takes `n` more bytes of the budget for c's body. When they do
  // not fit, the upload that began longest ago is closed to make room if it
  // began over opt.stalled_upload ago, and so on; false when that is not enough.
  bool take_for_body(ConnBase* c, size_t n) {
    // A closed connection is never listed: it may be freed at any time.
    if (c->closed_) return false;
    const auto now = Clock::now();
    while (!budget->try_take(n)) {
      if (uploads_.empty()) return false;
      ConnBase* oldest = uploads_.front();
      if (oldest == c || now - oldest->upload_began < opt.stalled_upload) return false;
      evicted_upload.fetch_add(1, std::memory_order_relaxed);
      alarm_evict.raise(opt.name, "from " + oldest->peer);
      oldest->close_now();  // gives its bytes back
    }
    if (!c->uploading) {
      c->upload_pos = uploads_.insert(uploads_.end(), c);
      c->uploading = true;
      c->upload_began = now;
    }
    return true;
  }
  void upload_end(ConnBase* c) {
    if (!c->uploading) return;
    uploads_.erase(c->upload_pos);
    c->uploading = false;
  }
  // Any thread: an answer already made, charged until it is written.
  Charge charge_answer(size_t bytes) {
    budget->take(bytes);
    return Charge(budget, bytes);
  }
  std::string busy_text() const {
    return "server busy: request bodies and unsent answers hold its whole memory budget (" +
           mib(budget->limit()) + ", --http-memory-budget); retry shortly\n";
  }

  const ServerOptions opt;
  const std::vector<Route> routes;
  MemoryBudget* const budget;  // opt's, which outlives every connection
  size_t max_body_any = 0;
  bool require_client_cert = false;

  std::atomic<uint64_t> accepted{0}, open{0}, refused_full{0}, evicted_idle{0}, timed_out{0},
      too_large{0}, unauthorized{0}, bad_requests{0}, over_budget{0}, evicted_upload{0};
  Alarm alarm_full{
      "max connections reached and every one is busy: new connections wait in the listen "
      "backlog until one closes"};
  Alarm alarm_timeout{"connection closed: a handshake, request, idle or write deadline passed"};
  Alarm alarm_large{"request refused: its header or body is over the limit"};
  Alarm alarm_auth{"request refused: no verified client certificate"};
  Alarm alarm_bad{"request refused: not HTTP/1.1"};
  Alarm alarm_accept{"accept failed (out of file descriptors?); retrying in 100 ms"};
  Alarm alarm_budget{
      "request refused (503): request bodies and unsent answers hold the whole memory budget "
      "(raise --http-memory-budget if this is legitimate load)"};
  Alarm alarm_evict{
      "upload closed to make room in the memory budget: it had been arriving for longer than "
      "a body should"};

 private:
  friend class Server;
  template <class Stream>
  friend class Conn;
  void do_accept();
  void on_accept(tcp::socket sock);
  void start_connection(tcp::socket sock);
  void resume_accepting();

  // Declared before the io_context: connections still queued in it when it
  // is destroyed unregister themselves here.
  std::list<ConnBase*> waiting_;
  std::list<ConnBase*> uploads_;  // holding budget for a body being read, oldest first
  std::unordered_set<ConnBase*> all_;
  std::atomic<bool> trim_running_{false};
  std::atomic<bool> trim_wanted_{false};
  std::atomic<bool> stopping_{false};
  bool started_ = false;
  bool stopped_ = false;
  std::optional<asio::ssl::context> ssl_;

 public:
  asio::io_context ioc{1};
  std::optional<asio::thread_pool> workers;
  std::optional<asio::thread_pool> blocking_workers;  // only if a route is blocking

 private:
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard_;
  tcp::acceptor acceptor_{ioc};
  // Accepted while every connection was busy: it starts, and accepting
  // resumes, once one closes or waits on its client. Meanwhile the kernel queues the next ones.
  std::optional<tcp::socket> parked_;  // after ioc: destroyed before it
  asio::steady_timer accept_retry_{ioc};
  std::thread io_;
};

template <class Stream>
class Conn final : public ConnBase, public std::enable_shared_from_this<Conn<Stream>> {
  static constexpr bool kTls = std::is_same_v<Stream, SslStream>;

 public:
  Conn(Server::Impl& s, tcp::socket sock, asio::ssl::context* ctx)
      : s_(s), stream_(make_stream(std::move(sock), ctx)), timer_(s.ioc), buffer_(kMaxBuffered) {
    peer = peer_text(socket());
  }
  ~Conn() override {
    if (!closed_) close_now();
  }

  void start() {
    if constexpr (kTls) {
      s_.wait_begin(this);
      arm(s_.opt.handshake_timeout);
      stream_.async_handshake(asio::ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                if (ec) return self->close_now();
                                self->check_client_certificate();
                                self->await_request(true);
                              });
    } else {
      await_request(true);
    }
  }

  void close_now() override {
    if (closed_) return;
    closed_ = true;
    s_.closed(this);
    // The bytes go back now, so that an eviction makes room at once; the body
    // itself is freed when the read that fills it completes, a moment later.
    s_.upload_end(this);
    body_charge_.reset();
    ++gen_;
    beast::error_code ec;
    timer_.cancel();
    socket().close(ec);
  }

 private:
  static Stream make_stream(tcp::socket sock, asio::ssl::context* ctx) {
    if constexpr (kTls) {
      return Stream(std::move(sock), *ctx);
    } else {
      (void)ctx;
      return sock;
    }
  }
  tcp::socket& socket() {
    if constexpr (kTls) {
      return stream_.next_layer();
    } else {
      return stream_;
    }
  }

  // The connection is closed when `d` passes before the next arm or disarm.
  void arm(std::chrono::milliseconds d) {
    if (closed_) return;
    const uint64_t gen = ++gen_;
    timer_.expires_after(d);
    timer_.async_wait([self = this->shared_from_this(), gen](beast::error_code ec) {
      if (ec || gen != self->gen_ || self->closed_) return;
      self->s_.timed_out.fetch_add(1, std::memory_order_relaxed);
      self->s_.alarm_timeout.raise(self->s_.opt.name, "from " + self->peer);
      self->close_now();
    });
  }
  void disarm() {
    ++gen_;
    timer_.cancel();
  }

  void check_client_certificate() {
    if constexpr (kTls) {
      if (!s_.require_client_cert) return;
      SSL* ssl = stream_.native_handle();
      X509* cert = SSL_get0_peer_certificate(ssl);
      if (cert == nullptr || SSL_get_verify_result(ssl) != X509_V_OK) return;
      verified_ = true;
      char cn[256] = {};
      if (X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn) >
          0) {
        subject_ = cn;
      }
    }
  }

  // Waits for the first byte of the next request: a new connection has
  // request_timeout to start one, a kept-alive one idle_timeout.
  void await_request(bool first) {
    if (closed_) return;
    s_.wait_begin(this);
    if (buffer_.size() > 0) return read_header();  // pipelined
    if (buffer_.capacity() > kIdleBuffer) buffer_.shrink_to_fit();
    arm(first ? s_.opt.request_timeout : s_.opt.idle_timeout);
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                              if (ec) return self->close_now();
                              self->buffer_.commit(n);
                              self->read_header();
                            });
  }

  void read_header() {
    if (closed_) return;
    // The request has begun: from here it has request_timeout to arrive
    // whole, and it moves to the back of the eviction order.
    s_.wait_end(this);
    s_.wait_begin(this);
    arm(s_.opt.request_timeout);
    route_ = nullptr;
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(s_.opt.max_header_bytes));
    parser_->body_limit(s_.max_body_any);
    bhttp::async_read_header(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  void on_header(beast::error_code ec) {
    // Closed (evicted, timed out) after the header arrived: nothing to answer.
    if (closed_) return drop_body();
    if (ec) return on_read_error(ec);
    auto& req = parser_->get();
    const std::string_view target(req.target().data(), req.target().size());
    path_ = std::string(target.substr(0, target.find('?')));
    route_ = nullptr;
    bool path_known = false;
    for (const Route& r : s_.routes) {
      if (r.path != path_) continue;
      path_known = true;
      if (beast::iequals(r.method, req.method_string())) {
        route_ = &r;
        break;
      }
    }
    if (route_ == nullptr) {
      return refuse(path_known ? 405 : 404,
                    path_known ? "method not allowed\n" : "no such path: " + path_ + "\n");
    }
    if (route_->auth == Auth::kClientCert && s_.require_client_cert && !verified_) {
      s_.unauthorized.fetch_add(1, std::memory_order_relaxed);
      s_.alarm_auth.raise(s_.opt.name, "from " + peer);
      return refuse(403, path_ +
                             " needs a TLS client certificate signed by the CA the server "
                             "trusts for its clients (--client-ca-file)\n");
    }
    const auto length = parser_->content_length();
    if (length && *length > route_->max_body) return too_large();
    // The whole declared length, before a byte of it is read: the parser
    // reserves that much for it.
    if (length && *length > 0 && !charge_body(*length)) return busy();
    parser_->body_limit(route_->max_body);  // checked as chunked bytes arrive
    if (parser_->is_done()) return dispatch();
    const auto expect = req.find(bhttp::field::expect);
    if (expect != req.end() && beast::iequals(expect->value(), "100-continue")) {
      static const std::string k100 = "HTTP/1.1 100 Continue\r\n\r\n";
      return asio::async_write(stream_, asio::buffer(k100),
                               [self = this->shared_from_this()](beast::error_code e, size_t) {
                                 if (e) return self->close_now();
                                 self->read_body();
                               });
    }
    read_body();
  }

  // A piece at a time, so that a chunked body is charged as it grows.
  void read_body() {
    bhttp::async_read_some(stream_, buffer_, *parser_,
                           [self = this->shared_from_this()](beast::error_code ec, size_t) {
                             if (self->closed_) return self->drop_body();
                             if (ec) return self->on_read_error(ec);
                             if (!self->charge_body(self->parser_->get().body().capacity())) {
                               return self->busy();
                             }
                             if (self->parser_->is_done()) return self->dispatch();
                             self->read_body();
                           });
  }

  // Holds `total` bytes of the budget for the body; false when they cannot be had.
  bool charge_body(size_t total) {
    if (total <= body_charge_.bytes()) return true;
    const size_t more = total - body_charge_.bytes();
    if (!s_.take_for_body(this, more)) return false;
    body_charge_.add(s_.budget, more);
    return true;
  }

  // The body read so far is freed (no read is in progress) and its bytes go
  // back; a large one's memory goes back to the kernel.
  void drop_body() {
    const size_t held = parser_ ? parser_->get().body().capacity() : 0;
    parser_.reset();
    s_.upload_end(this);
    body_charge_.reset();
    if (held >= s_.opt.trim_after_body_bytes) s_.trim_later();
  }

  void busy() {
    s_.over_budget.fetch_add(1, std::memory_order_relaxed);
    s_.alarm_budget.raise(s_.opt.name, "from " + peer + " for " + path_);
    refuse(503, s_.busy_text());
  }

  void on_read_error(beast::error_code ec) {
    drop_body();
    if (ec == bhttp::error::body_limit) return too_large();
    if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow) {
      s_.too_large.fetch_add(1, std::memory_order_relaxed);
      s_.alarm_large.raise(s_.opt.name, "from " + peer);
      return refuse(431,
                    "request header over " + std::to_string(s_.opt.max_header_bytes) + " bytes\n");
    }
    if (ec.category() == bhttp::make_error_code(bhttp::error::bad_target).category() &&
        ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message) {
      s_.bad_requests.fetch_add(1, std::memory_order_relaxed);
      s_.alarm_bad.raise(s_.opt.name, "from " + peer);
      return refuse(400, "bad request: " + ec.message() + "\n");
    }
    close_now();  // the client went away, or a deadline closed the socket
  }

  void too_large() {
    s_.too_large.fetch_add(1, std::memory_order_relaxed);
    s_.alarm_large.raise(s_.opt.name, "from " + peer);
    refuse(413, "request body over the limit of " +
                    std::to_string(route_ ? route_->max_body : s_.max_body_any) + " bytes for " +
                    path_ + "\n");
  }

  // An error answer; the connection closes after it (the rest of the
  // request, if any, is never read).
  void refuse(int status, std::string text) {
    drop_body();
    reply(Response{.status = status, .body = std::move(text)}, /*close=*/true);
  }

  void dispatch() {
    s_.wait_end(this);
    s_.upload_end(this);
    disarm();
    auto& req = parser_->get();
    Request q;
    q.method = std::string(req.method_string());
    q.path = path_;
    q.body = std::move(req.body());
    q.peer = peer;
    q.client_verified = verified_;
    q.client_subject = subject_;
    keep_alive_ = req.keep_alive();
    version_ = req.version();
    parser_.reset();
    Charge body = std::move(body_charge_);  // until the handler is done with the body
    const Route* route = route_;
    if (route->inline_handler) {
      Response r;
      invoke(*route, q, r);
      return reply(std::move(r), !keep_alive_);
    }
    asio::thread_pool& pool = route->blocking ? *s_.blocking_workers : *s_.workers;
    q.received = std::chrono::steady_clock::now();
    // With a queue timeout, the timer and the worker race for the request:
    // whichever claims it first answers it, the other does nothing.
    std::shared_ptr<std::atomic<bool>> claimed;
    if (route->queue_timeout.count() > 0 && route->on_queue_timeout) {
      claimed = std::make_shared<std::atomic<bool>>(false);
      auto timer = std::make_shared<asio::steady_timer>(s_.ioc, route->queue_timeout);
      Request head{.method = q.method,
                   .path = q.path,
                   .peer = q.peer,
                   .client_verified = q.client_verified,
                   .client_subject = q.client_subject,
                   .received = q.received};
      timer->async_wait([self = this->shared_from_this(), timer, claimed, route,
                         head = std::move(head)](beast::error_code ec) {
        if (ec || claimed->exchange(true)) return;
        Response r;
        try {
          route->on_queue_timeout(head, r);
        } catch (const std::exception& e) {
          r = Response{.status = 503, .body = std::string("no worker free: ") + e.what() + "\n"};
        }
        self->reply(std::move(r), !self->keep_alive_);
      });
    }
    asio::post(pool, [self = this->shared_from_this(), route, q = std::move(q),
                      body = std::move(body), claimed = std::move(claimed)]() mutable {
      Server::Impl& s = self->s_;
      if (claimed && claimed->exchange(true)) return;  // answered by the queue timeout
      Response r;
      // Checked here, not when the request was queued: however many wait
      // for a worker, no more answers are made than there are workers once
      // the budget is overspent.
      const bool busy = s.budget->overspent();
      if (busy) {
        s.over_budget.fetch_add(1, std::memory_order_relaxed);
        r = Response{.status = 503, .body = s.busy_text()};
      } else {
        invoke(*route, q, r);
      }
      const size_t bytes = q.body.size();
      { Request done = std::move(q); }  // its body is freed before the trim
      body.reset();
      if (bytes >= s.opt.trim_after_body_bytes) s.trim();
      Charge answer = s.charge_answer(r.body.capacity());
      asio::post(s.ioc, [self = std::move(self), r = std::move(r), answer = std::move(answer),
                         busy]() mutable {
        if (busy) self->s_.alarm_budget.raise(self->s_.opt.name, "from " + self->peer);
        self->reply(std::move(r), busy || !self->keep_alive_, std::move(answer));
      });
    });
  }

  // `answer`: the bytes of r.body already charged (none: charged here).
  void reply(Response r, bool close, Charge answer = {}) {
    if (answer.bytes() == 0) answer = s_.charge_answer(r.body.capacity());
    if (closed_) {
      const bool big = answer.bytes() >= s_.opt.trim_after_body_bytes;
      std::string().swap(r.body);
      answer.reset();
      if (big) s_.trim_later();
      return;
    }
    auto res = std::make_shared<bhttp::response<bhttp::string_body>>(
        static_cast<bhttp::status>(r.status), version_ == 10 ? 10 : 11);
    res->set(bhttp::field::content_type, r.content_type);
    res->body() = std::move(r.body);
    res->keep_alive(!close);
    res->prepare_payload();
    arm(s_.opt.write_timeout);
    bhttp::async_write(stream_, *res,
                       [self = this->shared_from_this(), res, close, answer = std::move(answer)](
                           beast::error_code ec, size_t) mutable {
                         // Written or given up: the answer is freed now,
                         // not when the connection goes.
                         const bool big = answer.bytes() >= self->s_.opt.trim_after_body_bytes;
                         res.reset();
                         answer.reset();
                         if (big) self->s_.trim_later();
                         if (ec) return self->close_now();
                         if (close) return self->linger_close();
                         self->await_request(false);
                       });
  }

  void linger_close() {
    if (closed_) return;
    s_.wait_end(this);
    beast::error_code ec;
    socket().shutdown(tcp::socket::shutdown_send, ec);
    if (ec) return close_now();
    arm(std::chrono::duration_cast<std::chrono::milliseconds>(kLinger));
    drain_.resize(16 * 1024);
    drain();
  }
  void drain() {
    socket().async_read_some(asio::buffer(drain_),
                             [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                               self->drained_ += n;
                               if (ec || self->drained_ > kLingerBytes) return self->close_now();
                               self->drain();
                             });
  }

  Server::Impl& s_;
  Stream stream_;
  asio::steady_timer timer_;
  uint64_t gen_ = 0;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  Charge body_charge_;  // the budget the body being read holds
  const Route* route_ = nullptr;
  std::string path_;
  bool verified_ = false;
  std::string subject_;
  bool keep_alive_ = true;
  unsigned version_ = 11;
  std::vector<char> drain_;
  size_t drained_ = 0;
};

Result<int> Server::Impl::start() {
  if (started_) return Error{opt.name + ": already started"};
  // Blocks of trim_after_body_bytes or more (bodies, answers) are mapped
  // and unmapped on their own, never carved from a heap. Left to itself,
  // glibc raises that threshold to the largest block freed so far (and its
  // trim threshold to twice that): after one 12 MiB answer, the next ones
  // came from a thread's heap whose top stayed resident, which malloc_trim
  // does not shrink. Process-wide, once; setting it fixes both thresholds.
  static std::once_flag mmap_threshold;
  std::call_once(mmap_threshold, [this] {
    ::mallopt(M_MMAP_THRESHOLD,
              static_cast<int>(std::min<size_t>(opt.trim_after_body_bytes, 32u << 20)));
  });
  const bool tls = !opt.cert_file.empty() || !opt.key_file.empty();
  if (tls && (opt.cert_file.empty() || opt.key_file.empty())) {
    return Error{opt.name + ": a TLS certificate and key must be given together"};
  }
  if (!opt.client_ca_file.empty() && !tls) {
    return Error{opt.name + ": a client CA (" + opt.client_ca_file +
                 ") needs TLS: give a certificate and key too"};
  }
  beast::error_code ec;
  if (tls) {
    ssl_.emplace(asio::ssl::context::tls_server);
    ssl_->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                          asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                          asio::ssl::context::no_tlsv1_1 | asio::ssl::context::single_dh_use,
                      ec);
    ssl_->use_certificate_chain_file(opt.cert_file, ec);
    if (ec) return Error{"cannot load the TLS certificate " + opt.cert_file + ": " + ec.message()};
    ssl_->use_private_key_file(opt.key_file, asio::ssl::context::pem, ec);
    if (ec) return Error{"cannot load the TLS key " + opt.key_file + ": " + ec.message()};
    SSL_CTX* ctx = ssl_->native_handle();
    // Clients resume sessions; with peer verification on, OpenSSL refuses a
    // resumption without a session id context.
    // OpenSSL's record buffers are freed while a connection is idle: an idle
    // connection should cost a socket, not tens of kilobytes.
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    static const unsigned char kSessionContext[] = "hami-http";
    SSL_CTX_set_session_id_context(ctx, kSessionContext, sizeof kSessionContext - 1);
    if (!opt.client_ca_file.empty()) {
      ssl_->load_verify_file(opt.client_ca_file, ec);
      STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(opt.client_ca_file.c_str());
      if (ec || names == nullptr) {
        return Error{"cannot load the client CA " + opt.client_ca_file +
                     (ec ? ": " + ec.message() : ": no certificate in it")};
      }
      // The CA's name in the handshake: Go clients (kube-scheduler) send
      // their certificate only when its issuer is among these.
      SSL_CTX_set_client_CA_list(ctx, names);
      // Ask every client, require none at the handshake: the webhook and the
      // health probes are called without one. The routes that need a
      // verified certificate check SSL_get_verify_result themselves.
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, [](int, X509_STORE_CTX*) { return 1; });
      require_client_cert = true;
    }
  }

  auto addr = parse_bind_address(opt.bind);
  if (!addr) return addr.error();
  tcp::endpoint ep;
  const auto ip = asio::ip::make_address(addr->first, ec);
  if (!ec) {
    ep = tcp::endpoint(ip, static_cast<unsigned short>(addr->second));
  } else {
    tcp::resolver resolver(ioc);
    auto found = resolver.resolve(addr->first, std::to_string(addr->second), ec);
    if (ec || found.empty()) {
      return Error{"cannot listen on " + opt.bind + ": cannot resolve '" + addr->first +
                   "': " + ec.message()};
    }
    ep = found.begin()->endpoint();
  }
  acceptor_.open(ep.protocol(), ec);
  if (ec) return Error{"cannot listen on " + opt.bind + ": " + ec.message()};
  // SO_REUSEADDR only (a quick restart); never SO_REUSEPORT, which would let
  // a second daemon bind the same port and silently take half the requests.
  acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  acceptor_.bind(ep, ec);
  if (ec) {
    return Error{"cannot listen on " + opt.bind + ": " + ec.message() +
                 " (is another instance running?)"};
  }
  acceptor_.listen(opt.backlog, ec);
  if (ec) return Error{"cannot listen on " + opt.bind + ": " + ec.message()};
  const int port = acceptor_.local_endpoint().port();

  workers.emplace(std::max(1u, opt.workers));
  if (std::any_of(routes.begin(), routes.end(), [](const Route& r) { return r.blocking; })) {
    blocking_workers.emplace(std::max(1u, opt.blocking_workers));
  }
  guard_.emplace(ioc.get_executor());
  do_accept();
  io_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "http-io");
    for (;;) {
      try {
        ioc.run();
        return;
      } catch (const std::exception& e) {
        log::error("%s: I/O thread: %s", opt.name.c_str(), e.what());
      }
    }
  });
  started_ = true;
  return port;
}

void Server::Impl::do_accept() {
  acceptor_.async_accept([this](beast::error_code ec, tcp::socket sock) {
    if (stopping_) return;
    if (ec) {
      if (ec == asio::error::operation_aborted) return;
      alarm_accept.raise(opt.name, "said: " + ec.message());
      accept_retry_.expires_after(std::chrono::milliseconds(100));
      accept_retry_.async_wait([this](beast::error_code e) {
        if (!e && !stopping_) do_accept();
      });
      return;
    }
    on_accept(std::move(sock));
    if (!parked_) do_accept();
  });
}

void Server::Impl::resume_accepting() {
  if (!parked_ || stopping_) return;
  if (open.load(std::memory_order_relaxed) >= opt.max_connections && waiting_.empty()) return;
  tcp::socket sock = std::move(*parked_);
  parked_.reset();
  on_accept(std::move(sock));
  if (!parked_) do_accept();
}

void Server::Impl::on_accept(tcp::socket sock) {
  beast::error_code ec;
  sock.set_option(tcp::no_delay(true), ec);
  accepted.fetch_add(1, std::memory_order_relaxed);
  if (open.load(std::memory_order_relaxed) >= opt.max_connections) {
    if (waiting_.empty()) {
      // Every connection has a request in our hands: refusing would fail a
      // burst of legitimate calls (the API server's webhook calls when
      // thousands of pods are created at once). Stop accepting instead.
      refused_full.fetch_add(1, std::memory_order_relaxed);
      alarm_full.raise(opt.name, "from " + peer_text(sock));
      parked_.emplace(std::move(sock));
      return;
    }
    // The connection that has waited longest on its client makes room.
    evicted_idle.fetch_add(1, std::memory_order_relaxed);
    waiting_.front()->close_now();
  }
  start_connection(std::move(sock));
}

void Server::Impl::start_connection(tcp::socket sock) {
  open.fetch_add(1, std::memory_order_relaxed);
  if (ssl_) {
    auto c = std::make_shared<Conn<SslStream>>(*this, std::move(sock), &*ssl_);
    all_.insert(c.get());
    c->start();
  } else {
    auto c = std::make_shared<Conn<tcp::socket>>(*this, std::move(sock), nullptr);
    all_.insert(c.get());
    c->start();
  }
}

void Server::Impl::stop() {
  if (!started_ || stopped_) return;
  stopped_ = true;
  stopping_ = true;
  asio::post(ioc, [this] {
    beast::error_code ec;
    acceptor_.close(ec);
    accept_retry_.cancel();
    if (parked_) parked_->close(ec);
    parked_.reset();
    const std::vector<ConnBase*> conns(all_.begin(), all_.end());
    for (ConnBase* c : conns)
      c->close_now();
  });
  // Handlers still running post their answers to closed connections, which
  // drop them; then nothing is left for the I/O thread and run() returns.
  workers->join();
  if (blocking_workers) blocking_workers->join();
  guard_.reset();
  io_.join();
}

Server::Server(ServerOptions options, std::vector<Route> routes)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(routes))) {}

Server::~Server() {
  stop();
}

Result<void> Server::start() {
  auto p = impl_->start();
  if (!p) return p.error();
  port_ = *p;
  return {};
}

void Server::stop() {
  impl_->stop();
}

ServerStats Server::stats() const {
  const Impl& i = *impl_;
  auto v = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  return ServerStats{.accepted = v(i.accepted),
                     .open = v(i.open),
                     .refused_full = v(i.refused_full),
                     .evicted_idle = v(i.evicted_idle),
                     .timed_out = v(i.timed_out),
                     .too_large = v(i.too_large),
                     .unauthorized = v(i.unauthorized),
                     .bad_requests = v(i.bad_requests),
                     .over_budget = v(i.over_budget),
                     .evicted_upload = v(i.evicted_upload),
                     .budget_used = i.budget->used()};
}

}  // namespace hami::http
