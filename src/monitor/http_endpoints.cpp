#include "monitor/http_endpoints.hpp"

#include <nlohmann/json.hpp>

#include "common/log.hpp"
#include "common/prometheus_text.hpp"
#include "http/server.hpp"

namespace hami::monitor {

std::string view_json(const NodeView& v) {
  using nlohmann::json;
  json gpus = json::array();
  for (const GpuSample& g : v.gpus) {
    json procs = json::array();
    for (const GpuProcess& p : g.processes) {
      procs.push_back({{"pid", p.pid}, {"used_bytes", p.used_bytes}, {"sm", p.sm}});
    }
    json o = {{"index", g.index},
              {"uuid", g.uuid},
              {"name", g.name},
              {"memory_total", g.memory_total},
              {"memory_used", g.memory_used},
              {"utilization", g.utilization},
              {"memory_utilization", g.memory_utilization},
              {"processes", procs}};
    if (!g.error.empty()) o["error"] = g.error;
    if (g.mig) {
      o["mig"] = {{"parent_uuid", g.mig->parent_uuid},
                  {"profile", g.mig->profile},
                  {"gpu_instance_id", g.mig->gpu_instance_id},
                  {"compute_instance_id", g.mig->compute_instance_id}};
    }
    gpus.push_back(std::move(o));
  }
  json containers = json::array();
  for (const ContainerView& c : v.containers) {
    json devices = json::array();
    for (const ContainerDevice& d : c.devices) {
      devices.push_back({{"vdevice_index", d.vdevice_index},
                         {"uuid", d.uuid},
                         {"memory_limit", d.memory_limit},
                         {"sm_limit", d.sm_limit},
                         {"used", d.used},
                         {"context", d.context},
                         {"module", d.module},
                         {"data", d.data},
                         {"spilled", d.spilled},
                         {"nvml_used", d.nvml_used},
                         {"sm_util", d.sm_util},
                         {"sm_from_gpu_time", d.sm_from_gpu_time}});
    }
    json procs = json::array();
    for (const ContainerProcess& p : c.processes) {
      json o = {{"slot", p.slot}, {"pid", p.pid}, {"live", p.live}};
      if (p.host_pid) o["host_pid"] = *p.host_pid;
      if (!p.unresolved_reason.empty()) o["unresolved"] = p.unresolved_reason;
      procs.push_back(std::move(o));
    }
    json o = {{"pod_uid", c.ref.pod_uid},
              {"container", c.ref.container},
              {"namespace", c.pod_namespace},
              {"pod", c.pod_name},
              {"path", c.path},
              {"priority", c.priority},
              {"active", c.active},
              {"recent_kernel", c.recent_kernel},
              {"utilization_switch", c.utilization_switch},
              {"devices", devices},
              {"processes", procs}};
    if (c.last_kernel_time) o["last_kernel_time"] = *c.last_kernel_time;
    if (c.mps_thread_percentage) o["mps_thread_percentage"] = *c.mps_thread_percentage;
    containers.push_back(std::move(o));
  }
  json out = {
      {"node", v.node},
      {"taken_unix_ms",
       std::chrono::duration_cast<std::chrono::milliseconds>(v.taken.time_since_epoch()).count()},
      {"pass_duration_us", v.pass_duration.count()},
      {"passes", v.counters.passes},
      {"gpus", gpus},
      {"containers", containers}};
  return out.dump(1, ' ', false, nlohmann::json::error_handler_t::replace);
}

HttpEndpoints::HttpEndpoints(const Agent& agent, HttpOptions options)
    : agent_(agent), options_(std::move(options)) {}

HttpEndpoints::~HttpEndpoints() {
  stop();
}

Result<void> HttpEndpoints::start() {
  using http::Request;
  using http::Response;
  std::vector<http::Route> routes;
  routes.push_back(
      {.method = "GET", .path = "/metrics", .handler = [this](const Request&, Response& res) {
         res.set_content(render_metrics(*agent_.latest(), options_.metrics),
                         std::string(PrometheusText::kContentType));
       }});
  routes.push_back({.method = "GET",
                    .path = "/healthz",
                    .inline_handler = true,
                    .handler = [this](const Request&, Response& res) {
                      auto v = agent_.latest();
                      if (v->counters.passes == 0) {
                        res.status = 503;
                        res.body = "no pass has completed yet\n";
                        return;
                      }
                      const auto age = std::chrono::system_clock::now() - v->taken;
                      if (age > 3 * options_.interval + std::chrono::seconds(1)) {
                        res.status = 503;
                        res.body =
                            "last pass was " +
                            std::to_string(
                                std::chrono::duration_cast<std::chrono::seconds>(age).count()) +
                            " s ago; the agent's loop is stuck\n";
                        return;
                      }
                      res.body = "ok\n";
                    }});
  routes.push_back(
      {.method = "GET", .path = "/containers", .handler = [this](const Request&, Response& res) {
         res.set_content(view_json(*agent_.latest()), "application/json");
       }});
  server_ = std::make_unique<http::Server>(
      http::ServerOptions{
          .bind = options_.bind,
          .request_timeout = options_.request_timeout,
          .idle_timeout = options_.idle_timeout,
          .memory_budget = std::make_shared<http::MemoryBudget>(options_.memory_budget),
          .workers = 2,
          .name = "node agent"},
      std::move(routes));
  if (auto r = server_->start(); !r) return r.error();
  port_ = server_->port();
  log::info("serving /metrics, /healthz and /containers on %s (port %d)", options_.bind.c_str(),
            port_);
  return {};
}

void HttpEndpoints::stop() {
  if (server_) server_->stop();
}

}  // namespace hami::monitor
