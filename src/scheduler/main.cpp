// hami-scheduler: the HAMi scheduler extender and mutating webhook in C++ (see
// docs/scheduler.md). Watches nodes and pods into an incremental cache,
// answers kube-scheduler's filter/prioritize/bind and the API server's
// AdmissionReview over HTTPS, and binds only while it leads (Lease).
// Takes upstream's flags too (common/go_flags.hpp, docs/operations.md);
// --check-flags stops after validating them.
// Exit codes: 0 after SIGTERM/SIGINT, 1 when it cannot run, 2 for bad flags.
#include <signal.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include "common/bind_address.hpp"
#include "common/duration_flag.hpp"
#include "common/go_flags.hpp"
#include "common/log.hpp"
#include "common/size_parse.hpp"
#include "k8s/client.hpp"
#include "k8s/config.hpp"
#include "k8s/leader_election.hpp"
#include "k8s/paths.hpp"
#include "k8s/reflector.hpp"
#include "scheduler/cache.hpp"
#include "scheduler/events.hpp"
#include "scheduler/extender.hpp"
#include "scheduler/feed.hpp"
#include "scheduler/k8s_backend.hpp"
#include "scheduler/node_selector.hpp"
#include "scheduler/parallel.hpp"
#include "scheduler/quota.hpp"
#include "scheduler/server.hpp"
#include "scheduler/stale_locks.hpp"

namespace {

constexpr int kExitUsage = 2;
constexpr const char* kUpstream = "Upstream compatibility (HAMi's flags, same meaning)";

std::string default_identity() {
  if (const char* p = std::getenv("POD_NAME"); p && *p) return p;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0 && host[0]) return host;
  return "hami-scheduler";
}

}  // namespace

int main(int argc, char** argv) try {
  using namespace hami::scheduler;
  hami::log::set_component("hami-scheduler");
  CLI::App app{
      "hami-scheduler: the HAMi scheduler extender (filter, prioritize, bind) and mutating "
      "webhook, over HTTPS.\nExit codes: 0 stopped by a signal, 1 cannot run, 2 bad flags or "
      "config."};
  app.set_version_flag("--version", std::string(HAMI_VERSION));
  app.get_formatter()->column_width(40);

  SchedulerConfig cfg;
  ServerOptions so;
  std::string kubeconfig, device_config, node_policy = "binpack", gpu_policy = "spread";
  std::string lock_timeout = "5m";
  std::string lock_wait = "2s";
  bool bind_redirect = true;
  bool leader_elect = false;
  std::string lease_name = "hami-scheduler";
  const char* pod_ns = std::getenv("POD_NAMESPACE");
  std::string lease_ns = pod_ns && *pod_ns ? pod_ns : "kube-system";
  std::string identity = default_identity();
  std::string lease_duration = "15s", renew_deadline = "10s", retry_period = "2s";
  int log_level = 3;

  app.add_option("--http_bind,--http-bind", so.bind, "Address of the extender and webhook")
      ->capture_default_str();
  app.add_option("--cert_file,--cert-file", so.cert_file, "TLS certificate (PEM); with --key_file");
  app.add_option("--key_file,--key-file", so.key_file, "TLS private key (PEM)");
  app.add_option("--client-ca-file", so.client_ca_file,
                 "CA (PEM) of the client certificates /filter, /prioritize and /bind accept "
                 "(kube-scheduler's extender tlsConfig certFile); unset: those routes are open");
  std::string read_timeout = "10s", idle_timeout = "60s";
  app.add_option("--http-read-timeout", read_timeout,
                 "A request must arrive whole within this of its first byte")
      ->check(hami::duration_flag())
      ->capture_default_str();
  app.add_option("--http-idle-timeout", idle_timeout,
                 "A kept-alive connection idle for this long is closed")
      ->check(hami::duration_flag())
      ->capture_default_str();
  app.add_option("--metrics-bind-address", so.metrics_bind,
                 "Address of /metrics (\"none\": no listener)")
      ->capture_default_str();
  app.add_option("--scheduler-name", cfg.scheduler_name, "Set on pods by the webhook")
      ->capture_default_str();
  app.add_option("--node-scheduler-policy", node_policy, "binpack or spread")
      ->capture_default_str();
  app.add_option("--gpu-scheduler-policy", gpu_policy,
                 "binpack, spread, mutex, topology-aware, numa, or a chain like numa,binpack")
      ->capture_default_str();
  app.add_option("--node-lock-timeout", lock_timeout,
                 "A node lock older than this is stale (env HAMI_NODELOCK_EXPIRE)")
      ->envname("HAMI_NODELOCK_EXPIRE")
      ->check(hami::duration_flag())
      ->capture_default_str();
  app.add_option("--node-lock-wait", lock_wait,
                 "How long bind waits for a node lock another pod holds (0: fail at once)")
      ->check(hami::duration_flag(/*allow_zero=*/true))
      ->capture_default_str();
  app.add_option("--bind-redirect", bind_redirect,
                 "When kube-scheduler's node no longer fits or is locked, bind to the best other "
                 "node the pod's filter found fitting")
      ->capture_default_str();
  app.add_flag("--force-overwrite-default-scheduler", cfg.force_overwrite_default_scheduler,
               "Take pods whose schedulerName is default-scheduler (=false: leave them)")
      ->capture_default_str();
  app.add_option("--device-config-file", device_config, "Upstream's device config YAML");
  app.add_option("--kubeconfig", kubeconfig, "kubeconfig (default: in-cluster, then $KUBECONFIG)");
  app.add_flag("--leader-elect", leader_elect, "Bind only while holding the Lease");
  app.add_option("--leader-elect-resource-name", lease_name)->capture_default_str();
  app.add_option("--leader-elect-resource-namespace", lease_ns)->capture_default_str();
  app.add_option("--leader-elect-identity", identity, "Default: $POD_NAME, else the host name")
      ->capture_default_str();
  app.add_option("--leader-elect-lease-duration", lease_duration)
      ->check(hami::duration_flag())
      ->capture_default_str();
  app.add_option("--leader-elect-renew-deadline", renew_deadline)
      ->check(hami::duration_flag())
      ->capture_default_str();
  app.add_option("--leader-elect-retry-period", retry_period)
      ->check(hami::duration_flag())
      ->capture_default_str();
  app.add_option("--log-level", log_level,
                 "0 silent, 1 errors, 2 + warnings, 3 + what happened, 4 + debug")
      ->check(CLI::Range(0, 4))
      ->capture_default_str();
  bool check_flags = false;
  app.add_flag("--check-flags", check_flags,
               "Validate the flags, files and environment, print what would run, exit 0 (2 if "
               "bad); contacts nothing");

  // Upstream's own spellings: klog, vendors, --debug, --legacy-metrics.
  int klog_v = 0;
  bool debug = false, enable_ascend = false, enable_iluvatar = false;
  std::string node_label_selector;
  app.add_option("-v,--v", klog_v, "klog verbosity: 0-3 log as --log-level=3, 4 and more as 4")
      ->check(CLI::Range(0, 1000))
      ->group(kUpstream);
  app.add_flag("--debug", debug, "Same as --log-level=4")->group(kUpstream);
  app.add_flag("--legacy-metrics", cfg.legacy_metrics, "Also export upstream's legacy metric names")
      ->group(kUpstream);
  app.add_option("--node-label-selector", node_label_selector,
                 "key=value[,key=value]: schedule only onto nodes with all these labels")
      ->group(kUpstream);
  app.add_flag("--enable-ascend", enable_ascend, "Only false: no Ascend NPUs in this build")
      ->group(kUpstream);
  app.add_flag("--enable-iluvatar", enable_iluvatar, "Only false: no Iluvatar GPUs in this build")
      ->group(kUpstream);
  try {
    hami::goflags::Argv args(argc, argv);
    app.parse(args.argc(), args.argv());
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : kExitUsage;
  }
  auto level = static_cast<hami::log::Level>(log_level);
  if (app.count("--v") > 0) {
    level = hami::goflags::most_verbose(level, hami::goflags::klog_level(klog_v));
  }
  if (debug) level = hami::log::Level::kDebug;
  hami::log::set_level(level);
  auto usage = [](const std::string& m) {
    std::cerr << "hami-scheduler: " << m << "\n";
    return kExitUsage;
  };
  if (enable_ascend) {
    return usage(
        hami::goflags::not_supported("--enable-ascend=true",
                                     "this build schedules NVIDIA GPUs only; remove the flag "
                                     "(upstream's chart: devices.ascend.enabled=false)"));
  }
  if (enable_iluvatar) {
    return usage(
        hami::goflags::not_supported("--enable-iluvatar=true",
                                     "this build schedules NVIDIA GPUs only; remove the flag "
                                     "(upstream's chart: devices.iluvatar.enabled=false)"));
  }
  auto selector = NodeLabelSelector::parse(node_label_selector);
  if (!selector) return usage("--node-label-selector: " + selector.error().message);
  if (so.metrics_bind == "none") so.metrics_bind.clear();
  if (auto b = hami::parse_bind_address(so.bind); !b) {
    return usage("--http_bind: " + b.error().message);
  }
  if (!so.metrics_bind.empty()) {
    if (auto b = hami::parse_bind_address(so.metrics_bind); !b) {
      return usage("--metrics-bind-address: " + b.error().message);
    }
  }
  if (so.cert_file.empty() != so.key_file.empty()) {
    return usage("--cert_file and --key_file must be given together");
  }
  for (const auto* f : {&so.cert_file, &so.key_file, &so.client_ca_file}) {
    if (!f->empty() && !std::ifstream(*f)) return usage(*f + ": cannot be read");
  }
  auto np = hami::fit::parse_node_policy(node_policy);
  if (!np) return usage("--node-scheduler-policy: " + np.error().message);
  auto gp = hami::fit::parse_gpu_policy(gpu_policy);
  if (!gp) return usage("--gpu-scheduler-policy: " + gp.error().message);
  cfg.policy = {*np, *gp};
  cfg.node_lock_timeout =
      std::chrono::duration_cast<std::chrono::seconds>(*hami::parse_duration(lock_timeout));
  cfg.node_lock_wait =
      std::chrono::duration_cast<std::chrono::milliseconds>(*hami::parse_duration(lock_wait));
  so.request_timeout =
      std::chrono::duration_cast<std::chrono::milliseconds>(*hami::parse_duration(read_timeout));
  so.idle_timeout =
      std::chrono::duration_cast<std::chrono::milliseconds>(*hami::parse_duration(idle_timeout));
  cfg.bind_redirect = bind_redirect;
  if (!device_config.empty()) {
    if (auto r = apply_device_config_file(cfg, device_config); !r) return usage(r.error().message);
  }
  if (check_flags) {
    std::cout << "hami-scheduler: flags ok: " << (so.cert_file.empty() ? "http" : "https") << " on "
              << so.bind << ", metrics on "
              << (so.metrics_bind.empty() ? "(none)" : so.metrics_bind) << ", scheduler name "
              << cfg.scheduler_name << ", policies " << node_policy << "/" << gpu_policy
              << ", leader election " << (leader_elect ? lease_ns + "/" + lease_name : "off")
              << ", node lock timeout " << lock_timeout << ", nodes "
              << (selector->empty() ? "all" : selector->describe()) << ", log level "
              << static_cast<int>(level) << (cfg.legacy_metrics ? ", legacy metrics" : "") << "\n";
    return 0;
  }
  auto secs = [](const std::string& s) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(*hami::parse_duration(s));
  };

  // Signals go to sigwait on this thread only.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // A peer that closes while we write (the API server's TLS connections
  // through OpenSSL, which writes without MSG_NOSIGNAL) must be an error on
  // that connection, not the end of the process.
  ::signal(SIGPIPE, SIG_IGN);

  auto kc = hami::k8s::Config::auto_detect(
      kubeconfig.empty() ? std::nullopt : std::optional<std::string>(kubeconfig));
  if (!kc) {
    std::cerr << "hami-scheduler: Kubernetes config: " << kc.error().message << "\n";
    return 1;
  }
  auto client = hami::k8s::Client::from_config(*kc);
  if (!client) {
    std::cerr << "hami-scheduler: Kubernetes client: " << client.error().message << "\n";
    return 1;
  }

  ClusterCache cache;
  CacheFeed feed(cache);
  NodeFeedFilter node_feed(*selector, feed);
  Metrics metrics;
  K8sBindBackend backend(*client, cfg.node_lock_timeout);
  Extender extender(cache, cfg, &backend, &metrics);
  // Events and pod labels, written off the request path.
  EventRecorder events(&*client, {.component = cfg.scheduler_name, .instance = identity});
  extender.set_events(&events);
  metrics.set_events(&events);
  QuotaTracker quotas(cfg.resources);
  extender.set_quotas(&quotas);
  metrics.set_quotas(&quotas);
  so.quotas = &quotas;
  // Upstream's leader label on this replica's own pod, which its chart's
  // Service selects (hami.io/scheduler-role=leader).
  const char* own_pod = std::getenv("POD_NAME");
  auto set_role = [&](bool leader) {
    if (own_pod == nullptr || *own_pod == 0 || pod_ns == nullptr || *pod_ns == 0) return;
    events.label_pod(pod_ns, own_pod, {{"hami.io/scheduler-role", leader ? "leader" : "follower"}});
  };
  // One request's nodes split over every core (the request's thread + these).
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  ParallelFor pool(cores - 1);
  extender.set_pool(&pool);

  using nlohmann::json;
  std::optional<hami::k8s::LeaderElector> elector;
  auto extender_leads = [&] { return !elector || elector->is_leader(); };
  // Locks left by binds cut short (this process killed mid-bind) whose pods
  // a retry bound elsewhere; only the leader writes.
  StaleLocks stale([&](const std::string& node, const std::string& ns, const std::string& pod) {
    if (extender_leads()) backend.unlock_node(node, ns, pod);
  });
  extender.set_lock_holders([&](const std::string& node) { return stale.holder(node); });
  hami::k8s::Reflector nodes(*client, hami::k8s::node_path(), {},
                             {.on_add =
                                  [&](const json& n) {
                                    node_feed.add(n);
                                    stale.node_seen(n);
                                  },
                              .on_update =
                                  [&](const json& o, const json& n) {
                                    node_feed.update(o, n);
                                    stale.node_seen(n);
                                  },
                              .on_delete =
                                  [&](const json& n) {
                                    node_feed.remove(n);
                                    stale.node_gone(n);
                                  }});
  hami::k8s::Reflector pods(*client, hami::k8s::core_path("pods"), {},
                            {.on_add =
                                 [&](const json& p) {
                                   feed.pod_changed(p);
                                   stale.pod_seen(p);
                                 },
                             .on_update =
                                 [&](const json&, const json& p) {
                                   feed.pod_changed(p);
                                   stale.pod_seen(p);
                                 },
                             .on_delete =
                                 [&](const json& p) {
                                   feed.pod_deleted(p);
                                   stale.pod_gone(p);
                                 }});
  // Namespace quotas on gpumem/gpucores (limits.nvidia.com/gpumem, ...).
  hami::k8s::Reflector resource_quotas(
      *client, hami::k8s::core_path("resourcequotas"), {},
      {.on_add = [&](const json& q) { quotas.quota_changed(q); },
       .on_update = [&](const json&, const json& q) { quotas.quota_changed(q); },
       .on_delete = [&](const json& q) { quotas.quota_deleted(q); }});
  backend.set_node_source([&](const std::string& n) { return nodes.get("", n); });
  nodes.start();
  pods.start();
  resource_quotas.start();

  if (leader_elect) {
    elector.emplace(*client,
                    hami::k8s::LeaderElectionConfig{
                        .lease_namespace = lease_ns,
                        .lease_name = lease_name,
                        .identity = identity,
                        .lease_duration =
                            std::chrono::duration_cast<std::chrono::seconds>(secs(lease_duration)),
                        .renew_deadline = secs(renew_deadline),
                        .retry_period = secs(retry_period),
                        .on_started_leading =
                            [&] {
                              metrics.set_leader(true);
                              set_role(true);
                              hami::log::info("%s: leading; binding", identity.c_str());
                            },
                        .on_stopped_leading =
                            [&] {
                              metrics.set_leader(false);
                              set_role(false);
                              hami::log::info("%s: not leading; bind refused", identity.c_str());
                            }});
    extender.set_leader_check([&] { return elector->is_leader(); });
    set_role(false);
    elector->start();
  } else {
    metrics.set_leader(true);
    set_role(true);
  }
  so.ready = [&] {
    return nodes.has_synced() && pods.has_synced() && resource_quotas.has_synced();
  };
  SchedulerServer server(extender, cfg, metrics, cache, so);
  if (auto r = server.start(); !r) {
    std::cerr << "hami-scheduler: " << r.error().message << "\n";
    return 1;
  }
  int sig = 0;
  sigwait(&set, &sig);
  hami::log::info("signal %d: shutting down", sig);
  server.stop();
  if (elector) elector->stop();
  resource_quotas.stop();
  pods.stop();
  nodes.stop();
  return 0;
} catch (const std::exception& e) {
  std::cerr << "hami-scheduler: " << e.what() << "\n";
  return 1;
}
