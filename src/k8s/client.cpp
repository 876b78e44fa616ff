#include "k8s/client.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <sys/socket.h>
#include <unistd.h>

#include <httplib.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <random>
#include <thread>

#include "common/log.hpp"
#include "k8s/paths.hpp"
#include "k8s/tls.hpp"
#include "k8s/token_source.hpp"

namespace hami::k8s {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr const char* kJson = "application/json";
constexpr const char* kMergePatch = "application/merge-patch+json";
// cpp-httplib falls back to the system's trust store when no CA file or
// directory is set, even when it was handed a store; a directory that holds
// nothing keeps the trust to the configured CA alone.
constexpr const char* kNoExtraCaDir = "/nonexistent/hami-k8s-no-extra-ca";
constexpr auto kMaxIdleAge = std::chrono::seconds(30);

struct ServerUrl {
  bool tls = true;
  std::string host;  // without brackets
  int port = 443;
  std::string prefix;  // path before /api, without a trailing slash
};

hami::Result<ServerUrl> parse_server(const std::string& server) {
  ServerUrl u;
  std::string rest;
  if (server.rfind("https://", 0) == 0) {
    rest = server.substr(8);
  } else if (server.rfind("http://", 0) == 0) {
    u.tls = false;
    u.port = 80;
    rest = server.substr(7);
  } else {
    return hami::Error{"server \"" + server + "\": not an http:// or https:// URL"};
  }
  const auto slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  if (slash != std::string::npos) u.prefix = rest.substr(slash);
  while (!u.prefix.empty() && u.prefix.back() == '/')
    u.prefix.pop_back();
  std::string port_text;
  if (!authority.empty() && authority[0] == '[') {
    const auto close = authority.find(']');
    if (close == std::string::npos) return hami::Error{"server \"" + server + "\": unclosed ["};
    u.host = authority.substr(1, close - 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return hami::Error{"server \"" + server + "\": bad port"};
      port_text = authority.substr(close + 2);
    }
  } else {
    const auto colon = authority.rfind(':');
    u.host = authority.substr(0, colon);
    if (colon != std::string::npos) port_text = authority.substr(colon + 1);
  }
  if (u.host.empty()) return hami::Error{"server \"" + server + "\": no host"};
  if (!port_text.empty()) {
    char* end = nullptr;
    const long p = std::strtol(port_text.c_str(), &end, 10);
    if (*end != '\0' || p <= 0 || p > 65535) {
      return hami::Error{"server \"" + server + "\": bad port \"" + port_text + "\""};
    }
    u.port = static_cast<int>(p);
  }
  return u;
}

std::string query_string(const std::vector<std::pair<std::string, std::string>>& params) {
  std::string q;
  for (const auto& [k, v] : params) {
    q += q.empty() ? '?' : '&';
    q += url_encode(k) + "=" + url_encode(v);
  }
  return q;
}

bool is_idempotent(const std::string& method) {
  return method != "POST";
}

// Full jitter in [d/2, d]: spreads retries of many clients without ever
// retrying sooner than half the intended delay.
std::chrono::milliseconds backoff_delay(const ClientOptions& o, int attempt) {
  thread_local std::mt19937 rng{std::random_device{}()};
  auto d = o.backoff_initial;
  for (int i = 1; i < attempt && d < o.backoff_max; ++i)
    d *= 2;
  d = std::min(d, o.backoff_max);
  std::uniform_int_distribution<int64_t> dist(d.count() / 2, d.count());
  return std::chrono::milliseconds(dist(rng));
}

std::string describe_transport(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection:
      return "cannot connect";
    case httplib::Error::ConnectionTimeout:
      return "connect timed out";
    case httplib::Error::Read:
      return "connection lost or read timed out";
    case httplib::Error::Write:
      return "cannot send the request";
    case httplib::Error::Canceled:
      return "canceled";
    case httplib::Error::SSLConnection:
      return "TLS handshake failed";
    case httplib::Error::SSLLoadingCerts:
      return "TLS: cannot load the CA certificates";
    case httplib::Error::SSLServerVerification:
      return "TLS: server certificate verification failed";
    default:
      return "request failed (" + httplib::to_string(e) + ")";
  }
}

bool is_tls_error(httplib::Error e) {
  return e == httplib::Error::SSLConnection || e == httplib::Error::SSLLoadingCerts ||
         e == httplib::Error::SSLServerVerification;
}

struct Response {
  int status = 0;
  std::string body;
};

// Shuts a watch's socket down when its stop token fires, from whichever thread
// requests the stop. It keeps its own duplicate of the descriptor, so the
// socket it shuts down is the watch's even if the HTTP client has already
// closed (and the process reused) the original number.
class StopShutdown {
 public:
  StopShutdown() = default;
  StopShutdown(const StopShutdown&) = delete;
  StopShutdown& operator=(const StopShutdown&) = delete;
  ~StopShutdown() {
    if (fd_ >= 0) ::close(fd_);
  }

  // Called by the client for each socket it creates, before connecting.
  void attach(int sock, const std::stop_token& stop) {
    const std::lock_guard lock(mu_);
    if (fd_ >= 0) ::close(fd_);
    fd_ = ::fcntl(sock, F_DUPFD_CLOEXEC, 0);
    if (fired_ || stop.stop_requested()) shutdown_locked();
  }

  void fire() {
    const std::lock_guard lock(mu_);
    fired_ = true;
    shutdown_locked();
  }

 private:
  void shutdown_locked() {
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
  }

  std::mutex mu_;
  int fd_ = -1;
  bool fired_ = false;
};

}  // namespace

const char* to_string(WatchEvent::Type t) {
  switch (t) {
    case WatchEvent::Type::kAdded:
      return "ADDED";
    case WatchEvent::Type::kModified:
      return "MODIFIED";
    case WatchEvent::Type::kDeleted:
      return "DELETED";
    case WatchEvent::Type::kBookmark:
      return "BOOKMARK";
  }
  return "?";
}

struct Client::Impl {
  Config config;
  ClientOptions options;
  ServerUrl url;
  tls::X509Ptr client_cert;
  tls::KeyPtr client_key;
  std::shared_ptr<TokenSource> tokens;

  struct Idle {
    std::unique_ptr<httplib::ClientImpl> conn;
    Clock::time_point since;
  };
  std::mutex pool_mu;
  std::deque<Idle> idle;

  // --- connections ---------------------------------------------------------

  Result<std::unique_ptr<httplib::ClientImpl>> connect() {
    std::unique_ptr<httplib::ClientImpl> c;
    if (url.tls) {
      // With tls-server-name, the TLS layer (SNI and the name check) sees that
      // name while the socket goes to the configured host.
      const std::string& tls_host =
          config.tls_server_name.empty() ? url.host : config.tls_server_name;
      auto s = std::make_unique<httplib::SSLClient>(tls_host, url.port, client_cert.get(),
                                                    client_key.get());
      if (!s->is_valid()) {
        return ApiError{
            ErrorKind::kTls, 0, "",
            "TLS setup failed: client certificate or key rejected (" + tls::last_error() + ")"};
      }
      if (!config.ca_pem.empty()) {
        auto store = tls::load_ca_store(config.ca_pem);
        if (!store) return ApiError{ErrorKind::kTls, 0, "", "CA: " + store.error().message};
        s->set_ca_cert_store(store->release());
        s->set_ca_cert_path("", kNoExtraCaDir);
      }
      s->enable_server_certificate_verification(!config.insecure_skip_tls_verify);
      if (tls_host != url.host) {
        auto ip = resolve(url.host);
        if (!ip) return ip.error();
        s->set_hostname_addr_map({{tls_host, *ip}});
      }
      c = std::move(s);
    } else {
      c = std::make_unique<httplib::ClientImpl>(url.host, url.port);
    }
    c->set_connection_timeout(options.connect_timeout);
    c->set_read_timeout(options.request_timeout);
    c->set_write_timeout(options.request_timeout);
    c->set_keep_alive(true);
    c->set_tcp_nodelay(true);  // small requests and answers: Nagle would add 40 ms each
    c->set_url_encode(false);  // paths and queries are encoded by us
    return c;
  }

  static Result<std::string> resolve(const std::string& host) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res); rc != 0) {
      return ApiError{ErrorKind::kTransport, 0, "",
                      "cannot resolve " + host + ": " + gai_strerror(rc)};
    }
    char buf[NI_MAXHOST];
    const int rc =
        ::getnameinfo(res->ai_addr, res->ai_addrlen, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST);
    ::freeaddrinfo(res);
    if (rc != 0) return ApiError{ErrorKind::kTransport, 0, "", "cannot resolve " + host};
    return std::string(buf);
  }

  Result<std::unique_ptr<httplib::ClientImpl>> acquire() {
    {
      std::lock_guard lock(pool_mu);
      while (!idle.empty()) {
        Idle i = std::move(idle.back());
        idle.pop_back();
        if (Clock::now() - i.since < kMaxIdleAge) return std::move(i.conn);
      }
    }
    return connect();
  }

  void release(std::unique_ptr<httplib::ClientImpl> c) {
    std::lock_guard lock(pool_mu);
    if (idle.size() < options.max_idle_connections) idle.push_back({std::move(c), Clock::now()});
  }

  // --- requests --------------------------------------------------------------

  Result<httplib::Headers> headers() {
    httplib::Headers h{{"Accept", kJson}, {"User-Agent", options.user_agent}};
    if (tokens) {
      auto t = tokens->token();
      if (!t) return ApiError{ErrorKind::kInvalid, 0, "", t.error().message};
      if (!t->empty()) h.emplace("Authorization", "Bearer " + *t);
    }
    return h;
  }

  ApiError transport_error(const std::string& what, httplib::Error e,
                           const httplib::ClientImpl& c) const {
    std::string msg = what + ": " + describe_transport(e);
    if (e == httplib::Error::Connection || e == httplib::Error::ConnectionTimeout) {
      msg += " to " + config.server;
    }
    if (e == httplib::Error::SSLServerVerification) {
      const auto* s = dynamic_cast<const httplib::SSLClient*>(&c);
      const long v = s ? s->get_openssl_verify_result() : X509_V_OK;
      if (v != X509_V_OK) {
        msg += std::string(" (") + X509_verify_cert_error_string(v) + ")";
      } else {
        const std::string& name =
            config.tls_server_name.empty() ? url.host : config.tls_server_name;
        msg += " (the certificate is not valid for " + name + ")";
      }
    }
    return ApiError{is_tls_error(e) ? ErrorKind::kTls : ErrorKind::kTransport, 0, "", msg};
  }

  static ApiError http_error(const std::string& what, int status, const std::string& body) {
    std::string reason, detail;
    const json j = json::parse(body, nullptr, false);
    if (j.is_object() && j.value("kind", "") == "Status") {
      if (j.contains("reason") && j["reason"].is_string()) reason = j["reason"];
      if (j.contains("message") && j["message"].is_string()) detail = j["message"];
    }
    if (detail.empty()) detail = body.substr(0, 200);
    std::string msg = what + ": " + std::to_string(status);
    if (!reason.empty()) msg += " " + reason;
    if (!detail.empty()) msg += ": " + detail;
    return ApiError{ErrorKind::kHttp, status, reason, msg};
  }

  // One request with retries; a non-2xx answer is an error.
  Result<Response> send(const std::string& method, const std::string& path_query,
                        const std::string* body, const char* content_type) {
    const std::string what = method + " " + path_query;
    const std::string target = url.prefix + path_query;
    for (int attempt = 1;; ++attempt) {
      auto conn = acquire();
      if (!conn) return conn.error();
      auto hdrs = headers();
      if (!hdrs) return hdrs.error();
      httplib::Result res = [&] {
        httplib::ClientImpl& c = **conn;
        if (method == "GET") return c.Get(target, *hdrs);
        if (method == "DELETE") return c.Delete(target, *hdrs);
        const std::string& b = body ? *body : std::string();
        if (method == "POST") return c.Post(target, *hdrs, b, content_type);
        if (method == "PUT") return c.Put(target, *hdrs, b, content_type);
        return c.Patch(target, *hdrs, b, content_type);
      }();

      ApiError err;
      bool retriable = false;
      std::chrono::milliseconds retry_after{0};
      if (!res) {
        err = transport_error(what, res.error(), **conn);
        // A refused connection never reached the server; anything later may have.
        retriable = !is_tls_error(res.error()) &&
                    (is_idempotent(method) || res.error() == httplib::Error::Connection ||
                     res.error() == httplib::Error::ConnectionTimeout);
      } else {
        const int status = res->status;
        if (status >= 200 && status < 300) {
          Response out{status, std::move(res->body)};
          release(std::move(*conn));
          return out;
        }
        err = http_error(what, status, res->body);
        retriable = status == 429 || (is_idempotent(method) && (status == 500 || status == 502 ||
                                                                status == 503 || status == 504));
        if (res->has_header("Retry-After")) {
          const long s = std::strtol(res->get_header_value("Retry-After").c_str(), nullptr, 10);
          if (s > 0) retry_after = std::chrono::seconds(s);
        }
        release(std::move(*conn));
      }
      if (!retriable || attempt >= options.max_attempts) {
        if (retriable && attempt > 1) {
          err.message += " (gave up after " + std::to_string(attempt) + " attempts)";
        }
        return err;
      }
      auto delay = std::max(backoff_delay(options, attempt), retry_after);
      delay = std::min(delay, options.backoff_max);
      log::debug("k8s: %s; retrying in %lld ms", err.message.c_str(),
                 static_cast<long long>(delay.count()));
      std::this_thread::sleep_for(delay);
    }
  }

  Result<json> send_json(const std::string& method, const std::string& path_query,
                         const json* body = nullptr, const char* content_type = kJson) {
    std::string text;
    if (body) text = body->dump();
    auto r = send(method, path_query, body ? &text : nullptr, content_type);
    if (!r) return r.error();
    json j = json::parse(r->body, nullptr, false);
    if (j.is_discarded()) {
      return ApiError{
          ErrorKind::kDecode, r->status, "",
          method + " " + path_query + ": the answer is not JSON: " + r->body.substr(0, 200)};
    }
    return j;
  }

  // --- watch -----------------------------------------------------------------

  Result<WatchEnd> watch(const std::string& path, const WatchOptions& o,
                         const WatchCallback& on_event, std::stop_token stop) {
    if (stop.stop_requested()) return WatchEnd::kStopped;
    std::vector<std::pair<std::string, std::string>> q{{"watch", "true"}};
    if (!o.resource_version.empty()) q.emplace_back("resourceVersion", o.resource_version);
    if (o.allow_bookmarks) q.emplace_back("allowWatchBookmarks", "true");
    if (!o.label_selector.empty()) q.emplace_back("labelSelector", o.label_selector);
    if (!o.field_selector.empty()) q.emplace_back("fieldSelector", o.field_selector);
    if (o.timeout_seconds) q.emplace_back("timeoutSeconds", std::to_string(*o.timeout_seconds));
    const std::string path_query = path + query_string(q);
    const std::string what = "GET " + path_query;

    // A watch holds its connection for as long as it runs: never a pooled one.
    auto conn = connect();
    if (!conn) return conn.error();
    auto hdrs = headers();
    if (!hdrs) return hdrs.error();
    // The server may legitimately say nothing until timeoutSeconds; allow that
    // plus the normal read timeout before calling the connection dead.
    const auto quiet = std::chrono::seconds(o.timeout_seconds.value_or(3600));
    (*conn)->set_read_timeout(quiet + options.request_timeout);

    int status = 0;
    std::string error_body;  // a non-200 answer's body
    std::string pending;     // bytes of an incomplete line
    bool caller_stopped = false;
    bool expired = false;
    std::optional<ApiError> failure;

    auto handle_line = [&](std::string_view line) -> bool {
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.empty()) return true;
      const json ev = json::parse(line, nullptr, false);
      if (!ev.is_object() || !ev.contains("type") || !ev["type"].is_string() ||
          !ev.contains("object") || !ev["object"].is_object()) {
        failure = ApiError{ErrorKind::kDecode, 200, "",
                           what + ": not a watch event: " + std::string(line.substr(0, 200))};
        return false;
      }
      const std::string type = ev["type"];
      WatchEvent out;
      if (type == "ADDED") {
        out.type = WatchEvent::Type::kAdded;
      } else if (type == "MODIFIED") {
        out.type = WatchEvent::Type::kModified;
      } else if (type == "DELETED") {
        out.type = WatchEvent::Type::kDeleted;
      } else if (type == "BOOKMARK") {
        out.type = WatchEvent::Type::kBookmark;
      } else if (type == "ERROR") {
        const json& st = ev["object"];
        const int code = st.value("code", 0);
        if (code == 410) {
          expired = true;
        } else {
          failure = http_error(what + " (ERROR event)", code, st.dump());
        }
        return false;
      } else {
        failure = ApiError{ErrorKind::kDecode, 200, "", what + ": unknown event type " + type};
        return false;
      }
      out.object = ev["object"];
      if (!on_event(out)) {
        caller_stopped = true;
        return false;
      }
      return true;
    };

    // A stop from another thread shuts the socket down, which wakes a blocked
    // read. We shut down our own dup of the socket rather than calling the
    // client's stop(): the dup stays valid (no descriptor-reuse race) even after
    // the client has closed its copy, and no client state is touched from a
    // second thread.
    StopShutdown shutdown_on_stop;
    (*conn)->set_socket_options([&](socket_t sock) { shutdown_on_stop.attach(sock, stop); });
    std::stop_callback on_stop(stop, [&] { shutdown_on_stop.fire(); });
    auto res = (*conn)->Get(
        url.prefix + path_query, *hdrs,
        [&](const httplib::Response& r) {
          status = r.status;
          return !stop.stop_requested();
        },
        [&](const char* data, size_t n) {
          if (stop.stop_requested()) return false;
          if (status != 200) {
            if (error_body.size() < 64 * 1024) error_body.append(data, n);
            return true;
          }
          pending.append(data, n);
          size_t start = 0;
          for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
            if (!handle_line(std::string_view(pending).substr(start, nl - start))) {
              pending.clear();
              return false;
            }
          }
          pending.erase(0, start);
          return true;
        });

    if (stop.stop_requested() || caller_stopped) return WatchEnd::kStopped;
    if (expired) return WatchEnd::kExpired;
    if (failure) return *failure;
    if (status != 0 && status != 200) {
      if (error_body.empty() && res) error_body = res->body;
      if (status == 410) return WatchEnd::kExpired;
      return http_error(what, status, error_body);
    }
    if (!res && status == 0) return transport_error(what, res.error(), **conn);
    // The stream ended, cleanly or not: a last line without its newline still counts.
    if (!pending.empty()) {
      handle_line(pending);
      if (caller_stopped) return WatchEnd::kStopped;
      if (expired) return WatchEnd::kExpired;
      if (failure) return *failure;
    }
    return WatchEnd::kClosed;
  }
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;
Client::~Client() = default;

hami::Result<Client> Client::from_config(const Config& config, ClientOptions options) {
  auto impl = std::make_unique<Impl>();
  auto url = parse_server(config.server);
  if (!url) return url.error();
  impl->url = *url;
  if (!config.client_cert_pem.empty() || !config.client_key_pem.empty()) {
    auto cert = tls::load_certificate(config.client_cert_pem);
    if (!cert) return hami::Error{"client certificate: " + cert.error().message};
    auto key = tls::load_private_key(config.client_key_pem);
    if (!key) return hami::Error{"client key: " + key.error().message};
    if (X509_check_private_key(cert->get(), key->get()) != 1) {
      tls::last_error();
      return hami::Error{"client key does not match the client certificate"};
    }
    impl->client_cert = std::move(*cert);
    impl->client_key = std::move(*key);
  }
  if (!config.ca_pem.empty()) {
    if (auto store = tls::load_ca_store(config.ca_pem); !store) {
      return hami::Error{"CA certificates: " + store.error().message};
    }
  }
  if (!config.token_file.empty()) {
    impl->tokens = TokenSource::from_file(config.token_file);
  } else if (!config.token.empty()) {
    impl->tokens = TokenSource::fixed(config.token);
  }
  if (!url->tls && (impl->tokens || impl->client_cert)) {
    log::warn("k8s: %s is plain http; credentials are sent unencrypted", config.server.c_str());
  }
  impl->config = config;
  impl->options = std::move(options);
  return Client(std::move(impl));
}

const Config& Client::config() const {
  return impl_->config;
}

Result<json> Client::get(const std::string& path) {
  return impl_->send_json("GET", path);
}

Result<ObjectList> Client::list(const std::string& path, const ListOptions& o) {
  ObjectList out;
  std::string cont;
  bool restarted = false;
  for (;;) {
    std::vector<std::pair<std::string, std::string>> q;
    if (!o.label_selector.empty()) q.emplace_back("labelSelector", o.label_selector);
    if (!o.field_selector.empty()) q.emplace_back("fieldSelector", o.field_selector);
    if (!o.resource_version.empty() && cont.empty()) {
      q.emplace_back("resourceVersion", o.resource_version);
    }
    if (o.limit > 0 && !restarted) q.emplace_back("limit", std::to_string(o.limit));
    if (!cont.empty()) q.emplace_back("continue", cont);
    auto page = impl_->send_json("GET", path + query_string(q));
    if (!page && page.error().gone() && !cont.empty() && !restarted) {
      // The snapshot the pages came from was compacted away; one list without
      // pages is consistent again (client-go's pager does the same).
      out = {};
      cont.clear();
      restarted = true;
      continue;
    }
    if (!page) return page.error();
    const json& j = *page;
    if (!j.is_object() || !j.contains("items") ||
        !(j["items"].is_array() || j["items"].is_null())) {
      return ApiError{ErrorKind::kDecode, 200, "", "GET " + path + ": not a list"};
    }
    // List items come without kind and apiVersion; fill them in so listed and
    // watched objects look the same.
    std::string kind = j.value("kind", "");
    if (kind.size() > 4 && kind.compare(kind.size() - 4, 4, "List") == 0) {
      kind.resize(kind.size() - 4);
    }
    const std::string api_version = j.value("apiVersion", "");
    if (j["items"].is_array()) {
      for (const json& item : j["items"]) {
        json obj = item;
        if (obj.is_object()) {
          if (!obj.contains("kind") && !kind.empty()) obj["kind"] = kind;
          if (!obj.contains("apiVersion") && !api_version.empty()) obj["apiVersion"] = api_version;
        }
        out.items.push_back(std::move(obj));
      }
    }
    const json meta = j.value("metadata", json::object());
    if (out.resource_version.empty() || cont.empty()) {
      out.resource_version = meta.value("resourceVersion", "");
    }
    cont = meta.value("continue", "");
    if (cont.empty()) return out;
  }
}

Result<WatchEnd> Client::watch(const std::string& path, const WatchOptions& options,
                               const WatchCallback& on_event, std::stop_token stop) {
  return impl_->watch(path, options, on_event, std::move(stop));
}

Result<json> Client::create(const std::string& collection_path, const json& object) {
  return impl_->send_json("POST", collection_path, &object);
}

Result<json> Client::update(const std::string& path, const json& object) {
  return impl_->send_json("PUT", path, &object);
}

Result<json> Client::merge_patch(const std::string& path, const json& patch) {
  return impl_->send_json("PATCH", path, &patch, kMergePatch);
}

Result<json> Client::del(const std::string& path) {
  return impl_->send_json("DELETE", path);
}

Result<json> Client::read_modify_patch(const std::string& path, const PatchFn& make_patch,
                                       PatchRetry retry) {
  ApiError last;
  for (int attempt = 1; attempt <= std::max(1, retry.max_attempts); ++attempt) {
    auto current = get(path);
    if (!current) return current.error();
    auto patch = make_patch(*current);
    if (!patch) return patch.error();
    if (!*patch) return current;
    json p = std::move(**patch);
    if (!p.is_object()) {
      return ApiError{ErrorKind::kInvalid, 0, "", "PATCH " + path + ": patch is not an object"};
    }
    const json* meta = current->contains("metadata") ? &(*current)["metadata"] : nullptr;
    if (!meta || !meta->contains("resourceVersion") || !(*meta)["resourceVersion"].is_string()) {
      return ApiError{ErrorKind::kDecode, 200, "", "GET " + path + ": no resourceVersion"};
    }
    p["metadata"]["resourceVersion"] = (*meta)["resourceVersion"];
    auto patched = merge_patch(path, p);
    if (patched || !patched.error().conflict()) return patched;
    last = patched.error();
    if (attempt < retry.max_attempts) {
      std::this_thread::sleep_for(backoff_delay(impl_->options, attempt));
    }
  }
  last.message = "PATCH " + path + ": still conflicting after " +
                 std::to_string(retry.max_attempts) + " attempts: " + last.message;
  return last;
}

json annotations_patch(const std::map<std::string, std::optional<std::string>>& changes) {
  json annotations = json::object();
  for (const auto& [k, v] : changes)
    annotations[k] = v ? json(*v) : json(nullptr);
  return {{"metadata", {{"annotations", std::move(annotations)}}}};
}

Result<json> Client::patch_annotations(
    const std::string& path, const std::map<std::string, std::optional<std::string>>& changes,
    std::optional<PatchRetry> retry) {
  const json patch = annotations_patch(changes);
  if (!retry) return merge_patch(path, patch);
  return read_modify_patch(
      path, [&](const json&) -> Result<std::optional<json>> { return std::optional<json>(patch); },
      *retry);
}

Result<void> Client::bind_pod(const std::string& ns, const std::string& name,
                              const std::string& uid, const std::string& node,
                              const std::map<std::string, std::string>& annotations) {
  json binding = {{"apiVersion", "v1"},
                  {"kind", "Binding"},
                  {"metadata", {{"name", name}, {"namespace", ns}}},
                  {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}};
  if (!uid.empty()) binding["metadata"]["uid"] = uid;
  if (!annotations.empty()) binding["metadata"]["annotations"] = annotations;
  auto r = impl_->send_json("POST", core_path("pods", ns, name, "binding"), &binding);
  if (!r) return r.error();
  return {};
}

}  // namespace hami::k8s
