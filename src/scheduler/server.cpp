#include "scheduler/server.hpp"

#include <chrono>
#include <exception>

#include "common/log.hpp"
#include "common/prometheus_text.hpp"
#include "scheduler/protocol.hpp"
#include "scheduler/webhook.hpp"

namespace hami::scheduler {

SchedulerServer::SchedulerServer(Extender& extender, const SchedulerConfig& config,
                                 Metrics& metrics, const ClusterCache& cache, ServerOptions options)
    : extender_(extender),
      config_(config),
      metrics_(metrics),
      cache_(cache),
      options_(std::move(options)) {
  metrics_.set_legacy(config_.legacy_metrics);
}

SchedulerServer::~SchedulerServer() {
  stop();
}

namespace {

static_assert(kLargestRequestBody >= kMaxExtenderBody && kLargestRequestBody >= kMaxAdmissionBody &&
              kLargestRequestBody >= kMaxBindingBody);

constexpr const char* kJson = "application/json";
constexpr const char* kNotSynced =
    "the scheduler's node and pod caches have not synced with the API server yet; retry";

// Times a handler and turns any exception into the protocol's error answer.
// When the request arrived (handed to the workers' queue), or now for a
// request made in process.
std::chrono::steady_clock::time_point arrival(const http::Request& req) {
  return req.received == std::chrono::steady_clock::time_point{} ? std::chrono::steady_clock::now()
                                                                 : req.received;
}

template <class Handler, class OnError>
void timed(Metrics& m, Verb verb, const http::Request& req, http::Response& res, Handler&& handler,
           OnError&& on_error) {
  const auto t0 = std::chrono::steady_clock::now();
  m.queue_wait(verb, t0 - arrival(req));
  bool ok = false;
  try {
    ok = handler();
  } catch (const std::exception& e) {
    log::error("%s: %s", verb_name(verb), e.what());
    m.failure(verb, "InternalError");
    res.set_content(on_error(std::string("internal error: ") + e.what()), kJson);
  }
  m.observe(verb, std::chrono::steady_clock::now() - t0, ok);
}

}  // namespace

std::vector<http::Route> SchedulerServer::routes() {
  using http::Auth;
  using http::Request;
  using http::Response;
  std::vector<http::Route> r;
  r.push_back({.method = "POST",
               .path = "/filter",
               .max_body = kMaxExtenderBody,
               .auth = Auth::kClientCert,
               .handler = [this](const Request& req, Response& res) {
                 timed(
                     metrics_, Verb::kFilter, req, res,
                     [&] {
                       if (!options_.ready()) {
                         // Before the first list the cache knows no node:
                         // every node would look unregistered. An error makes
                         // kube-scheduler retry.
                         metrics_.failure(Verb::kFilter, "NotSynced");
                         res.set_content(filter_error_json(kNotSynced), kJson);
                         return false;
                       }
                       auto args = parse_extender_args(req.body);
                       if (!args) {
                         metrics_.failure(Verb::kFilter, "BadRequest");
                         res.set_content(filter_error_json(args.error().message), kJson);
                         return false;
                       }
                       FilterResult f = extender_.filter(args->pod, args->node_names);
                       res.set_content(filter_result_json(*args, f), kJson);
                       return f.error.empty();
                     },
                     [](const std::string& e) { return filter_error_json(e); });
               }});
  r.push_back({.method = "POST",
               .path = "/prioritize",
               .max_body = kMaxExtenderBody,
               .auth = Auth::kClientCert,
               .handler = [this](const Request& req, Response& res) {
                 timed(
                     metrics_, Verb::kPrioritize, req, res,
                     [&] {
                       auto args = parse_extender_args(req.body);
                       if (!args) {
                         // HostPriorityList has no error field: an empty list
                         // scores nothing, and kube-scheduler ignores
                         // prioritize failures anyway.
                         metrics_.failure(Verb::kPrioritize, "BadRequest");
                         log::warn("prioritize: %s", args.error().message.c_str());
                         res.status = 400;
                         res.set_content(args.error().message + "\n", "text/plain");
                         return false;
                       }
                       auto p = extender_.prioritize(args->pod, args->node_names);
                       if (!p) {
                         metrics_.failure(Verb::kPrioritize, "BadPod");
                         res.status = 400;
                         res.set_content(p.error().message + "\n", "text/plain");
                         return false;
                       }
                       res.set_content(priorities_json(*p), kJson);
                       return true;
                     },
                     [](const std::string&) { return std::string("[]"); });
               }});
  // Bind waits on the API server and on node locks (up to --node-lock-wait):
  // kube-scheduler binds asynchronously, so several wait at once, and must
  // not keep the next pod's filter waiting for a worker.
  // A bind no worker has taken within half the bind deadline is answered
  // at once with an error (the pod is scheduled again) rather than late.
  r.push_back(
      {.method = "POST",
       .path = "/bind",
       .max_body = kMaxBindingBody,
       .auth = Auth::kClientCert,
       .blocking = true,
       .queue_timeout = config_.bind_deadline / 2,
       .on_queue_timeout =
           [this](const Request& req, Response& res) {
             const auto waited = std::chrono::steady_clock::now() - arrival(req);
             metrics_.queue_wait(Verb::kBind, waited);
             metrics_.observe(Verb::kBind, waited, false);
             metrics_.failure(Verb::kBind, "NoWorker");
             const std::string msg =
                 "bind not started: every bind worker was busy for " +
                 std::to_string(
                     std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()) +
                 " ms, half the bind deadline; nothing was bound, kube-scheduler "
                 "schedules the pod again (if this repeats, check the API server's "
                 "latency and hami_scheduler_queue_wait_seconds)";
             log::warn("%s", msg.c_str());
             res.set_content(binding_result_json(msg), kJson);
           },
       .handler =
           [this](const Request& req, Response& res) {
             timed(
                 metrics_, Verb::kBind, req, res,
                 [&] {
                   if (!options_.ready()) {
                     metrics_.failure(Verb::kBind, "NotSynced");
                     res.set_content(binding_result_json(kNotSynced), kJson);
                     return false;
                   }
                   auto args = parse_binding_args(req.body);
                   if (!args) {
                     metrics_.failure(Verb::kBind, "BadRequest");
                     res.set_content(binding_result_json(args.error().message), kJson);
                     return false;
                   }
                   args->deadline = arrival(req) + config_.bind_deadline;
                   const std::string err = extender_.bind(*args);
                   res.set_content(binding_result_json(err), kJson);
                   return err.empty();
                 },
                 [](const std::string& e) { return binding_result_json(e); });
           }});
  r.push_back({.method = "POST",
               .path = "/webhook",
               .max_body = kMaxAdmissionBody,
               .handler = [this](const Request& req, Response& res) {
                 timed(
                     metrics_, Verb::kWebhook, req, res,
                     [&] {
                       res.set_content(admit(req.body, config_, options_.quotas), kJson);
                       return true;
                     },
                     [](const std::string& e) {
                       return nlohmann::json{
                           {"response", {{"allowed", false}, {"status", {{"message", e}}}}}}
                           .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
                     });
               }});
  r.push_back({.method = "GET",
               .path = "/healthz",
               .inline_handler = true,
               .handler = [](const Request&, Response& res) { res.body = "ok\n"; }});
  r.push_back({.method = "GET",
               .path = "/readyz",
               .inline_handler = true,
               .handler = [this](const Request&, Response& res) {
                 if (!options_.ready()) {
                   res.status = 503;
                   res.body = "cache not synced yet\n";
                   return;
                 }
                 res.body = "ok\n";
               }});
  return r;
}

Result<void> SchedulerServer::start() {
  const bool tls = !options_.cert_file.empty() || !options_.key_file.empty();
  if (tls && (options_.cert_file.empty() || options_.key_file.empty())) {
    return Error{"--cert_file and --key_file must be given together"};
  }
  if (!options_.client_ca_file.empty() && !tls) {
    return Error{"--client-ca-file needs HTTPS: give --cert_file and --key_file too"};
  }
  // One budget for both listeners: /metrics answers are as large as filters.
  auto budget = std::make_shared<http::MemoryBudget>(options_.memory_budget);
  server_ = std::make_unique<http::Server>(
      http::ServerOptions{.bind = options_.bind,
                          .cert_file = options_.cert_file,
                          .key_file = options_.key_file,
                          .client_ca_file = options_.client_ca_file,
                          .request_timeout = options_.request_timeout,
                          .idle_timeout = options_.idle_timeout,
                          .memory_budget = budget,
                          .workers = options_.workers,
                          .name = "extender and webhook"},
      routes());
  if (auto r = server_->start(); !r) return r.error();
  port_ = server_->port();
  log::info("serving the extender and webhook on %s (port %d, %s)", options_.bind.c_str(), port_,
            tls ? "HTTPS" : "plain HTTP");
  if (options_.client_ca_file.empty()) {
    log::warn(
        "/filter, /prioritize and /bind answer anyone who reaches port %d: give "
        "--client-ca-file (and kube-scheduler's extender tlsConfig a certificate from that CA) "
        "so that only kube-scheduler can bind pods",
        port_);
  } else {
    log::info("/filter, /prioritize and /bind need a client certificate signed by %s",
              options_.client_ca_file.c_str());
  }
  if (!options_.metrics_bind.empty()) {
    metrics_server_ = std::make_unique<http::Server>(
        http::ServerOptions{.bind = options_.metrics_bind,
                            .request_timeout = options_.request_timeout,
                            .idle_timeout = options_.idle_timeout,
                            .memory_budget = budget,
                            .workers = 1,
                            .name = "metrics"},
        std::vector<http::Route>{{.method = "GET",
                                  .path = "/metrics",
                                  .handler = [this](const http::Request&, http::Response& res) {
                                    res.set_content(metrics_.render(cache_),
                                                    std::string(PrometheusText::kContentType));
                                  }}});
    if (auto r = metrics_server_->start(); !r) {
      stop();
      return r.error();
    }
    metrics_port_ = metrics_server_->port();
    log::info("serving /metrics on %s (port %d)", options_.metrics_bind.c_str(), metrics_port_);
  }
  return {};
}

void SchedulerServer::stop() {
  if (server_) server_->stop();
  if (metrics_server_) metrics_server_->stop();
}

}  // namespace hami::scheduler
