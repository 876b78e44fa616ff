#include "monitor/agent_flags.hpp"

#include <unistd.h>

#include <cstdlib>

#include "common/bind_address.hpp"
#include "common/size_parse.hpp"

namespace hami::monitor {

namespace {

const char* env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

}  // namespace

void add_flags(daemon::StartUp& start, AgentFlags& f) {
  CLI::App& app = start.app();
  AgentOptions& opt = f.options;
  opt.hook_path = env_or("HOOK_PATH", "/usr/local/vgpu");
  opt.node_name = env_or("NODE_NAME", "");
  f.kubeconfig = env_or("KUBECONFIG", "");
  f.resync = env_or("HAMI_RESYNC_INTERVAL", "5m");
  app.add_option("--hook-path", opt.hook_path,
                 "Directory holding containers/<podUID>_<container>/ (env HOOK_PATH)")
      ->capture_default_str();
  app.add_option("--metrics-bind-address", f.bind, "Where to serve /metrics, /healthz, /containers")
      ->capture_default_str();
  app.add_option("--interval", f.interval,
                 "Period of the pass: read files, sample GPUs, feedback (e.g. 5s, 1s, 500ms)")
      ->capture_default_str();
  app.add_option("--node-name", opt.node_name,
                 "This node's name (env NODE_NAME; default hostname)");
  app.add_option("--proc-root", opt.proc_root, "The host's /proc")->capture_default_str();
  app.add_option("--nvml-library", f.nvml_path, "NVML library to dlopen")->capture_default_str();
  app.add_flag("--no-nvml", f.no_nvml,
               "Do not use NVML: no host GPU metrics and no per-process utilisation");
  app.add_option("--pod-names", f.pod_names,
                 "Where pod namespace/name come from: api (the API server, pods of this node "
                 "only), none (label by pod UID), auto (api when a cluster config is found)")
      ->check(CLI::IsMember({"auto", "api", "none"}))
      ->capture_default_str();
  app.add_option("--kubeconfig", f.kubeconfig, "Kubeconfig (env KUBECONFIG; default in-cluster)");
  app.add_option("--resync-interval", f.resync,
                 "How often the pod list is re-read even when no new pod appears "
                 "(env HAMI_RESYNC_INTERVAL)")
      ->capture_default_str();
  daemon::add_http_timeout_flags(app, f.read_timeout, f.idle_timeout);
  // No route takes a body: the budget is for answers (a scrape of 1,024
  // containers is a few MiB).
  daemon::add_http_memory_budget_flag(app, f.http_memory_budget, 1u << 20);
  app.add_flag("--legacy-metrics", f.legacy, "Also export upstream's old metric names");
  app.add_flag("--read-only", f.read_only,
               "Never write a state file (no host PIDs, utilisation or feedback written back)");
  app.add_option("--max-containers", opt.limits.containers,
                 "Containers read per pass at most; more are logged and counted "
                 "(hami_monitor_containers_skipped)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 20))
      ->capture_default_str();
  app.add_option("--over-limit-action", f.over_limit_action,
                 "When NVML shows a pod's processes on a GPU over the pod's memory limits there "
                 "(plus the margin) for two passes: report (hami_pod_memory_over_limit and a log "
                 "line) or kill (also SIGKILL those processes)")
      ->check(CLI::IsMember({"report", "kill"}))
      ->capture_default_str();
  app.add_option("--over-limit-margin", f.over_limit_margin,
                 "How far over its limits NVML may show a pod before it counts as over (memory "
                 "the library does not charge: module code, the CUDA runtime's reservations)")
      ->capture_default_str();
  app.add_option("--mig-apply-lock", f.mig_apply_lock,
                 "Dynamic MIG's apply lock file (the device plugin's --mig-apply-lock): passes "
                 "wait while it is held")
      ->capture_default_str();
  app.add_flag("--once", f.once, "Run one pass, print the metrics to stdout and exit");
}

Result<AgentSettings> settle(const AgentFlags& f) {
  AgentSettings s{.options = f.options,
                  .bind = f.bind,
                  .nvml_path = f.no_nvml ? "" : f.nvml_path,
                  .pod_names = f.pod_names,
                  .kubeconfig = f.kubeconfig,
                  .legacy = f.legacy,
                  .once = f.once,
                  .http_memory_budget = f.http_memory_budget,
                  .mig_apply_lock = f.mig_apply_lock};
  AgentOptions& opt = s.options;
  opt.write_back = !f.read_only;
  if (opt.node_name.empty()) opt.node_name = hostname();
  opt.over_limit_action =
      f.over_limit_action == "kill" ? OverLimitAction::kKill : OverLimitAction::kReport;
  auto margin = parse_size(f.over_limit_margin);
  if (!margin) return Error{"--over-limit-margin: " + margin.error().message};
  opt.over_limit_margin = *margin;

  auto interval = parse_duration(f.interval);
  auto resync = parse_duration(f.resync);
  auto read_timeout = parse_duration(f.read_timeout);
  auto idle_timeout = parse_duration(f.idle_timeout);
  for (auto* r : {&interval, &resync, &read_timeout, &idle_timeout}) {
    if (!*r) return r->error();
  }
  if (interval->count() < 100'000) return Error{"--interval must be at least 100ms"};
  if (auto b = parse_bind_address(f.bind); !b) {
    return Error{"--metrics-bind-address: " + b.error().message};
  }
  using std::chrono::duration_cast;
  s.interval = duration_cast<std::chrono::milliseconds>(*interval);
  s.resync = duration_cast<std::chrono::seconds>(*resync);
  s.read_timeout = duration_cast<std::chrono::milliseconds>(*read_timeout);
  s.idle_timeout = duration_cast<std::chrono::milliseconds>(*idle_timeout);
  s.summary = "node " + opt.node_name + ", hook path " + opt.hook_path + ", metrics on " + f.bind +
              ", pod names " + f.pod_names + (f.legacy ? ", legacy metrics" : "");
  return s;
}

}  // namespace hami::monitor
