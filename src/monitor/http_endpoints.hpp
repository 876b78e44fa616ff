#pragma once
// The node agent's HTTP endpoints (http/server.hpp, plain HTTP as upstream's
// monitor on :9394):
//   GET /metrics     Prometheus text of the latest pass (render_metrics)
//   GET /healthz     200 "ok" while passes complete on time; 503 with the reason
//                    once the last pass is older than three periods
//   GET /containers  the latest view as JSON (for `vgpu top` and for people)
// Requests render from the latest NodeView only: a scrape never reads a state
// file or asks NVML, so it costs the same whatever the GPUs are doing. Slow or
// idle clients hold a socket, not a thread; /healthz is answered on the I/O
// thread, so it answers even while scrapes are being rendered.
//
//   HttpEndpoints http(agent, {.bind = ":9394", .interval = 5s, .metrics = {...}});
//   if (auto ok = http.start(); !ok) die(ok.error().message);
//   ... http.stop();

#include <chrono>
#include <memory>
#include <string>

#include "common/result.hpp"
#include "monitor/agent.hpp"
#include "monitor/metrics.hpp"

namespace hami::http {
class Server;
}

namespace hami::monitor {

struct HttpOptions {
  std::string bind = ":9394";  // [host]:port; port 0 picks a free one
  std::chrono::milliseconds interval{5000};
  MetricsOptions metrics;
  std::chrono::milliseconds request_timeout{10000};  // a request's first byte to its last
  std::chrono::milliseconds idle_timeout{60000};     // between kept-alive requests
  size_t memory_budget = 32u << 20;                  // answers not yet sent (http::MemoryBudget)
};

// The view as JSON text; bytes of names that are not UTF-8 (file names are
// bytes) become U+FFFD.
std::string view_json(const NodeView& view);

class HttpEndpoints {
 public:
  HttpEndpoints(const Agent& agent, HttpOptions options);
  ~HttpEndpoints();
  HttpEndpoints(const HttpEndpoints&) = delete;
  HttpEndpoints& operator=(const HttpEndpoints&) = delete;

  // Binds and serves on a thread of its own.
  Result<void> start();
  void stop();
  int port() const { return port_; }

 private:
  const Agent& agent_;
  HttpOptions options_;
  std::unique_ptr<http::Server> server_;
  int port_ = 0;
};

}  // namespace hami::monitor
