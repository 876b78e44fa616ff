// hami-node-agent: the per-node daemon that accounts GPU use per container,
// resolves host PIDs, runs the priority/contention feedback loop and serves
// Prometheus metrics. docs/node-agent.md describes it; --help lists the flags.
// Takes upstream vGPUmonitor's flags too (klog's -v, --legacy-metrics;
// docs/operations.md); --check-flags stops after validating them.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>

#include "common/bind_address.hpp"
#include "common/go_flags.hpp"
#include "common/log.hpp"
#include "common/size_parse.hpp"
#include "monitor/agent.hpp"
#include "monitor/http_endpoints.hpp"
#include "monitor/metrics.hpp"
#include "monitor/nvml_sampler.hpp"
#include "monitor/pod_directory_k8s.hpp"

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

hami::log::Level parse_level(const std::string& s) {
  if (s == "error") return hami::log::Level::kError;
  if (s == "warn") return hami::log::Level::kWarn;
  if (s == "debug") return hami::log::Level::kDebug;
  return hami::log::Level::kInfo;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace hami;  // NOLINT
  CLI::App app{
      "hami-node-agent: per-container GPU accounting, host-PID mapping, the priority and\n"
      "contention feedback loop, and Prometheus metrics for one node.\n"
      "Runs in the host PID namespace (hostPID: true) with the containers' state\n"
      "directory mounted. Exit codes: 0 stopped by signal, 2 usage error, 1 start-up failure."};
  app.set_version_flag("--version", std::string(HAMI_VERSION));

  monitor::AgentOptions opt;
  opt.hook_path = env_or("HOOK_PATH", "/usr/local/vgpu");
  opt.node_name = env_or("NODE_NAME", "");
  std::string bind = ":9394";
  std::string interval_text = "5s";
  std::string nvml_path = "libnvidia-ml.so.1";
  bool no_nvml = false;
  std::string pod_names = "auto";
  std::string kubeconfig = env_or("KUBECONFIG", "");
  std::string resync_text = env_or("HAMI_RESYNC_INTERVAL", "5m");
  bool legacy = false;
  bool read_only = false;
  bool once = false;
  std::string level = "info";
  std::string read_timeout_text = "10s";
  std::string idle_timeout_text = "60s";
  std::string over_limit_action = "report";
  std::string over_limit_margin = "256m";

  app.add_option("--hook-path", opt.hook_path,
                 "Directory holding containers/<podUID>_<container>/ (env HOOK_PATH)")
      ->capture_default_str();
  app.add_option("--metrics-bind-address", bind, "Where to serve /metrics, /healthz, /containers")
      ->capture_default_str();
  app.add_option("--interval", interval_text,
                 "Period of the pass: read files, sample GPUs, feedback (e.g. 5s, 1s, 500ms)")
      ->capture_default_str();
  app.add_option("--node-name", opt.node_name,
                 "This node's name (env NODE_NAME; default hostname)");
  app.add_option("--proc-root", opt.proc_root, "The host's /proc")->capture_default_str();
  app.add_option("--nvml-library", nvml_path, "NVML library to dlopen")->capture_default_str();
  app.add_flag("--no-nvml", no_nvml,
               "Do not use NVML: no host GPU metrics and no per-process utilisation");
  app.add_option("--pod-names", pod_names,
                 "Where pod namespace/name come from: api (the API server, pods of this node "
                 "only), none (label by pod UID), auto (api when a cluster config is found)")
      ->check(CLI::IsMember({"auto", "api", "none"}))
      ->capture_default_str();
  app.add_option("--kubeconfig", kubeconfig, "Kubeconfig (env KUBECONFIG; default in-cluster)");
  app.add_option("--resync-interval", resync_text,
                 "How often the pod list is re-read even when no new pod appears "
                 "(env HAMI_RESYNC_INTERVAL)")
      ->capture_default_str();
  app.add_option("--http-read-timeout", read_timeout_text,
                 "A request must arrive whole within this of its first byte")
      ->capture_default_str();
  app.add_option("--http-idle-timeout", idle_timeout_text,
                 "A kept-alive connection idle for this long is closed")
      ->capture_default_str();
  app.add_flag("--legacy-metrics", legacy, "Also export upstream's old metric names");
  app.add_flag("--read-only", read_only,
               "Never write a state file (no host PIDs, utilisation or feedback written back)");
  app.add_option("--max-containers", opt.limits.containers,
                 "Containers read per pass at most; more are logged and counted "
                 "(hami_monitor_containers_skipped)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 20))
      ->capture_default_str();
  app.add_option("--over-limit-action", over_limit_action,
                 "When NVML shows a pod's processes on a GPU over the pod's memory limits there "
                 "(plus the margin) for two passes: report (hami_pod_memory_over_limit and a log "
                 "line) or kill (also SIGKILL those processes)")
      ->check(CLI::IsMember({"report", "kill"}))
      ->capture_default_str();
  app.add_option("--over-limit-margin", over_limit_margin,
                 "How far over its limits NVML may show a pod before it counts as over (memory "
                 "the library does not charge: module code, the CUDA runtime's reservations)")
      ->capture_default_str();
  app.add_flag("--once", once, "Run one pass, print the metrics to stdout and exit");
  app.add_option("--log-level", level, "error, warn, info or debug")
      ->check(CLI::IsMember({"error", "warn", "info", "debug"}))
      ->capture_default_str();
  bool check_flags = false;
  app.add_flag("--check-flags", check_flags,
               "Validate the flags and environment, print what would run, exit 0 (2 if bad); "
               "reads and contacts nothing");
  int klog_v = 0;
  app.add_option("-v,--v", klog_v, "klog verbosity: 0-3 log as info, 4 and more as debug")
      ->check(CLI::Range(0, 1000))
      ->group("Upstream compatibility (vGPUmonitor's flags, same meaning)");

  try {
    goflags::Argv args(argc, argv);
    app.parse(args.argc(), args.argv());
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  log::set_component("hami-node-agent");
  auto log_level = parse_level(level);
  if (app.count("--v") > 0)
    log_level = goflags::most_verbose(log_level, goflags::klog_level(klog_v));
  log::set_level(log_level);
  opt.write_back = !read_only;
  if (opt.node_name.empty()) opt.node_name = hostname();

  opt.over_limit_action = over_limit_action == "kill" ? monitor::OverLimitAction::kKill
                                                      : monitor::OverLimitAction::kReport;
  if (auto margin = parse_size(over_limit_margin); !margin) {
    std::fprintf(stderr, "hami-node-agent: --over-limit-margin: %s\n",
                 margin.error().message.c_str());
    return 2;
  } else {
    opt.over_limit_margin = *margin;
  }

  auto interval = parse_duration(interval_text);
  auto resync = parse_duration(resync_text);
  auto read_timeout = parse_duration(read_timeout_text);
  auto idle_timeout = parse_duration(idle_timeout_text);
  for (auto* r : {&interval, &resync, &read_timeout, &idle_timeout}) {
    if (!*r) {
      std::fprintf(stderr, "hami-node-agent: %s\n", r->error().message.c_str());
      return 2;
    }
  }
  if (read_timeout->count() <= 0 || idle_timeout->count() <= 0) {
    std::fprintf(stderr,
                 "hami-node-agent: --http-read-timeout and --http-idle-timeout must be more than "
                 "zero\n");
    return 2;
  }
  if (interval->count() < 100'000) {
    std::fprintf(stderr, "hami-node-agent: --interval must be at least 100ms\n");
    return 2;
  }
  if (auto b = parse_bind_address(bind); !b) {
    std::fprintf(stderr, "hami-node-agent: --metrics-bind-address: %s\n",
                 b.error().message.c_str());
    return 2;
  }
  if (check_flags) {
    std::printf(
        "hami-node-agent: flags ok: node %s, hook path %s, metrics on %s, pod names %s, "
        "log level %d%s\n",
        opt.node_name.c_str(), opt.hook_path.c_str(), bind.c_str(), pod_names.c_str(),
        static_cast<int>(log_level), legacy ? ", legacy metrics" : "");
    return 0;
  }

  // Signals are taken by one thread with sigwait, so no handler runs inside
  // the agent's or the HTTP server's code.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  // A peer that closes while we write (the API server's TLS connections
  // through OpenSSL, which writes without MSG_NOSIGNAL) must be an error on
  // that connection, not the end of the process.
  ::signal(SIGPIPE, SIG_IGN);

  std::unique_ptr<monitor::GpuSampler> sampler;
  if (!no_nvml) {
    auto s = monitor::NvmlSampler::open(nvml_path);
    if (!s) {
      log::error("%s; continuing without GPU metrics (pass --no-nvml to silence this)",
                 s.error().message.c_str());
    } else {
      sampler = std::move(*s);
    }
  }

  std::unique_ptr<monitor::PodDirectory> names;
  if (pod_names != "none") {
    auto d = monitor::make_k8s_pod_directory(
        kubeconfig, opt.node_name, std::chrono::duration_cast<std::chrono::seconds>(*resync));
    if (!d) {
      if (pod_names == "api") {
        log::error("%s", d.error().message.c_str());
        return 1;
      }
      log::info("no cluster configuration (%s): labelling containers by pod UID",
                d.error().message.c_str());
    } else {
      names = std::move(*d);
    }
  }

  monitor::Agent agent(opt, std::move(sampler), names.get());
  const monitor::MetricsOptions metrics{.version = HAMI_VERSION, .legacy = legacy};
  if (once) {
    agent.run_pass();
    const std::string text = monitor::render_metrics(*agent.latest(), metrics);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }

  const auto period = std::chrono::duration_cast<std::chrono::milliseconds>(*interval);
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  monitor::HttpEndpoints http(agent, {.bind = bind,
                                      .interval = period,
                                      .metrics = metrics,
                                      .request_timeout = duration_cast<milliseconds>(*read_timeout),
                                      .idle_timeout = duration_cast<milliseconds>(*idle_timeout)});
  if (auto ok = http.start(); !ok) {
    log::error("%s", ok.error().message.c_str());
    return 1;
  }

  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  std::thread signals([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    log::info("signal %d: stopping", sig);
    std::lock_guard<std::mutex> lock(mu);
    stopping = true;
    cv.notify_all();
  });

  log::info("watching %s/containers every %lld ms on node %s", opt.hook_path.c_str(),
            static_cast<long long>(period.count()), opt.node_name.c_str());
  std::unique_lock<std::mutex> lock(mu);
  while (!stopping) {
    lock.unlock();
    auto v = agent.run_pass();
    log::debug("pass %llu: %zu containers, %zu GPUs, %lld us",
               static_cast<unsigned long long>(v->counters.passes), v->containers.size(),
               v->gpus.size(), static_cast<long long>(v->pass_duration.count()));
    lock.lock();
    cv.wait_for(lock, period, [&] { return stopping; });
  }
  lock.unlock();
  http.stop();
  signals.join();
  return 0;
}
