#include "support/apiserver/api_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <httplib.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "k8s/base64.hpp"
#include "k8s/tls.hpp"
#include "support/apiserver/selectors.hpp"

namespace hami::test {
namespace {

using nlohmann::json;
using Steady = std::chrono::steady_clock;

void write_file(const std::string& path, const std::string& text, mode_t mode = 0644) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
  f.close();
  if (!f) throw std::runtime_error("test API server: cannot write " + path);
  ::chmod(path.c_str(), mode);
}

void reply(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void reply(httplib::Response& res, const StatusError& e) {
  reply(res, e.code, e.to_json());
}

std::string reason_for(int status) {
  switch (status) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 405:
      return "MethodNotAllowed";
    case 409:
      return "Conflict";
    case 410:
      return "Expired";
    case 415:
      return "UnsupportedMediaType";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 500:
      return "InternalError";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return "";
  }
}

std::string meta_str(const json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains("metadata") || !obj["metadata"].is_object()) return {};
  const json& m = obj["metadata"];
  return m.contains(key) && m[key].is_string() ? m[key].get<std::string>() : std::string();
}

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> out;
  size_t start = 1;
  while (start <= path.size()) {
    const size_t slash = std::min(path.find('/', start), path.size());
    if (slash > start) out.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return out;
}

bool truthy(const httplib::Request& req, const char* param) {
  if (!req.has_param(param)) return false;
  const std::string v = req.get_param_value(param);
  return v == "true" || v == "1";
}

// Shuts down every accepted connection of the server listening on `port`.
// cpp-httplib's stop() only closes the listening socket; a worker waiting for
// the next request on a keep-alive connection notices only at its idle
// timeout. Connections are found by their local port, so client sockets in
// this process (whose peer is the port) and other servers are left alone.
void shutdown_connections(int port) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    const std::string name = entry.path().filename().string();
    char* end = nullptr;
    const long fd = std::strtol(name.c_str(), &end, 10);
    if (*end != '\0') continue;
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (::getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
        addr.ss_family != AF_INET) {
      continue;
    }
    const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    int listening = 0;
    socklen_t optlen = sizeof listening;
    if (ntohs(in->sin_port) != port ||
        ::getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_ACCEPTCONN, &listening, &optlen) != 0 ||
        listening) {
      continue;
    }
    ::shutdown(static_cast<int>(fd), SHUT_RDWR);
  }
}

// The peer shut its side down (a stopped watch): stop writing to it.
bool peer_closed(int fd) {
  if (fd < 0) return false;
  pollfd p{fd, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace

struct ApiServer::Route {
  const ResourceType* type = nullptr;
  std::string ns;
  std::string name;
  std::string sub;
};

struct ApiServer::WatchStream {
  const ResourceType* type = nullptr;
  std::string ns;
  std::string name;
  LabelSelector labels;
  FieldSelector fields;
  uint64_t cursor = 0;
  bool bookmarks = false;
  Steady::time_point deadline;
  Steady::time_point next_bookmark;
  uint64_t generation = 0;
  int fd = -1;
  std::string pending;  // initial ADDED events, written first

  bool visible(const json& obj) const {
    if (!ns.empty() && meta_str(obj, "namespace") != ns) return false;
    if (!name.empty() && meta_str(obj, "name") != name) return false;
    return labels.matches(obj) && fields.matches(obj);
  }
};

namespace {

std::optional<std::string> parse_route_into(const std::string& path, const ResourceType*& type,
                                            std::string& ns, std::string& name, std::string& sub) {
  const auto seg = split_path(path);
  size_t i = 0;
  std::string group, version;
  if (seg.size() >= 2 && seg[0] == "api" && seg[1] == "v1") {
    version = "v1";
    i = 2;
  } else if (seg.size() >= 3 && seg[0] == "apis") {
    group = seg[1];
    version = seg[2];
    i = 3;
  } else {
    return "the server could not find the requested resource";
  }
  if (seg.size() > i + 2 && seg[i] == "namespaces") {
    ns = seg[i + 1];
    i += 2;
  }
  if (i >= seg.size() || seg.size() - i > 3) {
    return "the server could not find the requested resource";
  }
  type = find_resource(group, version, seg[i]);
  if (!type) return "the server could not find the requested resource";
  if (seg.size() > i + 1) name = seg[i + 1];
  if (seg.size() > i + 2) sub = seg[i + 2];
  if (!ns.empty() && !type->namespaced) return "the server could not find the requested resource";
  if (type->namespaced && ns.empty() && !name.empty()) {
    return "the server could not find the requested resource";
  }
  const bool sub_ok = sub.empty() || (sub == "status" && type->status_subresource) ||
                      (sub == "binding" && type->plural == "pods");
  if (!sub_ok) return "the server could not find the requested resource";
  return std::nullopt;
}

}  // namespace

ApiServer::ApiServer(ApiServerOptions options)
    : options_(std::move(options)),
      store_(options_.history_limit),
      bookmark_interval_(options_.bookmark_interval.count()) {
  tokens_.insert(options_.token);
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/hami-apiserver-XXXXXX";
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("test API server: mkdtemp failed");
  dir_ = tmpl;
  write_file(ca_file(), ca_.cert_pem());
  if (options_.start) start();
}

ApiServer::~ApiServer() {
  stop();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string ApiServer::url() const {
  return std::string(options_.tls ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_);
}

void ApiServer::start() {
  if (server_) return;
  stopping_ = false;
  if (options_.tls) {
    const CertAndKey pair = ca_.issue_server(
        {"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}, {"127.0.0.1"});
    auto cert = k8s::tls::load_certificate(pair.cert_pem);
    auto key = k8s::tls::load_private_key(pair.key_pem);
    auto ca = k8s::tls::load_certificate(ca_.cert_pem());
    if (!cert || !key || !ca) throw std::runtime_error("test API server: bad certificates");
    // Client certificates are asked for but optional, as the real server does:
    // bearer tokens and certificates both work on one port.
    server_ = std::make_unique<httplib::SSLServer>([&](SSL_CTX& ctx) {
      SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION);
      if (SSL_CTX_use_certificate(&ctx, cert->get()) != 1 ||
          SSL_CTX_use_PrivateKey(&ctx, key->get()) != 1 ||
          X509_STORE_add_cert(SSL_CTX_get_cert_store(&ctx), ca->get()) != 1 ||
          SSL_CTX_add_client_CA(&ctx, ca->get()) != 1) {
        return false;
      }
      SSL_CTX_set_verify(&ctx, SSL_VERIFY_PEER, nullptr);
      return true;
    });
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  if (!server_->is_valid()) throw std::runtime_error("test API server: TLS setup failed");
  // Every open watch holds a worker thread.
  server_->new_task_queue = [] { return new httplib::ThreadPool(64); };
  server_->set_keep_alive_max_count(100000);
  server_->set_tcp_nodelay(true);
  // Longer than the client keeps idle connections (30 s), as real servers are.
  server_->set_keep_alive_timeout(60);
  auto handler = [this](const httplib::Request& req, httplib::Response& res) { handle(req, res); };
  server_->Get(".*", handler);
  server_->Post(".*", handler);
  server_->Put(".*", handler);
  server_->Patch(".*", handler);
  server_->Delete(".*", handler);
  // A restart keeps the port, so kubeconfigs written before stay valid.
  if (port_ == 0) {
    port_ = server_->bind_to_any_port("127.0.0.1");
  } else if (!server_->bind_to_port("127.0.0.1", port_)) {
    throw std::runtime_error("test API server: cannot bind port " + std::to_string(port_));
  }
  if (port_ <= 0) throw std::runtime_error("test API server: cannot bind");
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  const auto deadline = Steady::now() + std::chrono::seconds(10);
  while (!server_->is_running()) {
    if (Steady::now() > deadline) throw std::runtime_error("test API server: did not start");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void ApiServer::stop() {
  if (!server_) return;
  stopping_ = true;
  store_.wake();
  server_->stop();
  shutdown_connections(port_);
  if (thread_.joinable()) thread_.join();
  server_.reset();
}

std::string ApiServer::write_kubeconfig(const std::string& path, const KubeconfigOptions& o) const {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  std::string cluster = "    server: " + url() + "\n";
  const std::string ca = o.ca_pem.empty() ? ca_.cert_pem() : o.ca_pem;
  if (options_.tls) {
    if (o.inline_ca) {
      cluster += "    certificate-authority-data: " + k8s::base64_encode(ca) + "\n";
    } else {
      write_file(dir + "/ca.crt", ca);
      cluster += "    certificate-authority: ca.crt\n";  // relative to the kubeconfig
    }
    if (!o.tls_server_name.empty()) cluster += "    tls-server-name: " + o.tls_server_name + "\n";
  }
  std::string user;
  const std::string token = o.token.empty() ? options_.token : o.token;
  switch (o.auth) {
    case KubeconfigOptions::Auth::kToken:
      user = "    token: " + token + "\n";
      break;
    case KubeconfigOptions::Auth::kTokenFile:
      write_file(dir + "/token", token + "\n", 0600);
      user = "    tokenFile: token\n";
      break;
    case KubeconfigOptions::Auth::kClientCert: {
      const CertAndKey c = ca_.issue_client("test-user", {"system:masters"});
      user = "    client-certificate-data: " + k8s::base64_encode(c.cert_pem) +
             "\n    client-key-data: " + k8s::base64_encode(c.key_pem) + "\n";
      break;
    }
  }
  write_file(path,
             "apiVersion: v1\nkind: Config\ncurrent-context: test\nclusters:\n- name: test\n"
             "  cluster:\n" +
                 cluster +
                 "contexts:\n- name: test\n  context:\n    cluster: test\n    user: test\n"
                 "    namespace: " +
                 o.ns + "\nusers:\n- name: test\n  user:\n" + user,
             0600);
  return path;
}

void ApiServer::add_token(const std::string& token) {
  std::lock_guard lock(mu_);
  tokens_.insert(token);
}

void ApiServer::revoke_token(const std::string& token) {
  std::lock_guard lock(mu_);
  tokens_.erase(token);
}

json ApiServer::put(const std::string& resource, json object) {
  const ResourceType* t = find_resource(resource);
  if (!t) throw std::invalid_argument("test API server: unknown resource " + resource);
  return store_.put(*t, std::move(object));
}

std::optional<json> ApiServer::get(const std::string& resource, const std::string& ns,
                                   const std::string& name) const {
  const ResourceType* t = find_resource(resource);
  if (!t) throw std::invalid_argument("test API server: unknown resource " + resource);
  auto r = store_.get(*t, t->namespaced ? ns : "", name);
  if (!r) return std::nullopt;
  return *r;
}

bool ApiServer::remove(const std::string& resource, const std::string& ns,
                       const std::string& name) {
  const ResourceType* t = find_resource(resource);
  if (!t) throw std::invalid_argument("test API server: unknown resource " + resource);
  return store_.remove(*t, t->namespaced ? ns : "", name, nullptr).ok();
}

std::vector<json> ApiServer::objects(const std::string& resource, const std::string& ns) const {
  const ResourceType* t = find_resource(resource);
  if (!t) throw std::invalid_argument("test API server: unknown resource " + resource);
  return store_.objects(*t, ns);
}

uint64_t ApiServer::requests(const std::string& verb, const std::string& path_prefix) const {
  std::lock_guard lock(mu_);
  uint64_t n = 0;
  for (const auto& [key, count] : counts_) {
    const auto space = key.find(' ');
    if ((verb == "*" || key.compare(0, space, verb) == 0) &&
        key.compare(space + 1, path_prefix.size(), path_prefix) == 0) {
      n += count;
    }
  }
  return n;
}

void ApiServer::inject(Fault fault) {
  std::lock_guard lock(mu_);
  faults_.push_back(std::move(fault));
}

void ApiServer::clear_faults() {
  std::lock_guard lock(mu_);
  faults_.clear();
}

void ApiServer::close_watches() {
  ++watch_generation_;
  store_.wake();
}

std::optional<Fault> ApiServer::take_fault(const std::string& verb, const std::string& path) {
  std::lock_guard lock(mu_);
  for (auto it = faults_.begin(); it != faults_.end(); ++it) {
    if ((it->verb != "*" && it->verb != verb) || path.rfind(it->path_prefix, 0) != 0) continue;
    if (it->skip > 0) {
      --it->skip;
      return std::nullopt;
    }
    Fault f = *it;
    if (it->count > 0 && --it->count == 0) faults_.erase(it);
    return f;
  }
  return std::nullopt;
}

bool ApiServer::authenticated(const httplib::Request& req) const {
  if (req.ssl) {
    // A certificate that failed verification never gets this far (the
    // handshake fails); one that is present here was issued by our CA.
    if (SSL_get0_peer_certificate(req.ssl) != nullptr &&
        SSL_get_verify_result(req.ssl) == X509_V_OK) {
      return true;
    }
  }
  const std::string auth = req.get_header_value("Authorization");
  if (auth.rfind("Bearer ", 0) != 0) return false;
  std::lock_guard lock(mu_);
  return tokens_.count(auth.substr(7)) > 0;
}

void ApiServer::handle(const httplib::Request& req, httplib::Response& res) {
  // Taken before the request is counted: a watch counted before close_watches()
  // is closed by it, even if its stream starts only afterwards.
  const uint64_t generation = watch_generation_.load();
  if (stopping_) return reply(res, {503, "ServiceUnavailable", "the server is shutting down"});
  if (!authenticated(req)) return reply(res, {401, "Unauthorized", "Unauthorized"});
  Route route;
  if (auto err = parse_route_into(req.path, route.type, route.ns, route.name, route.sub)) {
    return reply(res, {404, "NotFound", *err});
  }
  std::string verb;
  if (req.method == "GET") {
    verb = truthy(req, "watch") ? "watch" : route.name.empty() ? "list" : "get";
  } else if (req.method == "POST") {
    verb = "create";
  } else if (req.method == "PUT") {
    verb = "update";
  } else if (req.method == "PATCH") {
    verb = "patch";
  } else {
    verb = "delete";
  }
  {
    std::lock_guard lock(mu_);
    ++counts_[verb + " " + req.path];
  }
  if (auto fault = take_fault(verb, req.path)) {
    if (fault->delay.count() > 0) std::this_thread::sleep_for(fault->delay);
    if (fault->status != 0) {
      if (fault->retry_after_seconds) {
        res.set_header("Retry-After", std::to_string(*fault->retry_after_seconds));
      }
      return reply(res, {fault->status, reason_for(fault->status), fault->message});
    }
  }
  if (verb == "watch") return serve_watch(route, req, res, generation);
  serve(route, req, res);
}

void ApiServer::serve(const Route& route, const httplib::Request& req, httplib::Response& res) {
  const ResourceType& t = *route.type;
  const bool collection = route.name.empty();
  auto body = [&]() -> std::optional<json> {
    json j = json::parse(req.body, nullptr, false);
    if (j.is_discarded()) {
      reply(res, {400, "BadRequest", "the request body is not valid JSON"});
      return std::nullopt;
    }
    return j;
  };
  auto answer = [&](const StoreResult<json>& r, int ok_status) {
    if (r) return reply(res, ok_status, *r);
    reply(res, r.error());
  };

  if (req.method == "GET" && !collection) {
    return answer(store_.get(t, route.ns, route.name), 200);
  }
  if (req.method == "GET") {
    auto labels = LabelSelector::parse(req.get_param_value("labelSelector"));
    if (!labels) return reply(res, {400, "BadRequest", labels.error().message});
    auto fields = FieldSelector::parse(req.get_param_value("fieldSelector"), t);
    if (!fields) return reply(res, {400, "BadRequest", fields.error().message});
    int64_t limit = 0;
    if (req.has_param("limit")) {
      char* end = nullptr;
      const std::string text = req.get_param_value("limit");
      limit = std::strtoll(text.c_str(), &end, 10);
      if (*end != '\0' || limit < 0) return reply(res, {400, "BadRequest", "invalid limit"});
    }
    auto page = store_.list(
        t, route.ns, [&](const json& o) { return labels->matches(o) && fields->matches(o); }, limit,
        req.get_param_value("continue"));
    if (!page) return reply(res, page.error());
    json items = json::array();
    for (json& item : page->items) {
      // The real server leaves kind and apiVersion to the list.
      item.erase("kind");
      item.erase("apiVersion");
      items.push_back(std::move(item));
    }
    json meta = {{"resourceVersion", std::to_string(page->rv)}};
    if (!page->continue_token.empty()) meta["continue"] = page->continue_token;
    return reply(res, 200,
                 {{"kind", t.kind + "List"},
                  {"apiVersion", t.api_version()},
                  {"metadata", meta},
                  {"items", items}});
  }
  if (req.method == "POST" && collection) {
    auto b = body();
    if (!b) return;
    return answer(store_.create(t, route.ns, std::move(*b)), 201);
  }
  if (req.method == "POST" && route.sub == "binding") {
    auto b = body();
    if (!b) return;
    auto r = store_.bind(route.ns, route.name, *b);
    if (!r) return reply(res, r.error());
    return reply(res, 201,
                 {{"kind", "Status"},
                  {"apiVersion", "v1"},
                  {"metadata", json::object()},
                  {"status", "Success"},
                  {"code", 201}});
  }
  if (req.method == "PUT" && !collection && route.sub != "binding") {
    auto b = body();
    if (!b) return;
    return answer(store_.update(t, route.ns, route.name, std::move(*b), route.sub == "status"),
                  200);
  }
  if (req.method == "PATCH" && !collection && route.sub != "binding") {
    const std::string type = req.get_header_value("Content-Type");
    const bool merge = type.rfind("application/merge-patch+json", 0) == 0 ||
                       type.rfind("application/strategic-merge-patch+json", 0) == 0;
    const bool json_patch = type.rfind("application/json-patch+json", 0) == 0;
    if (!merge && !json_patch) {
      return reply(res, {415, "UnsupportedMediaType",
                         "the body of the request was in an unknown format - accepted media "
                         "types include: application/json-patch+json, "
                         "application/merge-patch+json, application/strategic-merge-patch+json"});
    }
    auto b = body();
    if (!b) return;
    if ((merge && !b->is_object()) || (json_patch && !b->is_array())) {
      return reply(res, {400, "BadRequest", "the patch does not match its Content-Type"});
    }
    return answer(store_.patch(t, route.ns, route.name, *b, route.sub == "status"), 200);
  }
  if (req.method == "DELETE" && !collection && route.sub.empty()) {
    json pre;
    if (!req.body.empty()) {
      auto b = body();
      if (!b) return;
      if (b->is_object() && b->contains("preconditions")) pre = (*b)["preconditions"];
    }
    return answer(store_.remove(t, route.ns, route.name, pre), 200);
  }
  reply(res, {405, "MethodNotAllowed",
              "the server does not allow this method on the requested "
              "resource"});
}

void ApiServer::serve_watch(const Route& route, const httplib::Request& req, httplib::Response& res,
                            uint64_t generation) {
  auto w = std::make_shared<WatchStream>();
  w->type = route.type;
  w->ns = route.ns;
  w->name = route.name;
  auto labels = LabelSelector::parse(req.get_param_value("labelSelector"));
  if (!labels) return reply(res, {400, "BadRequest", labels.error().message});
  auto fields = FieldSelector::parse(req.get_param_value("fieldSelector"), *route.type);
  if (!fields) return reply(res, {400, "BadRequest", fields.error().message});
  w->labels = std::move(*labels);
  w->fields = std::move(*fields);
  const std::string rv = req.get_param_value("resourceVersion");
  if (rv.empty() || rv == "0") {
    // No starting point: the current objects first, as ADDED events.
    auto [objects, at] = store_.snapshot(*route.type, route.ns);
    for (const json& o : objects) {
      if (w->visible(o)) w->pending += json{{"type", "ADDED"}, {"object", o}}.dump() + "\n";
    }
    w->cursor = at;
  } else {
    char* end = nullptr;
    w->cursor = std::strtoull(rv.c_str(), &end, 10);
    if (*end != '\0') {
      return reply(res, {400, "BadRequest", "invalid resourceVersion \"" + rv + "\""});
    }
  }
  int timeout = 1800;  // the real server's default is 30-60 minutes
  if (req.has_param("timeoutSeconds")) {
    timeout = std::atoi(req.get_param_value("timeoutSeconds").c_str());
  }
  const auto now = Steady::now();
  w->deadline = now + std::chrono::seconds(timeout);
  w->bookmarks = truthy(req, "allowWatchBookmarks");
  w->next_bookmark = now + std::chrono::milliseconds(bookmark_interval_.load());
  w->generation = generation;
  if (req.ssl) w->fd = SSL_get_fd(req.ssl);
  ++open_watches_;
  res.set_chunked_content_provider(
      "application/json", [this, w](size_t, httplib::DataSink& sink) { return pump(*w, &sink); },
      [this](bool) { --open_watches_; });
}

bool ApiServer::pump(WatchStream& w, void* sink_ptr) {
  auto& sink = *static_cast<httplib::DataSink*>(sink_ptr);
  if (!w.pending.empty()) {
    if (!sink.write(w.pending.data(), w.pending.size())) return false;
    w.pending.clear();
  }
  const auto now = Steady::now();
  if (stopping_ || w.generation != watch_generation_.load() || now >= w.deadline) {
    sink.done();
    return true;
  }
  if (peer_closed(w.fd)) return false;
  auto until = std::min(now + std::chrono::milliseconds(100), w.deadline);
  if (w.bookmarks) until = std::min(until, w.next_bookmark);
  const uint64_t from = w.cursor;
  auto changes = store_.changes_after(w.cursor, until);
  if (!changes) {
    const StatusError gone{410, "Expired",
                           "too old resource version: " + std::to_string(from) + " (" +
                               std::to_string(store_.resource_version()) + ")"};
    const std::string line = json{{"type", "ERROR"}, {"object", gone.to_json()}}.dump() + "\n";
    sink.write(line.data(), line.size());
    sink.done();
    return true;
  }
  std::string out;
  for (const Change& c : *changes) {
    w.cursor = c.rv;
    if (c.type != w.type) continue;
    const bool was = !c.previous.is_null() && w.visible(c.previous);
    const bool is = c.change != ChangeType::kDeleted && w.visible(c.object);
    const char* type = nullptr;
    if (c.change == ChangeType::kDeleted) {
      type = was ? "DELETED" : nullptr;
    } else if (was && is) {
      type = "MODIFIED";
    } else if (is) {
      type = "ADDED";
    } else if (was) {
      type = "DELETED";  // no longer matches the selectors: gone from this watch's view
    }
    if (type) out += json{{"type", type}, {"object", c.object}}.dump() + "\n";
  }
  if (w.bookmarks && Steady::now() >= w.next_bookmark) {
    const json bookmark = {{"type", "BOOKMARK"},
                           {"object",
                            {{"kind", w.type->kind},
                             {"apiVersion", w.type->api_version()},
                             {"metadata", {{"resourceVersion", std::to_string(w.cursor)}}}}}};
    out += bookmark.dump() + "\n";
    w.next_bookmark = Steady::now() + std::chrono::milliseconds(bookmark_interval_.load());
  }
  if (!out.empty() && !sink.write(out.data(), out.size())) return false;
  return true;
}

}  // namespace hami::test
