#include "scheduler/extender.hpp"

#include <array>
#include <mutex>

#include "common/log.hpp"
#include "deviceplugin/annotations.hpp"
#include "fit/fit.hpp"
#include "fit/score.hpp"
#include "scheduler/bind_guard.hpp"
#include "scheduler/feed.hpp"
#include "scheduler/pod_request.hpp"

namespace hami::scheduler {

namespace dp = hami::deviceplugin;

namespace {

// Per-thread fitting memory, reused across requests (fit.hpp).
fit::FitScratch& scratch() {
  thread_local fit::FitScratch s;
  return s;
}

constexpr const char* kNodeUnregistered = "node unregistered";
// Pods filtered but never bound (deleted while pending) are forgotten in
// bulk past this many; bind then reads the pod first, as without the copy.
constexpr size_t kMaxSeen = 8192;

}  // namespace

Extender::Extender(ClusterCache& cache, const SchedulerConfig& config, BindBackend* backend,
                   Metrics* metrics)
    : cache_(cache),
      config_(config),
      backend_(backend),
      metrics_(metrics),
      is_leader_([] { return true; }),
      now_([] { return std::chrono::system_clock::now(); }) {}

void Extender::drop_previous(const std::string& uid) {
  if (uid.empty()) return;
  // Most pods hold nothing: look under the shared lock before writing.
  const bool held = cache_.read([&](const ClusterCache::View& v) { return v.pod(uid) != nullptr; });
  if (held) cache_.remove_pod(uid);
}

FilterResult Extender::filter(const k8s::Pod& pod, std::span<const std::string> node_names) {
  FilterResult out;
  auto req = pod_request(pod, config_);
  if (!req) {
    out.error = "pod " + pod.meta.ns + "/" + pod.meta.name + ": " + req.error().message;
    if (metrics_) metrics_->failure(Verb::kFilter, "BadPod");
    return out;
  }
  if (!req->prepared) {
    out.ours = false;
    out.nodes.assign(node_names.begin(), node_names.end());
    return out;
  }
  // The pod is being scheduled (again): what it reserved before is void.
  drop_previous(pod.meta.uid);
  remember(pod);
  const fit::PreparedPod& prepared = *req->prepared;
  const size_t n = node_names.size();
  // Per node: 1 fits, 0 rejected (reason in reasons[i]), 2 unregistered.
  std::vector<uint8_t> verdict(n, 0);
  std::vector<std::string> reasons(n);
  // Per share: rejections counted by reason (+1: NodeInsufficientDevice,
  // +2: unregistered), added to the metrics once.
  using Counts = std::array<uint64_t, fit::kReasonCount + 2>;
  std::vector<Counts> counts(pool_ ? pool_->shares() : 1, Counts{});
  std::vector<float> scores(n, -1);  // for prioritize, through memo_
  uint64_t version = 0;
  cache_.read([&](const ClusterCache::View& view) {
    version = view.version();
    // The shared lock is held by this thread for the whole request; the
    // pool's threads read under it.
    auto body = [&](size_t begin, size_t end, size_t share) {
      fit::FitScratch& s = scratch();
      Counts& c = counts[share];
      for (size_t i = begin; i < end; ++i) {
        const ClusterCache::NodeState* node = view.node_state(node_names[i]);
        if (node == nullptr) {
          verdict[i] = 2;
          ++c[fit::kReasonCount + 1];
          continue;
        }
        fit::NodeFit f = fit::fit_pod(node->devices, prepared, s);
        if (f.fits) {
          verdict[i] = 1;
          scores[i] = node->score;
          continue;
        }
        reasons[i] = fit::describe(f.failure);
        if (f.failure.node_insufficient_device) ++c[fit::kReasonCount];
        for (size_t r = 0; r < fit::kReasonCount; ++r)
          c[r] += f.failure.counts[r] > 0;
      }
    };
    if (pool_ != nullptr) {
      pool_->run(n, body);
    } else {
      body(0, n, 0);
    }
    return 0;
  });
  out.nodes.reserve(n);
  std::vector<float> kept_scores;
  kept_scores.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (verdict[i] == 1) {
      out.nodes.push_back(node_names[i]);
      kept_scores.push_back(scores[i]);
    } else {
      out.failed.emplace(node_names[i],
                         verdict[i] == 2 ? kNodeUnregistered : std::move(reasons[i]));
    }
  }
  memo_.store(pod.meta.uid, version, out.nodes, std::move(kept_scores));
  if (metrics_) {
    Counts total{};
    for (const Counts& c : counts) {
      for (size_t r = 0; r < total.size(); ++r)
        total[r] += c[r];
    }
    for (size_t r = 0; r < fit::kReasonCount; ++r) {
      if (total[r])
        metrics_->node_rejected(fit::reason_name(static_cast<fit::Reason>(r)), total[r]);
    }
    if (total[fit::kReasonCount])
      metrics_->node_rejected(fit::kNodeInsufficientDevice, total[fit::kReasonCount]);
    if (total[fit::kReasonCount + 1])
      metrics_->node_rejected("NodeUnregistered", total[fit::kReasonCount + 1]);
    if (out.nodes.empty()) metrics_->failure(Verb::kFilter, "NoNodeFits");
  }
  return out;
}

Result<std::vector<HostPriority>> Extender::prioritize(const k8s::Pod& pod,
                                                       std::span<const std::string> node_names) {
  std::vector<HostPriority> out;
  out.reserve(node_names.size());
  auto req = pod_request(pod, config_);
  if (!req) return Error{"pod " + pod.meta.ns + "/" + pod.meta.name + ": " + req.error().message};
  if (!req->prepared) {
    for (const auto& n : node_names)
      out.push_back({n, 0});
    return out;
  }
  const fit::NodePolicy policy = req->prepared->options().node_policy;
  out.resize(node_names.size());
  auto priority = [policy](float node_score) -> int64_t {
    return node_score >= 0 ? fit::node_priority(node_score, policy, kMaxExtenderPriority) : 0;
  };
  cache_.read([&](const ClusterCache::View& view) {
    // Usually filter of this very pod has just looked every node up.
    if (auto scores = memo_.find(pod.meta.uid, view.version(), node_names)) {
      for (size_t i = 0; i < node_names.size(); ++i)
        out[i] = {node_names[i], priority((*scores)[i])};
      return 0;
    }
    auto body = [&](size_t begin, size_t end, size_t) {
      for (size_t i = begin; i < end; ++i)
        out[i] = {node_names[i], priority(view.node_score(node_names[i]))};
    };
    if (pool_ != nullptr) {
      pool_->run(node_names.size(), body);
    } else {
      body(0, node_names.size(), 0);
    }
    return 0;
  });
  return out;
}

void Extender::remember(const k8s::Pod& pod) {
  if (pod.meta.uid.empty()) return;
  std::lock_guard lk(seen_mu_);
  if (seen_.size() >= kMaxSeen) seen_.clear();
  seen_.insert_or_assign(pod.meta.uid, pod);
}

std::optional<k8s::Pod> Extender::recall(const std::string& uid) {
  std::lock_guard lk(seen_mu_);
  auto it = seen_.find(uid);
  if (it == seen_.end()) return std::nullopt;
  k8s::Pod pod = std::move(it->second);
  seen_.erase(it);
  return pod;
}

std::string Extender::reserve(const std::string& uid, const BindRequest& r,
                              const SchedulingRequest& req, std::string* encoded) {
  std::string fit_error;
  cache_.with_exclusive([&](ClusterCache& c) {
    c.remove_pod_unlocked(uid);  // a reservation from an earlier attempt
    const fit::NodeDevices* node = c.node_unlocked(r.node);
    if (node == nullptr) {
      fit_error = "node " + r.node + " has no registered GPUs";
      return 0;
    }
    fit::Placement placement;
    fit::NodeFit f = fit::fit_pod(*node, *req.prepared, scratch(), &placement);
    if (!f.fits) {
      fit_error = "pod no longer fits node " + r.node + ": " + fit::describe(f.failure);
      return 0;
    }
    fit::PodDevices devices = fit::to_pod_devices(*node, *req.prepared, placement);
    auto text = fit::encode_pod_devices(devices);
    if (!text) {
      fit_error = text.error().message;
      return 0;
    }
    *encoded = std::move(*text);
    PodCharge charge;
    charge.node = r.node;
    charge.charges = fit::pod_charges(devices, req.kinds);
    charge.reserved = true;
    charge.ns = r.ns;
    charge.name = r.name;
    c.set_pod_unlocked(uid, std::move(charge));
    return 0;
  });
  return fit_error;
}

std::string Extender::bind(const BindRequest& r) {
  const std::string who = r.ns + "/" + r.name;
  auto fail = [&](const char* reason, std::string message) {
    if (metrics_) metrics_->failure(Verb::kBind, reason);
    log::warn("bind %s to %s: %s", who.c_str(), r.node.c_str(), message.c_str());
    return message;
  };
  if (!is_leader_()) {
    return fail("NotLeader", "this scheduler replica is not the leader; only the leader binds");
  }
  if (backend_ == nullptr) return fail("NoBackend", "no API server to bind through");
  // Fit and reserve atomically (no other bind can take these GPUs between
  // the check and the charge), from filter's copy of the pod when there is
  // one, so at once.
  std::string encoded;
  bool reserved = false;
  if (auto seen = recall(r.uid); seen && seen->meta.ns == r.ns && seen->meta.name == r.name) {
    auto req = pod_request(*seen, config_);
    if (req && req->prepared) {
      if (std::string e = reserve(r.uid, r, *req, &encoded); !e.empty()) return fail("NoFit", e);
      reserved = true;
    }
  }
  auto pod = backend_->get_pod(r.ns, r.name);
  if (!pod) {
    drop_previous(r.uid);
    return fail("PodNotFound", "get pod " + who + ": " + pod.error().message);
  }
  if (!r.uid.empty() && !pod->meta.uid.empty() && pod->meta.uid != r.uid) {
    if (reserved) cache_.remove_reservation(r.uid, r.node);
    return fail("UidMismatch", "pod " + who + " has uid " + pod->meta.uid + ", not " + r.uid);
  }
  if (std::string why = bind_refusal(*pod, config_); !why.empty()) {
    if (reserved) cache_.remove_reservation(r.uid, r.node);
    return fail("NotOurPod", why);
  }
  const std::string uid = pod->meta.uid.empty() ? r.uid : pod->meta.uid;
  if (!reserved) {
    auto req = pod_request(*pod, config_);
    if (!req) return fail("BadPod", "pod " + who + ": " + req.error().message);
    if (!req->prepared) {
      // Not ours (the extender was configured to bind everything): bind only.
      auto b = backend_->bind(r.ns, r.name, uid, r.node);
      if (!b) return fail("BindFailed", b.error().message);
      return "";
    }
    if (std::string e = reserve(uid, r, *req, &encoded); !e.empty()) return fail("NoFit", e);
  }

  if (auto lock = backend_->lock_node(r.node, r.ns, r.name); !lock) {
    cache_.remove_reservation(uid, r.node);
    return fail("NodeLock", lock.error().message);
  }
  const auto unix_now = std::to_string(
      std::chrono::duration_cast<std::chrono::seconds>(now_().time_since_epoch()).count());
  std::map<std::string, std::string> annotations = {
      {dp::kAssignedNode, r.node},
      {kAnnoVgpuTime, unix_now},
      {dp::kDevicesToAllocate, encoded},
      {dp::kDevicesAllocated, encoded},
      {dp::kBindPhase, dp::kPhaseAllocating},
      {dp::kBindTime, unix_now},
  };
  if (auto p = backend_->patch_pod_annotations(r.ns, r.name, annotations); !p) {
    backend_->unlock_node(r.node, r.ns, r.name);
    cache_.remove_reservation(uid, r.node);
    return fail("PatchFailed", "annotate pod " + who + ": " + p.error().message);
  }
  if (auto b = backend_->bind(r.ns, r.name, uid, r.node); !b) {
    backend_->unlock_node(r.node, r.ns, r.name);
    cache_.remove_reservation(uid, r.node);
    // The annotations stay with bind-phase failed, so the device plugin never
    // acts on them and the watch does not charge them again.
    (void)backend_->patch_pod_annotations(r.ns, r.name, {{dp::kBindPhase, dp::kPhaseFailed}});
    return fail("BindFailed", "bind pod " + who + ": " + b.error().message);
  }
  log::info("bound %s to %s: %s", who.c_str(), r.node.c_str(), encoded.c_str());
  return "";
}

}  // namespace hami::scheduler
