#pragma once
// An in-process Kubernetes API server for tests, speaking the real protocol
// over real HTTPS: a CA and server certificate made at start-up, bearer-token
// and client-certificate authentication (401 otherwise), and the semantics our
// client and daemons rely on for pods (with pods/binding and pods/status),
// nodes (with nodes/status), leases (coordination.k8s.io/v1), events and
// configmaps: resourceVersion and uid, 404/409/410 as v1 Status objects,
// label and field selectors, limit/continue pagination, merge and JSON patch,
// and watches (chunked JSON lines, replay from a bounded history, 410 when too
// old, bookmarks, timeoutSeconds). See store.hpp for the object semantics.
//
// Tests also get direct object access, per-verb request counters and fault
// injection:
//
//   hami::test::ApiServer api;                       // started, on 127.0.0.1:<ephemeral>
//   auto cfg = hami::k8s::Config::from_kubeconfig(api.write_kubeconfig(dir.file("kc")));
//   api.put("pods", pod_json);                       // no HTTP, emits a watch event
//   api.inject({.verb = "patch", .path_prefix = "/api/v1/namespaces/default/pods/p",
//               .status = 409});                     // next matching request fails
//   api.close_watches();                             // every open watch stream ends now
//   api.compact();                                   // older resourceVersions now get 410
//   EXPECT_EQ(api.requests("watch", "/api/v1/pods"), 2);
//
// Limits: 64 worker threads, and each open watch holds one. Deletion is
// immediate (no graceful deletionTimestamp phase); strategic merge patches are
// applied as JSON merge patches. stop() then start() keeps the port and the
// objects, like an API server restart in front of the same etcd.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/apiserver/certs.hpp"
#include "support/apiserver/store.hpp"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace hami::test {

struct ApiServerOptions {
  bool tls = true;                   // false: plain HTTP (no client certificates then)
  std::string token = "test-token";  // accepted bearer token; add_token() adds more
  size_t history_limit = 10000;      // watch history window, in changes
  std::chrono::milliseconds bookmark_interval{1000};
  bool start = true;  // start in the constructor
};

// The next `count` requests matching verb and path prefix are answered with
// `status` (after `delay`), or only delayed when status is 0.
struct Fault {
  std::string verb = "*";  // get list watch create update patch delete, or "*"
  std::string path_prefix;
  int status = 500;
  int count = 1;  // -1: until clear_faults()
  int skip = 0;   // let this many matching requests through first
  std::string message = "injected fault";
  std::optional<int> retry_after_seconds;
  std::chrono::milliseconds delay{0};
};

struct KubeconfigOptions {
  enum class Auth { kToken, kTokenFile, kClientCert } auth = Auth::kToken;
  bool inline_ca = true;  // certificate-authority-data, else a ca.crt file beside it
  std::string token;      // default: the server's token
  std::string ca_pem;     // default: the server's CA (set another to test a wrong CA)
  std::string tls_server_name;
  std::string ns = "default";
};

class ApiServer {
 public:
  explicit ApiServer(ApiServerOptions options = {});
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  void start();
  void stop();              // ends every watch stream, then the server
  std::string url() const;  // "https://127.0.0.1:<port>"
  int port() const { return port_; }
  const std::string& dir() const { return dir_; }
  std::string ca_file() const { return dir_ + "/ca.crt"; }
  const std::string& ca_pem() const { return ca_.cert_pem(); }
  const std::string& token() const { return options_.token; }
  const CertAuthority& ca() const { return ca_; }
  // Writes a kubeconfig for this server and returns `path`.
  std::string write_kubeconfig(const std::string& path, const KubeconfigOptions& o = {}) const;

  void add_token(const std::string& token);
  void revoke_token(const std::string& token);

  // Direct object access. `resource` is a plural ("pods", "nodes", "leases").
  nlohmann::json put(const std::string& resource, nlohmann::json object);
  std::optional<nlohmann::json> get(const std::string& resource, const std::string& ns,
                                    const std::string& name) const;
  bool remove(const std::string& resource, const std::string& ns, const std::string& name);
  std::vector<nlohmann::json> objects(const std::string& resource,
                                      const std::string& ns = {}) const;
  uint64_t resource_version() const { return store_.resource_version(); }

  // Requests served (after authentication), by Kubernetes verb and URL path prefix.
  uint64_t requests(const std::string& verb, const std::string& path_prefix = {}) const;
  int open_watches() const { return open_watches_.load(); }

  void inject(Fault fault);
  void clear_faults();
  void close_watches();
  void compact() { store_.compact(); }
  void set_history_limit(size_t n) { store_.set_history_limit(n); }
  void set_bookmark_interval(std::chrono::milliseconds d) { bookmark_interval_ = d.count(); }

 private:
  struct Route;
  struct WatchStream;
  void handle(const httplib::Request& req, httplib::Response& res);
  bool authenticated(const httplib::Request& req) const;
  void serve(const Route& route, const httplib::Request& req, httplib::Response& res);
  void serve_watch(const Route& route, const httplib::Request& req, httplib::Response& res,
                   uint64_t generation);
  bool pump(WatchStream& w, void* sink);  // httplib::DataSink*
  std::optional<Fault> take_fault(const std::string& verb, const std::string& path);

  ApiServerOptions options_;
  CertAuthority ca_;
  std::string dir_;
  Store store_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> watch_generation_{0};
  std::atomic<int> open_watches_{0};
  std::atomic<int64_t> bookmark_interval_;

  mutable std::mutex mu_;
  std::set<std::string> tokens_;
  std::map<std::string, uint64_t> counts_;  // "verb path" → requests
  std::vector<Fault> faults_;
};

}  // namespace hami::test
