#include "scheduler/flags.hpp"

#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "common/bind_address.hpp"
#include "common/duration_flag.hpp"
#include "common/go_flags.hpp"
#include "common/size_parse.hpp"

namespace hami::scheduler {

namespace {

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

std::string default_identity() {
  if (const char* p = std::getenv("POD_NAME"); p && *p) return p;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0 && host[0]) return host;
  return "hami-scheduler";
}

std::chrono::milliseconds ms(const std::string& s) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(*parse_duration(s));
}

}  // namespace

void add_flags(daemon::StartUp& start, SchedulerFlags& f) {
  CLI::App& app = start.app();
  f.lease_ns = env_or("POD_NAMESPACE", "kube-system");
  f.identity = default_identity();
  ServerOptions& so = f.server;
  SchedulerConfig& cfg = f.config;
  app.add_option("--http_bind,--http-bind", so.bind, "Address of the extender and webhook")
      ->capture_default_str();
  app.add_option("--cert_file,--cert-file", so.cert_file, "TLS certificate (PEM); with --key_file");
  app.add_option("--key_file,--key-file", so.key_file, "TLS private key (PEM)");
  app.add_option("--client-ca-file", so.client_ca_file,
                 "CA (PEM) of the client certificates /filter, /prioritize and /bind accept "
                 "(kube-scheduler's extender tlsConfig certFile); unset: those routes are open");
  daemon::add_http_timeout_flags(app, f.read_timeout, f.idle_timeout);
  daemon::add_http_memory_budget_flag(app, so.memory_budget, kLargestRequestBody);
  app.add_option("--metrics-bind-address", so.metrics_bind,
                 "Address of /metrics (\"none\": no listener)")
      ->capture_default_str();
  app.add_option("--scheduler-name", cfg.scheduler_name, "Set on pods by the webhook")
      ->capture_default_str();
  app.add_option("--node-scheduler-policy", f.node_policy, "binpack or spread")
      ->capture_default_str();
  app.add_option("--gpu-scheduler-policy", f.gpu_policy,
                 "binpack, spread, mutex, topology-aware, numa, or a chain like numa,binpack")
      ->capture_default_str();
  app.add_option("--node-lock-timeout", f.lock_timeout,
                 "A node lock older than this is stale (env HAMI_NODELOCK_EXPIRE)")
      ->envname("HAMI_NODELOCK_EXPIRE")
      ->check(duration_flag())
      ->capture_default_str();
  app.add_option("--node-lock-wait", f.lock_wait,
                 "How long bind waits for a node lock another pod holds (0: fail at once)")
      ->check(duration_flag(/*allow_zero=*/true))
      ->capture_default_str();
  app.add_option("--extender-http-timeout", f.extender_http_timeout,
                 "kube-scheduler's httpTimeout for this extender (its scheduler config): a bind "
                 "answers within a third of it, at most 10s, or fails so that the pod is retried")
      ->check(duration_flag())
      ->capture_default_str();
  app.add_option("--bind-redirect", f.bind_redirect,
                 "When kube-scheduler's node no longer fits or is locked, bind to the best other "
                 "node the pod's filter found fitting")
      ->capture_default_str();
  app.add_flag("--force-overwrite-default-scheduler", cfg.force_overwrite_default_scheduler,
               "Take pods whose schedulerName is default-scheduler (=false: leave them)")
      ->capture_default_str();
  app.add_option("--decision-key-file", f.decision_key_file,
                 "Key(s) bind signs its decisions with and the cache checks them by, one per "
                 "line, the first signs (the device plugins get the same file); unset: nothing "
                 "is signed and only --trusted-schedulers decide");
  app.add_option_function<std::string>(
         "--trusted-schedulers",
         [&f](const std::string& v) {
           f.trusted_schedulers = v;
           f.trusted_schedulers_given = true;
         },
         "Comma-separated schedulerName values whose unsigned GPU decisions the cache counts "
         "on bound pods (upstream HAMi's scheduler in a mixed cluster). Default: none with "
         "--decision-key-file, else --scheduler-name")
      ->type_name("NAMES");
  app.add_option("--decision-writers", f.decision_writers,
                 "Comma-separated users (AdmissionReview userInfo.username, e.g. "
                 "system:serviceaccount:<ns>:<name>) the webhook lets set, change or remove the "
                 "hami.io decision annotations; everyone else is refused");
  app.add_option("--gpu-pod-seccomp", cfg.gpu_pod_seccomp,
                 "The webhook on GPU pods' seccomp profiles: enforce (RuntimeDefault where none "
                 "is set; Unconfined and the SYS_ADMIN capability refused), default "
                 "(RuntimeDefault where none is set) or off")
      ->check(CLI::IsMember({"enforce", "default", "off"}))
      ->capture_default_str();
  app.add_option("--device-config-file", f.device_config, "Upstream's device config YAML");
  app.add_option("--kubeconfig", f.kubeconfig,
                 "kubeconfig (default: in-cluster, then $KUBECONFIG)");
  app.add_flag("--leader-elect", f.leader_elect, "Bind only while holding the Lease");
  app.add_option("--leader-elect-resource-name", f.lease_name)->capture_default_str();
  app.add_option("--leader-elect-resource-namespace", f.lease_ns)->capture_default_str();
  app.add_option("--leader-elect-identity", f.identity, "Default: $POD_NAME, else the host name")
      ->capture_default_str();
  app.add_option("--leader-elect-lease-duration", f.lease_duration)
      ->check(duration_flag())
      ->capture_default_str();
  app.add_option("--leader-elect-renew-deadline", f.renew_deadline)
      ->check(duration_flag())
      ->capture_default_str();
  app.add_option("--leader-elect-retry-period", f.retry_period)
      ->check(duration_flag())
      ->capture_default_str();

  // Upstream's own spellings beside klog's -v: vendors, --debug, --legacy-metrics.
  const std::string& upstream = start.upstream_group();
  app.add_flag("--debug", f.debug, "Same as --log-level=debug")->group(upstream);
  app.add_flag("--legacy-metrics", cfg.legacy_metrics, "Also export upstream's legacy metric names")
      ->group(upstream);
  app.add_option("--node-label-selector", f.node_label_selector,
                 "key=value[,key=value]: schedule only onto nodes with all these labels")
      ->group(upstream);
  app.add_flag("--enable-ascend", f.enable_ascend, "Only false: no Ascend NPUs in this build")
      ->group(upstream);
  app.add_flag("--enable-iluvatar", f.enable_iluvatar, "Only false: no Iluvatar GPUs in this build")
      ->group(upstream);
}

Result<SchedulerSettings> settle(const SchedulerFlags& f) {
  if (f.enable_ascend) {
    return Error{goflags::not_supported("--enable-ascend=true",
                                        "this build schedules NVIDIA GPUs only; remove the flag "
                                        "(upstream's chart: devices.ascend.enabled=false)")};
  }
  if (f.enable_iluvatar) {
    return Error{goflags::not_supported("--enable-iluvatar=true",
                                        "this build schedules NVIDIA GPUs only; remove the flag "
                                        "(upstream's chart: devices.iluvatar.enabled=false)")};
  }
  auto selector = NodeLabelSelector::parse(f.node_label_selector);
  if (!selector) return Error{"--node-label-selector: " + selector.error().message};
  SchedulerSettings s{.config = f.config, .server = f.server, .nodes = std::move(*selector)};
  ServerOptions& so = s.server;
  if (so.metrics_bind == "none") so.metrics_bind.clear();
  if (auto b = parse_bind_address(so.bind); !b) return Error{"--http_bind: " + b.error().message};
  if (!so.metrics_bind.empty()) {
    if (auto b = parse_bind_address(so.metrics_bind); !b) {
      return Error{"--metrics-bind-address: " + b.error().message};
    }
  }
  if (so.cert_file.empty() != so.key_file.empty()) {
    return Error{"--cert_file and --key_file must be given together"};
  }
  for (const auto* file : {&so.cert_file, &so.key_file, &so.client_ca_file}) {
    if (!file->empty() && !std::ifstream(*file)) return Error{*file + ": cannot be read"};
  }
  auto np = fit::parse_node_policy(f.node_policy);
  if (!np) return Error{"--node-scheduler-policy: " + np.error().message};
  auto gp = fit::parse_gpu_policy(f.gpu_policy);
  if (!gp) return Error{"--gpu-scheduler-policy: " + gp.error().message};
  SchedulerConfig& cfg = s.config;
  cfg.policy = {*np, *gp};
  cfg.node_lock_timeout = std::chrono::duration_cast<std::chrono::seconds>(ms(f.lock_timeout));
  cfg.node_lock_wait = ms(f.lock_wait);
  cfg.bind_deadline = bind_deadline_for(ms(f.extender_http_timeout));
  cfg.bind_redirect = f.bind_redirect;
  so.request_timeout = ms(f.read_timeout);
  so.idle_timeout = ms(f.idle_timeout);
  if (!f.device_config.empty()) {
    if (auto r = apply_device_config_file(cfg, f.device_config); !r) return r.error();
  }
  if (!f.decision_key_file.empty()) {
    auto keys = protocol::DecisionKeys::load(f.decision_key_file);
    if (!keys) return Error{"--decision-key-file: " + keys.error().message};
    cfg.decisions.keys = std::move(*keys);
  }
  if (f.trusted_schedulers_given) {
    cfg.decisions.unsigned_schedulers = protocol::parse_name_list(f.trusted_schedulers);
  } else if (cfg.decisions.keys) {
    cfg.decisions.unsigned_schedulers.clear();
  } else {
    cfg.decisions.unsigned_schedulers = {cfg.scheduler_name};
  }
  cfg.decision_writers = protocol::parse_name_list(f.decision_writers);
  s.kubeconfig = f.kubeconfig;
  s.leader_elect = f.leader_elect;
  s.lease_ns = f.lease_ns;
  s.lease_name = f.lease_name;
  s.identity = f.identity;
  s.lease_duration = std::chrono::duration_cast<std::chrono::seconds>(ms(f.lease_duration));
  s.renew_deadline = ms(f.renew_deadline);
  s.retry_period = ms(f.retry_period);
  s.summary = std::string(so.cert_file.empty() ? "http" : "https") + " on " + so.bind +
              ", metrics on " + (so.metrics_bind.empty() ? "(none)" : so.metrics_bind) +
              ", scheduler name " + cfg.scheduler_name + ", policies " + f.node_policy + "/" +
              f.gpu_policy + ", leader election " +
              (f.leader_elect ? f.lease_ns + "/" + f.lease_name : "off") + ", node lock timeout " +
              f.lock_timeout + ", bind deadline " + std::to_string(cfg.bind_deadline.count()) +
              "ms" + ", nodes " + (s.nodes.empty() ? "all" : s.nodes.describe()) +
              (cfg.legacy_metrics ? ", legacy metrics" : "") + ", decisions " +
              (cfg.decisions.keys ? "signed" : "unsigned") + ", GPU pod seccomp " +
              cfg.gpu_pod_seccomp +
              (cfg.runtime_class_name.empty() ? "" : ", runtime class " + cfg.runtime_class_name) +
              (cfg.overwrite_env ? ", NVIDIA_VISIBLE_DEVICES=none without GPUs" : "");
  return s;
}

}  // namespace hami::scheduler
