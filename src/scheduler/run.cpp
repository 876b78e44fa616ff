#include "scheduler/run.hpp"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include "common/log.hpp"
#include "k8s/client.hpp"
#include "k8s/config.hpp"
#include "k8s/leader_election.hpp"
#include "k8s/paths.hpp"
#include "k8s/reflector.hpp"
#include "protocol/annotations.hpp"
#include "scheduler/cache.hpp"
#include "scheduler/events.hpp"
#include "scheduler/extender.hpp"
#include "scheduler/feed.hpp"
#include "scheduler/k8s_backend.hpp"
#include "scheduler/metrics.hpp"
#include "scheduler/parallel.hpp"
#include "scheduler/quota.hpp"
#include "scheduler/resize_controller.hpp"
#include "scheduler/server.hpp"
#include "scheduler/stale_locks.hpp"

namespace hami::scheduler {

Result<void> run_scheduler(const SchedulerSettings& s, const daemon::StopSignals& signals) {
  const SchedulerConfig& cfg = s.config;
  auto kc = k8s::Config::auto_detect(
      s.kubeconfig.empty() ? std::nullopt : std::optional<std::string>(s.kubeconfig));
  if (!kc) return Error{"Kubernetes config: " + kc.error().message};
  auto client = k8s::Client::from_config(*kc);
  if (!client) return Error{"Kubernetes client: " + client.error().message};

  daemon::ShutdownSequence shutdown;
  ClusterCache cache;
  CacheFeed feed(cache, cfg.decisions);
  if (!cfg.decisions.keys) {
    log::warn(
        "no --decision-key-file: binds are not signed, and the cache counts any bound pod whose "
        "schedulerName is trusted (%zu names), so a pod created past the webhook with forged "
        "hami.io annotations is counted; the chart sets a key",
        cfg.decisions.unsigned_schedulers.size());
  }
  NodeFeedFilter node_feed(s.nodes, feed);
  Metrics metrics;
  K8sBindBackend backend(*client, cfg.node_lock_timeout);
  Extender extender(cache, cfg, &backend, &metrics);
  // Events and pod labels, written off the request path.
  EventRecorder events(&*client, {.component = cfg.scheduler_name, .instance = s.identity});
  extender.set_events(&events);
  metrics.set_events(&events);
  QuotaTracker quotas(cfg.resources);
  extender.set_quotas(&quotas);
  metrics.set_quotas(&quotas);
  ServerOptions so = s.server;
  so.quotas = &quotas;
  // Upstream's leader label on this replica's own pod, which its chart's
  // Service selects (hami.io/scheduler-role=leader).
  const char* own_pod = std::getenv("POD_NAME");
  const char* pod_ns = std::getenv("POD_NAMESPACE");
  auto set_role = [&](bool leader) {
    if (own_pod == nullptr || *own_pod == 0 || pod_ns == nullptr || *pod_ns == 0) return;
    events.label_pod(pod_ns, own_pod, {{"hami.io/scheduler-role", leader ? "leader" : "follower"}});
  };
  // One request's nodes split over every core (the request's thread + these).
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  ParallelFor pool(cores - 1);
  extender.set_pool(&pool);

  using nlohmann::json;
  std::optional<k8s::LeaderElector> elector;
  auto extender_leads = [&] { return !elector || elector->is_leader(); };
  // Locks left by binds cut short (this process killed mid-bind) whose pods
  // a retry bound elsewhere; only the leader writes.
  StaleLocks stale([&](const std::string& node, const std::string& ns, const std::string& pod) {
    if (extender_leads()) backend.unlock_node(node, ns, pod);
  });
  extender.set_lock_holders([&](const std::string& node) { return stale.holder(node); });
  // Live resizes (nvidia.com/vgpu-resize), answered by the leader off the
  // watch thread from the pod watch's latest copy.
  ResizeController resize(cache, cfg, *client, &events, &quotas);
  std::optional<k8s::Reflector> pods_ref;
  ResizeWorker resizes(
      resize,
      [&](const std::string& ns, const std::string& name) { return pods_ref->get(ns, name); },
      extender_leads);
  k8s::Reflector nodes(*client, k8s::node_path(), {},
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
  k8s::Reflector& pods =
      pods_ref.emplace(*client, k8s::core_path("pods"), k8s::ReflectorOptions{},
                       k8s::ReflectorHandlers{.on_add =
                                                  [&](const json& p) {
                                                    feed.pod_changed(p);
                                                    stale.pod_seen(p);
                                                    resizes.notify(p);
                                                    extender.pod_seen(p);
                                                  },
                                              .on_update =
                                                  [&](const json&, const json& p) {
                                                    feed.pod_changed(p);
                                                    stale.pod_seen(p);
                                                    resizes.notify(p);
                                                    extender.pod_seen(p);
                                                  },
                                              .on_delete =
                                                  [&](const json& p) {
                                                    feed.pod_deleted(p);
                                                    stale.pod_gone(p);
                                                    extender.pod_gone(p);
                                                  }});
  // Namespace quotas on gpumem/gpucores (limits.nvidia.com/gpumem, ...).
  k8s::Reflector resource_quotas(
      *client, k8s::core_path("resourcequotas"), {},
      {.on_add = [&](const json& q) { quotas.quota_changed(q); },
       .on_update = [&](const json&, const json& q) { quotas.quota_changed(q); },
       .on_delete = [&](const json& q) { quotas.quota_deleted(q); }});
  backend.set_node_source([&](const std::string& n) { return nodes.get("", n); });
  extender.set_matches_pods([&](const std::string& n) {
    const auto node = nodes.get("", n);
    if (!node) return false;
    const auto& an = node->value("metadata", json::object()).value("annotations", json::object());
    return an.value(protocol::kNodeAllocateProtocol, "") == protocol::kAllocateMatchPods;
  });
  nodes.start();
  shutdown.add("the node watch", [&] { nodes.stop(); });
  pods.start();
  shutdown.add("the pod watch", [&] { pods.stop(); });
  resizes.start();
  shutdown.add("the resize worker", [&] { resizes.stop(); });
  resource_quotas.start();
  shutdown.add("the ResourceQuota watch", [&] { resource_quotas.stop(); });

  if (s.leader_elect) {
    elector.emplace(*client, k8s::LeaderElectionConfig{
                                 .lease_namespace = s.lease_ns,
                                 .lease_name = s.lease_name,
                                 .identity = s.identity,
                                 .lease_duration = s.lease_duration,
                                 .renew_deadline = s.renew_deadline,
                                 .retry_period = s.retry_period,
                                 .on_started_leading =
                                     [&] {
                                       metrics.set_leader(true);
                                       set_role(true);
                                       log::info("%s: leading; binding", s.identity.c_str());
                                       resizes.resync(pods.items());
                                     },
                                 .on_stopped_leading =
                                     [&] {
                                       metrics.set_leader(false);
                                       set_role(false);
                                       log::info("%s: not leading; bind refused",
                                                 s.identity.c_str());
                                     }});
    extender.set_leader_check(
        [&](std::chrono::milliseconds wait) { return elector->await_leadership(wait); });
    set_role(false);
    elector->start();
    shutdown.add("leader election", [&] { elector->stop(); });
  } else {
    metrics.set_leader(true);
    set_role(true);
  }
  so.ready = [&] {
    return nodes.has_synced() && pods.has_synced() && resource_quotas.has_synced();
  };
  SchedulerServer server(extender, cfg, metrics, cache, so);
  if (auto r = server.start(); !r) {
    shutdown.run();
    return r.error();
  }
  shutdown.add("the HTTPS server", [&] { server.stop(); });
  const int sig = signals.wait();
  log::info("signal %d: shutting down", sig);
  shutdown.run();
  return {};
}

}  // namespace hami::scheduler
