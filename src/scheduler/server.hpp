#pragma once
// The scheduler's HTTP(S) endpoints (http/server.hpp): POST /filter,
// /prioritize, /bind (kube-scheduler's extender verbs), POST /webhook
// (AdmissionReview), GET /healthz, /readyz; and, on its own listener, GET
// /metrics. Every handler catches what it calls, so a bad request gets an
// answer in the protocol's error field, never a dropped connection; answers
// are HTTP 200 with the error inside, as kube-scheduler expects (upstream
// does the same).
//
// With client_ca_file, the extender verbs answer only a client that presents
// a certificate signed by that CA: kube-scheduler's extender tlsConfig
// (certFile, keyFile). The webhook stays open: the API server calls it
// without a client certificate unless its admission config says otherwise,
// and what it answers (a patch for the pod the caller sent) changes nothing
// in the cluster. Health probes stay open too.
//
//   ServerOptions o{.bind = "0.0.0.0:443", .cert_file = "tls.crt", .key_file = "tls.key",
//                   .client_ca_file = "client-ca.crt"};
//   SchedulerServer server(extender, config, metrics, cache, o);
//   if (auto r = server.start(); !r) die(r.error().message);
//   ... server.port();  server.stop();

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "http/server.hpp"
#include "scheduler/cache.hpp"
#include "scheduler/config.hpp"
#include "scheduler/extender.hpp"
#include "scheduler/metrics.hpp"
#include "scheduler/quota.hpp"

namespace hami::scheduler {

// The largest request body a route takes (/filter and /prioritize).
inline constexpr size_t kLargestRequestBody = 16u << 20;

struct ServerOptions {
  std::string bind = "127.0.0.1:8080";  // --http_bind; port 0 picks a free one
  std::string cert_file;                // both set: HTTPS
  std::string key_file;
  std::string client_ca_file;  // set: /filter, /prioritize, /bind need a client certificate
  std::chrono::milliseconds request_timeout{10000};  // a request's first byte to its last
  std::chrono::milliseconds idle_timeout{60000};     // between kept-alive requests
  // Request bodies and unsent answers of both listeners together
  // (--http-memory-budget): eight filters at the 16 MiB limit at once.
  size_t memory_budget = 128u << 20;
  // Filter, prioritize and webhook requests handled at once (each may use the
  // ParallelFor pool); binds, which wait on the API server, have 16 of their own.
  unsigned workers = 4;
  std::string metrics_bind = ":9395";  // empty: no metrics listener
  // /readyz answers 503, and filter and bind an error, until this is true
  // (the caches have synced).
  std::function<bool()> ready = [] { return true; };
  // Namespace quotas the webhook enforces (a pod alone over one is refused).
  const QuotaTracker* quotas = nullptr;
};

class SchedulerServer {
 public:
  SchedulerServer(Extender& extender, const SchedulerConfig& config, Metrics& metrics,
                  const ClusterCache& cache, ServerOptions options);
  ~SchedulerServer();
  SchedulerServer(const SchedulerServer&) = delete;
  SchedulerServer& operator=(const SchedulerServer&) = delete;

  Result<void> start();
  void stop();
  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }

 private:
  std::vector<http::Route> routes();

  Extender& extender_;
  const SchedulerConfig& config_;
  Metrics& metrics_;
  const ClusterCache& cache_;
  ServerOptions options_;
  std::unique_ptr<http::Server> server_;
  std::unique_ptr<http::Server> metrics_server_;
  int port_ = 0;
  int metrics_port_ = 0;
};

}  // namespace hami::scheduler
