#include "scheduler/server.hpp"

#include <httplib.h>

#include <chrono>
#include <exception>

#include "common/bind_address.hpp"
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
      options_(std::move(options)) {}

SchedulerServer::~SchedulerServer() {
  stop();
}

namespace {

constexpr const char* kJson = "application/json";
constexpr const char* kNotSynced =
    "the scheduler's node and pod caches have not synced with the API server yet; retry";

// Times a handler and turns any exception into the protocol's error answer.
template <class Handler, class OnError>
void timed(Metrics& m, Verb verb, httplib::Response& res, Handler&& handler, OnError&& on_error) {
  const auto t0 = std::chrono::steady_clock::now();
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

void SchedulerServer::routes(httplib::Server& s) {
  s.Post("/filter", [this](const httplib::Request& req, httplib::Response& res) {
    timed(
        metrics_, Verb::kFilter, res,
        [&] {
          if (!options_.ready()) {
            // Before the first list the cache knows no node: every node
            // would look unregistered. An error makes kube-scheduler retry.
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
          FilterResult r = extender_.filter(args->pod, args->node_names);
          res.set_content(filter_result_json(*args, r), kJson);
          return r.error.empty();
        },
        [](const std::string& e) { return filter_error_json(e); });
  });
  s.Post("/prioritize", [this](const httplib::Request& req, httplib::Response& res) {
    timed(
        metrics_, Verb::kPrioritize, res,
        [&] {
          auto args = parse_extender_args(req.body);
          if (!args) {
            // HostPriorityList has no error field: an empty list scores
            // nothing, and kube-scheduler ignores prioritize failures anyway.
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
  });
  s.Post("/bind", [this](const httplib::Request& req, httplib::Response& res) {
    timed(
        metrics_, Verb::kBind, res,
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
          const std::string err = extender_.bind(*args);
          res.set_content(binding_result_json(err), kJson);
          return err.empty();
        },
        [](const std::string& e) { return binding_result_json(e); });
  });
  s.Post("/webhook", [this](const httplib::Request& req, httplib::Response& res) {
    timed(
        metrics_, Verb::kWebhook, res,
        [&] {
          res.set_content(admit(req.body, config_), kJson);
          return true;
        },
        [](const std::string& e) {
          return nlohmann::json{{"response", {{"allowed", false}, {"status", {{"message", e}}}}}}
              .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        });
  });
  s.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  s.Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    if (!options_.ready()) {
      res.status = 503;
      res.set_content("cache not synced yet\n", "text/plain");
      return;
    }
    res.set_content("ok\n", "text/plain");
  });
}

Result<int> SchedulerServer::listen(httplib::Server& s, const std::string& bind,
                                    std::thread& thread) {
  auto addr = parse_bind_address(bind);
  if (!addr) return addr.error();
  s.set_payload_max_length(kMaxExtenderBody);
  s.set_tcp_nodelay(true);  // H3 measurement stand-in for H1's TCP_NODELAY change (issue 29.1)
  // httplib's default adds SO_REUSEPORT, which lets a second scheduler bind
  // the same port and silently take half the requests; SO_REUSEADDR alone
  // only allows a quick restart.
  s.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  int port = 0;
  if (addr->second == 0) {
    port = s.bind_to_any_port(addr->first);
    if (port < 0) return Error{"cannot listen on " + addr->first + ": no free port"};
  } else {
    if (!s.bind_to_port(addr->first, addr->second)) {
      return Error{"cannot listen on " + bind + ": address in use or not available"};
    }
    port = addr->second;
  }
  thread = std::thread([&s] { s.listen_after_bind(); });
  // httplib's stop() does nothing until the loop has started: wait for it, so
  // a stop() right after start() cannot leave the thread serving forever.
  for (int i = 0; i < 5000 && !s.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return port;
}

Result<void> SchedulerServer::start() {
  const bool tls = !options_.cert_file.empty() || !options_.key_file.empty();
  if (tls) {
    if (options_.cert_file.empty() || options_.key_file.empty()) {
      return Error{"--cert_file and --key_file must be given together"};
    }
    auto ssl =
        std::make_unique<httplib::SSLServer>(options_.cert_file.c_str(), options_.key_file.c_str());
    if (!ssl->is_valid()) {
      return Error{"cannot load the TLS certificate " + options_.cert_file + " and key " +
                   options_.key_file};
    }
    server_ = std::move(ssl);
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  routes(*server_);
  auto port = listen(*server_, options_.bind, thread_);
  if (!port) return port.error();
  port_ = *port;
  log::info("serving the extender and webhook on %s (port %d, %s)", options_.bind.c_str(), port_,
            tls ? "HTTPS" : "plain HTTP");
  if (!options_.metrics_bind.empty()) {
    metrics_server_ = std::make_unique<httplib::Server>();
    metrics_server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics_.render(cache_), std::string(PrometheusText::kContentType));
    });
    auto mp = listen(*metrics_server_, options_.metrics_bind, metrics_thread_);
    if (!mp) {
      stop();
      return mp.error();
    }
    metrics_port_ = *mp;
    log::info("serving /metrics on %s (port %d)", options_.metrics_bind.c_str(), metrics_port_);
  }
  return {};
}

void SchedulerServer::stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
  if (metrics_server_) metrics_server_->stop();
  if (metrics_thread_.joinable()) metrics_thread_.join();
}

}  // namespace hami::scheduler
