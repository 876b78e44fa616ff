#include "monitor/http_endpoints.hpp"

#include <httplib.h>

#include <charconv>
#include <nlohmann/json.hpp>

#include "common/bind_address.hpp"
#include "common/log.hpp"
#include "common/prometheus_text.hpp"

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
  return out.dump(1);
}

HttpEndpoints::HttpEndpoints(const Agent& agent, HttpOptions options)
    : agent_(agent), options_(std::move(options)) {}

HttpEndpoints::~HttpEndpoints() {
  stop();
}

Result<void> HttpEndpoints::start() {
  auto addr = parse_bind_address(options_.bind);
  if (!addr) return addr.error();
  server_ = std::make_unique<httplib::Server>();
  httplib::Server& s = *server_;

  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(render_metrics(*agent_.latest(), options_.metrics),
                    std::string(PrometheusText::kContentType));
  });
  s.Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
    auto v = agent_.latest();
    if (v->counters.passes == 0) {
      res.status = 503;
      res.set_content("no pass has completed yet\n", "text/plain");
      return;
    }
    const auto age = std::chrono::system_clock::now() - v->taken;
    if (age > 3 * options_.interval + std::chrono::seconds(1)) {
      res.status = 503;
      res.set_content(
          "last pass was " +
              std::to_string(std::chrono::duration_cast<std::chrono::seconds>(age).count()) +
              " s ago; the agent's loop is stuck\n",
          "text/plain");
      return;
    }
    res.set_content("ok\n", "text/plain");
  });
  s.Get("/containers", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(view_json(*agent_.latest()), "application/json");
  });

  // httplib's default adds SO_REUSEPORT, which lets a second agent bind the
  // same port and silently take half the scrapes; SO_REUSEADDR alone only
  // allows a quick restart.
  s.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  if (addr->second == 0) {
    port_ = s.bind_to_any_port(addr->first);
    if (port_ < 0) return Error{"cannot listen on " + addr->first + ": no free port"};
  } else {
    if (!s.bind_to_port(addr->first, addr->second)) {
      return Error{"cannot listen on " + options_.bind +
                   ": address in use or not available (is another agent running?)"};
    }
    port_ = addr->second;
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // httplib's stop() does nothing until the loop has started: wait for it, so
  // that a stop() right after start() cannot leave the thread serving forever.
  for (int i = 0; i < 5000 && !server_->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  log::info("serving /metrics, /healthz and /containers on %s:%d", addr->first.c_str(), port_);
  return {};
}

void HttpEndpoints::stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace hami::monitor
