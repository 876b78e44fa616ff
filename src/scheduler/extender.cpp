#include "scheduler/extender.hpp"

#include <algorithm>
#include <array>
#include <mutex>
#include <string_view>
#include <tuple>

#include "common/log.hpp"
#include "fit/fit.hpp"
#include "fit/score.hpp"
#include "protocol/annotations.hpp"
#include "protocol/decision.hpp"
#include "protocol/mig_allocations.hpp"
#include "scheduler/bind_guard.hpp"
#include "scheduler/feed.hpp"
#include "scheduler/pod_request.hpp"

namespace hami::scheduler {

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
      is_leader_([](std::chrono::milliseconds) { return true; }),
      in_flight_(config.decisions),
      now_([] { return std::chrono::system_clock::now(); }) {}

InFlightPod Extender::probe_of(const k8s::Pod& pod, const fit::PreparedPod& prepared) {
  // Its keys are its containers' GPU counts (allocation_keys of any
  // placement).
  InFlightPod probe{.uid = pod.meta.uid, .who = pod.meta.ns + "/" + pod.meta.name};
  for (const fit::ContainerRequest& c : prepared.request().containers) {
    if (c.nums > 0) probe.keys.push_back(std::to_string(c.nums));
  }
  std::sort(probe.keys.begin(), probe.keys.end());
  probe.keys.erase(std::unique(probe.keys.begin(), probe.keys.end()), probe.keys.end());
  if (pod.meta.creation_timestamp) {
    probe.created_s = std::chrono::duration_cast<std::chrono::seconds>(
                          pod.meta.creation_timestamp->time_since_epoch())
                          .count();
  }
  return probe;
}

void Extender::drop_previous(const std::string& uid) {
  if (uid.empty()) return;
  // Most pods hold nothing: look under the shared lock before writing. A
  // bound pod's allocation stays: kube-scheduler may filter a pod again
  // whose binding went through while its answer was lost (the extender
  // killed mid-bind), and that pod holds its GPUs all the same.
  const bool drop = cache_.read([&](const ClusterCache::View& v) {
    const PodCharge* c = v.pod(uid);
    return c != nullptr && (c->reserved || !c->bound);
  });
  if (drop) cache_.remove_pod(uid);
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
  // Namespace quota: a fixed request is judged once for every node; one by
  // gpumem-percentage on each node, once its GPUs are chosen.
  const bool quota = quotas_ != nullptr && quotas_->any();
  const QuotaRequest need = quota ? quota_request(prepared.request()) : QuotaRequest{};
  std::string quota_refusal;
  cache_.read([&](const ClusterCache::View& view) {
    version = view.version();
    const NamespaceUsage used = quota ? view.namespace_usage(pod.meta.ns) : NamespaceUsage{};
    if (quota) {
      QuotaRequest fixed = need;
      fixed.mem_percent = false;
      quota_refusal = quotas_->check(pod.meta.ns, used, fixed);
      if (!quota_refusal.empty()) return 0;
    }
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
        fit::Placement placement;
        fit::NodeFit f = fit::fit_pod(node->devices, prepared, s,
                                      quota && need.mem_percent ? &placement : nullptr);
        if (f.fits && quota && need.mem_percent) {
          QuotaRequest exact = need;
          exact.mem_mib = 0;
          for (const fit::DeviceCharge& ch : fit::pod_charges(
                   fit::to_pod_devices(node->devices, prepared, placement), req->kinds))
            exact.mem_mib += ch.mem_mib;
          if (std::string why = quotas_->check(pod.meta.ns, used, exact); !why.empty()) {
            reasons[i] = std::move(why);
            continue;
          }
        }
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
  if (!quota_refusal.empty()) {
    // The namespace, not a node, is full: every node says so.
    for (size_t i = 0; i < n; ++i)
      out.failed.emplace(node_names[i], quota_refusal);
    if (metrics_) {
      metrics_->node_rejected(kReasonQuota, n);
      metrics_->failure(Verb::kFilter, "NoNodeFits");
    }
    if (events_) filter_event(pod, out);
    return out;
  }
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
  // Under binpack the best nodes are the fullest, and in a burst those hold
  // pods in flight this one may not join: remember the free ones first.
  std::vector<uint8_t> blocked;
  if (out.nodes.size() > kMaxRememberedNodes && in_flight_.size() > 0)
    blocked = in_flight_.blocked_on(probe_of(pod, prepared), out.nodes);
  remember(pod, best_fitting(out.nodes, kept_scores, blocked, prepared.options().node_policy));
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
  if (events_) filter_event(pod, out);
  return out;
}

void Extender::filter_event(const k8s::Pod& pod, const FilterResult& out) {
  // Upstream's wording, one line per reason: "<k> nodes <reason>(<nodes>)".
  constexpr size_t kNamesShown = 5, kReasonsShown = 10;
  const PodRef ref{pod.meta.ns, pod.meta.name, pod.meta.uid};
  auto names = [&](const std::vector<std::string>& v, size_t total) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i)
      s += (i ? "," : "") + v[i];
    if (total > v.size()) s += ",...";
    return s;
  };
  if (!out.nodes.empty()) {
    std::vector<std::string> shown(out.nodes.begin(),
                                   out.nodes.begin() + std::min(out.nodes.size(), kNamesShown));
    events_->record(ref, EventType::kNormal, kReasonFilteringSucceed,
                    std::to_string(out.nodes.size()) + " nodes fit(" +
                        names(shown, out.nodes.size()) + "), " + std::to_string(out.failed.size()) +
                        " nodes not fit");
    return;
  }
  struct Group {
    size_t count = 0;
    std::vector<std::string> nodes;
  };
  std::map<std::string, Group> groups;
  for (const auto& [node, reason] : out.failed) {
    Group& g = groups[reason];
    if (g.nodes.size() < kNamesShown) g.nodes.push_back(node);
    ++g.count;
  }
  // Most common reasons first.
  std::vector<std::pair<std::string, Group>> sorted(groups.begin(), groups.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second.count > b.second.count; });
  std::string msg;
  for (size_t i = 0; i < sorted.size() && i < kReasonsShown; ++i) {
    if (i) msg += "; ";
    msg += std::to_string(sorted[i].second.count) + " nodes " + sorted[i].first + "(" +
           names(sorted[i].second.nodes, sorted[i].second.count) + ")";
  }
  if (sorted.size() > kReasonsShown) msg += "; ...";
  if (msg.empty()) msg = "no nodes to filter";
  events_->record(ref, EventType::kWarning, kReasonFilteringFailed, msg);
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
  std::vector<float> scores(node_names.size(), -1);
  cache_.read([&](const ClusterCache::View& view) {
    // Usually filter of this very pod has just looked every node up.
    if (auto memo = memo_.find(pod.meta.uid, view.version(), node_names)) {
      scores.assign(memo->begin(), memo->end());
      return 0;
    }
    auto body = [&](size_t begin, size_t end, size_t) {
      for (size_t i = begin; i < end; ++i)
        scores[i] = view.node_score(node_names[i]);
    };
    if (pool_ != nullptr) {
      pool_->run(node_names.size(), body);
    } else {
      body(0, node_names.size(), 0);
    }
    return 0;
  });
  // When binds already wait on as many blocked nodes as may wait, a bind
  // to another blocked node would only be sent elsewhere: kube-scheduler
  // had better choose a free node itself. Those score 1-10 by the policy,
  // blocked nodes 0. Below that pressure a batch waits its turn on the best
  // node, as binpack wants.
  std::vector<uint8_t> blocked;
  if (lock_waiters_.load() >= kMaxLockWaiters && in_flight_.size() > 0)
    blocked = in_flight_.blocked_on(probe_of(pod, *req->prepared), node_names);
  const bool demote = std::find(blocked.begin(), blocked.end(), 1) != blocked.end();
  if (demote) {
    for (size_t i = 0; i < scores.size(); ++i) {
      if (blocked[i]) scores[i] = -1;
    }
  }
  std::vector<int> p = fit::node_priorities(
      scores, policy, demote ? kMaxExtenderPriority - 1 : kMaxExtenderPriority);
  for (size_t i = 0; i < node_names.size(); ++i) {
    if (demote && !blocked[i]) ++p[i];
    out.push_back({node_names[i], p[i]});
  }
  if (demote && metrics_)
    metrics_->demoted(static_cast<size_t>(std::count(blocked.begin(), blocked.end(), uint8_t{1})));
  return out;
}

std::vector<std::string> Extender::best_fitting(const std::vector<std::string>& nodes,
                                                const std::vector<float>& scores,
                                                const std::vector<uint8_t>& blocked,
                                                fit::NodePolicy policy) {
  if (nodes.size() <= kMaxRememberedNodes) return nodes;
  // Free before blocked; then binpack prefers the busiest node, spread the
  // idlest; among equals the first listed (the index is the last key).
  // nth_element: this runs in every filter.
  std::vector<std::tuple<uint8_t, float, uint32_t>> ranked(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i)
    ranked[i] = {blocked.empty() ? 0 : blocked[i],
                 policy == fit::NodePolicy::kSpread ? scores[i] : -scores[i],
                 static_cast<uint32_t>(i)};
  const auto cut = ranked.begin() + static_cast<std::ptrdiff_t>(kMaxRememberedNodes);
  std::nth_element(ranked.begin(), cut, ranked.end());
  // In kube-scheduler's order, which alternatives() keeps among equals.
  std::sort(ranked.begin(), cut,
            [](const auto& a, const auto& b) { return std::get<2>(a) < std::get<2>(b); });
  std::vector<std::string> out;
  out.reserve(kMaxRememberedNodes);
  for (auto it = ranked.begin(); it != cut; ++it)
    out.push_back(nodes[std::get<2>(*it)]);
  return out;
}

void Extender::remember(const k8s::Pod& pod, std::vector<std::string> fitting) {
  if (pod.meta.uid.empty()) return;
  std::lock_guard lk(seen_mu_);
  if (seen_.size() >= kMaxSeen) seen_.clear();
  seen_.insert_or_assign(pod.meta.uid, Seen{pod, std::move(fitting)});
}

std::optional<Extender::Seen> Extender::recall(const std::string& uid) {
  std::lock_guard lk(seen_mu_);
  auto it = seen_.find(uid);
  if (it == seen_.end()) return std::nullopt;
  Seen seen = std::move(it->second);
  seen_.erase(it);
  return seen;
}

std::string Extender::reserve(const std::string& uid, const BindRequest& r,
                              const std::string& node_name, const SchedulingRequest& req,
                              Decided* decided) {
  std::string fit_error;
  cache_.with_exclusive([&](ClusterCache& c) {
    if (const PodCharge* old = c.pod_unlocked(uid); old && old->bound && !old->reserved) {
      fit_error = "pod " + r.ns + "/" + r.name + " is already bound to node " + old->node;
      return 0;
    }
    c.remove_pod_unlocked(uid);  // a reservation from an earlier attempt
    const fit::NodeDevices* node = c.node_unlocked(node_name);
    if (node == nullptr) {
      fit_error = "node " + node_name + " has no registered GPUs";
      return 0;
    }
    fit::Placement placement;
    fit::NodeFit f = fit::fit_pod(*node, *req.prepared, scratch(), &placement);
    if (!f.fits) {
      fit_error = "pod no longer fits node " + node_name + ": " + fit::describe(f.failure);
      return 0;
    }
    fit::PodDevices devices = fit::to_pod_devices(*node, *req.prepared, placement);
    auto text = protocol::encode_pod_devices(devices);
    if (!text) {
      fit_error = text.error().message;
      return 0;
    }
    PodCharge charge;
    charge.mig = fit::to_mig_allocations(*node, placement);
    decided->devices = std::move(*text);
    decided->mig =
        charge.mig.empty() ? std::string() : protocol::encode_mig_allocations(charge.mig);
    charge.node = node_name;
    charge.charges = fit::pod_charges(devices, req.kinds);
    for (fit::DeviceCharge& ch : charge.charges)
      ch.user = req.user;
    if (quotas_ != nullptr && quotas_->any()) {
      // Checked with the reservation, under the same lock: two binds of one
      // namespace cannot both take its last room.
      QuotaRequest exact;
      for (const fit::DeviceCharge& ch : charge.charges) {
        exact.mem_mib += ch.mem_mib;
        exact.cores += ch.cores;
      }
      if (std::string why = quotas_->check(r.ns, c.ns_usage(r.ns), exact); !why.empty()) {
        fit_error = "pod " + r.ns + "/" + r.name + ": " + why;
        return 0;
      }
    }
    charge.reserved = true;
    charge.ns = r.ns;
    charge.name = r.name;
    c.set_pod_unlocked(uid, std::move(charge));
    return 0;
  });
  return fit_error;
}

namespace {
// Longer than the node watch takes to show a lock.
constexpr auto kRecentLock = std::chrono::seconds(1);
}  // namespace

void Extender::note_locked(const std::string& node) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lk(recent_mu_);
  if (recent_locks_.size() >= 4096) {
    std::erase_if(recent_locks_, [&](const auto& e) { return now - e.second > kRecentLock; });
  }
  recent_locks_[node] = now;
}

bool Extender::locked_recently(const std::string& node) {
  std::lock_guard lk(recent_mu_);
  auto it = recent_locks_.find(node);
  return it != recent_locks_.end() && std::chrono::steady_clock::now() - it->second < kRecentLock;
}

bool Extender::locked_by_another(const std::string& node, const std::string& who) {
  // No pod binding here holds another node's lock: a recent lock of ours is
  // another pod's.
  if (locked_recently(node)) return true;
  if (!lock_holder_) return false;
  const std::string holder = lock_holder_(node);
  return !holder.empty() && holder != who;
}

bool Extender::taken_by_another(const std::string& node, const std::string& who,
                                const InFlightPod& probe) {
  if (matches_pods(node)) {
    InFlightPod p = probe;
    p.node = node;
    return !in_flight_.blocker(p).empty();
  }
  return locked_by_another(node, who);
}

Extender::Alternatives Extender::alternatives(const std::vector<std::string>& fitting,
                                              const std::string& chosen,
                                              const fit::PreparedPod& prepared,
                                              const std::string& who, const InFlightPod& probe,
                                              size_t limit) {
  Alternatives out;
  const fit::NodePolicy policy = prepared.options().node_policy;
  // (locked, rank, index): unlocked first, then the best under the policy.
  std::vector<std::tuple<bool, float, size_t>> ranked;
  ranked.reserve(fitting.size());
  cache_.read([&](const ClusterCache::View& view) {
    fit::FitScratch& s = scratch();
    for (size_t i = 0; i < fitting.size(); ++i) {
      if (fitting[i] == chosen) continue;
      ++out.others;
      const ClusterCache::NodeState* node = view.node_state(fitting[i]);
      if (node == nullptr || !fit::fit_pod(node->devices, prepared, s).fits) {
        ++out.no_fit;  // or unregistered since
        continue;
      }
      // Binpack prefers the busiest node, spread the idlest: rank so that
      // the best comes first either way.
      ranked.emplace_back(false, policy == fit::NodePolicy::kSpread ? node->score : -node->score,
                          i);
    }
    return 0;
  });
  for (auto& [locked, rank, i] : ranked)
    locked = taken_by_another(fitting[i], who, probe);
  // Ties keep filter's order (kube-scheduler's node order).
  const size_t n = std::min(limit, ranked.size());
  std::partial_sort(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(n), ranked.end());
  out.nodes.reserve(n);
  for (size_t i = 0; i < n; ++i)
    out.nodes.push_back(fitting[std::get<2>(ranked[i])]);
  return out;
}

std::string Extender::reserve_for(const std::string& uid, const BindRequest& r,
                                  const std::string& node, const SchedulingRequest& req,
                                  const InFlightPod& probe, Decided* decided,
                                  std::optional<InFlightPod>* flight) {
  if (std::string e = reserve(uid, r, node, req, decided); !e.empty()) return e;
  flight->reset();
  if (!matches_pods(node)) return "";
  *flight = probe;
  (*flight)->node = node;
  return "";
}

std::string Extender::lock_and_bind(const BindRequest& r, const std::string& uid,
                                    const std::string& node, const Decided& decided,
                                    const std::optional<InFlightPod>& flight,
                                    std::chrono::milliseconds wait, bool* contended) {
  const std::string who = r.ns + "/" + r.name;
  *contended = false;
  // Where the device plugin matches pods itself, no lock: the cache's
  // reservation keeps two binds off the same room, and the in-flight record
  // keeps two pods the plugin could confuse from being allocated at once.
  const bool lock = !flight;
  if (flight) {
    if (std::string other = in_flight_.claim(*flight, wait); !other.empty()) {
      cache_.remove_reservation(uid, node);
      *contended = true;
      return "pod " + other + ", which asks for as many GPUs, is still being allocated on node " +
             node +
             " and its device plugin could not tell the two apart (created in the same "
             "second, or bound in the other order)";
    }
  }
  if (lock) {
    if (auto locked = backend_->lock_node(node, r.ns, r.name, wait); !locked) {
      cache_.remove_reservation(uid, node);
      *contended = locked.error().contended;
      return locked.error().message;
    }
    note_locked(node);
  }
  const auto unix_now = std::to_string(
      std::chrono::duration_cast<std::chrono::seconds>(now_().time_since_epoch()).count());
  std::map<std::string, std::string> annotations = {
      {protocol::kAssignedNode, node},
      {kAnnoVgpuTime, unix_now},
      {protocol::kDevicesToAllocate, decided.devices},
      {protocol::kDevicesAllocated, decided.devices},
      {protocol::kBindPhase, protocol::kPhaseAllocating},
      {protocol::kBindTime, unix_now},
  };
  if (!decided.mig.empty()) annotations[protocol::kMigAllocations] = decided.mig;
  // The binding sets these with spec.nodeName in one update; the signature
  // is what tells the cache and the device plugin that we decided them. It
  // covers the MIG entries as the plugin's later additions leave them.
  if (config_.decisions.keys) {
    annotations[protocol::kDecisionSignature] = config_.decisions.keys->sign(
        {uid, r.ns, r.name, node, decided.devices,
         decided.mig.empty() ? std::string() : protocol::mig_scheduler_part(decided.mig)});
  }
  if (auto b = backend_->bind(r.ns, r.name, uid, node, annotations); !b) {
    if (lock) backend_->unlock_node(node, r.ns, r.name);
    if (flight) in_flight_.release(uid);
    cache_.remove_reservation(uid, node);
    return "bind pod " + who + ": " + b.error().message;
  }
  if (flight) in_flight_.written(uid);
  return "";
}

BindOutcome Extender::place(const BindRequest& r) {
  const std::string who = r.ns + "/" + r.name;
  auto fail = [&](const char* reason, std::string message) {
    if (metrics_) metrics_->failure(Verb::kBind, reason);
    log::warn("bind %s to %s: %s", who.c_str(), r.node.c_str(), message.c_str());
    // A follower refuses every bind by design; that is no news for the pod.
    if (events_ && std::string_view(reason) != "NotLeader") {
      events_->record({r.ns, r.name, r.uid}, EventType::kWarning, kReasonBindingFailed, message);
    }
    return BindOutcome{std::move(message), ""};
  };
  // Time left before the bind deadline; a wait never runs past it.
  auto left = [&] {
    const auto now = std::chrono::steady_clock::now();
    return r.deadline <= now
               ? std::chrono::milliseconds(0)
               : std::chrono::duration_cast<std::chrono::milliseconds>(std::min(
                     r.deadline - now, std::chrono::steady_clock::duration(std::chrono::hours(1))));
  };
  // A replica just started may be about to lead (the lease free, or held by
  // a replica gone without releasing it): half the time left is worth
  // waiting, where failing would park the pod in kube-scheduler's back-off.
  if (!is_leader_(std::min(left() / 2, config_.bind_deadline))) {
    return fail("NotLeader", "this scheduler replica is not the leader; only the leader binds");
  }
  auto out_of_time = [&](const std::string& what) {
    return fail("BindDeadline",
                "bind of pod " + who + " to " + r.node + " gave up at its deadline (" +
                    std::to_string(config_.bind_deadline.count()) +
                    " ms, a third of kube-scheduler's extender httpTimeout at most): " + what +
                    "; nothing was bound, kube-scheduler schedules the pod again");
  };
  if (left().count() == 0) return out_of_time("it waited that long for a bind worker");
  if (backend_ == nullptr) return fail("NoBackend", "no API server to bind through");
  // filter's copy of the pod, so the pod is fitted and reserved at once,
  // without a read from the API server first (the binding carries the UID).
  k8s::Pod pod;
  std::vector<std::string> fitting;
  if (auto seen = recall(r.uid);
      seen && seen->pod.meta.ns == r.ns && seen->pod.meta.name == r.name) {
    pod = std::move(seen->pod);
    fitting = std::move(seen->fitting);
  } else {
    // The extender restarted between filter and bind: read the pod.
    auto got = backend_->get_pod(r.ns, r.name);
    if (!got) {
      drop_previous(r.uid);
      return fail("PodNotFound", "get pod " + who + ": " + got.error().message);
    }
    if (!r.uid.empty() && !got->meta.uid.empty() && got->meta.uid != r.uid) {
      return fail("UidMismatch", "pod " + who + " has uid " + got->meta.uid + ", not " + r.uid);
    }
    pod = std::move(*got);
  }
  const std::string uid = pod.meta.uid.empty() ? r.uid : pod.meta.uid;
  // Bound already (its binding went through, the answer was lost): done if
  // there, an error elsewhere; nothing of it is touched.
  const std::string bound_to = cache_.read([&](const ClusterCache::View& v) {
    const PodCharge* c = v.pod(uid);
    return c != nullptr && c->bound && !c->reserved ? c->node : std::string();
  });
  if (bound_to == r.node) return {"", r.node};
  if (!bound_to.empty()) {
    return fail("AlreadyBound", "pod " + who + " is already bound to node " + bound_to);
  }
  // Only a pending pod of this scheduler: a caller of /bind cannot place a
  // pod kube-scheduler did not schedule through us, or move one that runs.
  if (std::string why = bind_refusal(pod, config_); !why.empty()) return fail("NotOurPod", why);
  auto req = pod_request(pod, config_);
  if (!req) return fail("BadPod", "pod " + who + ": " + req.error().message);
  if (!req->prepared) {
    // Not ours (the extender was configured to bind everything): bind only.
    auto b = backend_->bind(r.ns, r.name, uid, r.node, {});
    if (!b) return fail("BindFailed", b.error().message);
    return {"", r.node};
  }

  // kube-scheduler's choice first. It binds asynchronously, so by now
  // another bind may have taken the room filter saw there, or another pod
  // may hold the node's lock until kubelet has allocated it; failing would
  // park this pod in kube-scheduler's back-off (up to a minute in 1.20). So
  // the other nodes filter found fitting follow, best first. A pod whose
  // place depends on other pods' (affinity, spread, host ports) stays where
  // kube-scheduler put it: only kube-scheduler can judge another node.
  const bool may_redirect = config_.bind_redirect && !pod.placement_depends_on_other_pods &&
                            std::any_of(fitting.begin(), fitting.end(),
                                        [&](const std::string& n) { return n != r.node; });
  Alternatives more;
  size_t tried = 0;   // other nodes tried, kMaxBindNodes - 1 at most
  size_t looked = 0;  // of more.nodes, those tried or skipped as taken
  InFlightPod probe = probe_of(pod, *req->prepared);
  probe.uid = uid;
  std::string first_error;          // why kube-scheduler's choice was not used
  std::vector<std::string> locked;  // fitting, but another pod held the lock
  size_t others_no_fit = 0;
  const char* moved_because = "NoFit";
  auto bound = [&](const std::string& node, const char* why) {
    if (events_) {
      events_->record({r.ns, r.name, uid}, EventType::kNormal, kReasonBindingSucceed,
                      "Successfully binding node [" + node + "] to " + who);
      // Upstream's pod label, by which its node monitor lists a node's pods.
      // Our device plugin sets it in its own patch at Allocate (match-pods
      // nodes): one pod write, and its watch events, fewer per pod.
      if (!matches_pods(node)) events_->label_pod(r.ns, r.name, {{protocol::kAssignedNode, node}});
    }
    if (node == r.node) {
      log::info("bound %s to %s", who.c_str(), node.c_str());
    } else {
      if (metrics_) metrics_->redirect(why);
      log::info("bound %s to %s instead of %s: %s", who.c_str(), node.c_str(), r.node.c_str(),
                first_error.c_str());
    }
    return BindOutcome{"", node};
  };
  bool waited = false;
  // Binds on `node` if it fits and its lock is free (or frees within the
  // wait): the outcome when bound or failed for good, nullopt to go on.
  auto try_node = [&](const std::string& node, bool chosen) -> std::optional<BindOutcome> {
    if (left().count() == 0) {
      return out_of_time(first_error.empty() ? std::string("no node tried in time")
                                             : "after " + first_error);
    }
    Decided decided;
    std::optional<InFlightPod> flight;
    if (std::string e = reserve_for(uid, r, node, *req, probe, &decided, &flight); !e.empty()) {
      if (chosen) first_error = std::move(e);
      others_no_fit += !chosen;
      return std::nullopt;
    }
    // The lock of kube-scheduler's choice is worth waiting for: binpack
    // sends a batch of pods to one node, and its device plugin releases each
    // pod's lock within moments. But a waiting bind holds a request thread,
    // so past a few waiters the pod goes elsewhere at once.
    std::chrono::milliseconds wait{0};
    std::optional<WaiterSlot> slot;
    if (chosen && config_.node_lock_wait.count() > 0) {
      slot.emplace(lock_waiters_);
      if (!may_redirect || slot->count() <= kMaxLockWaiters) {
        // Half of what is left at most, so that other nodes can still be
        // tried before the deadline.
        wait = std::min(config_.node_lock_wait, may_redirect ? left() / 2 : left());
      }
      if (wait.count() == 0) slot.reset();
    }
    waited = waited || wait.count() > 0;
    bool contended = false;
    std::string e = lock_and_bind(r, uid, node, decided, flight, wait, &contended);
    slot.reset();
    if (e.empty()) return bound(node, moved_because);
    if (!contended) return fail("BindFailed", e);
    if (chosen) {
      first_error = std::move(e);
      moved_because = "NodeLock";
    }
    locked.push_back(node);
    return std::nullopt;
  };
  if (auto done = try_node(r.node, true)) return *done;
  if (may_redirect) {
    // Ranked only now: waiting for the chosen node's lock may have taken
    // seconds, in which other binds filled or locked the nodes that were
    // best before it.
    // All of them, ranked: skipping a taken node costs a lookup, so a bind
    // looks past every taken one for a free one (a burst created in one
    // second can hold all the best); only tries are limited.
    more = alternatives(fitting, r.node, *req->prepared, who, probe, fitting.size());
    for (const std::string& node : more.nodes) {
      if (tried >= kMaxBindNodes - 1) break;
      ++looked;
      // One the node watch (or this process) shows locked by another pod,
      // or with a pod in flight this one could be mistaken for, is not
      // tried: each try of a held lock costs reads of the node and its
      // holder, and a bind trying many held worker threads for seconds.
      if (taken_by_another(node, who, probe)) {
        locked.push_back(node);
        continue;
      }
      ++tried;
      if (auto done = try_node(node, false)) return *done;
    }
  }
  // Every node that fits is locked right now: wait for the best one's lock
  // (unless that was kube-scheduler's choice, waited for already).
  // Counted as a waiter, and not at all past twice the waiters kube-
  // scheduler's choice may have: every bind waiting here would leave no
  // worker for the binds that could go through.
  std::optional<WaiterSlot> last_slot;
  if (!locked.empty() && config_.node_lock_wait.count() > 0) last_slot.emplace(lock_waiters_);
  if (last_slot && (!may_redirect || last_slot->count() <= 2 * kMaxLockWaiters) &&
      !(waited && locked.front() == r.node) && left().count() > 0) {
    const std::string& node = locked.front();
    Decided decided;
    std::optional<InFlightPod> flight;
    if (std::string e = reserve_for(uid, r, node, *req, probe, &decided, &flight); e.empty()) {
      bool contended = false;
      e = lock_and_bind(r, uid, node, decided, flight, std::min(config_.node_lock_wait, left()),
                        &contended);
      if (e.empty()) return bound(node, "NodeLock");
      if (!contended) return fail("BindFailed", e);
      if (node == r.node) first_error = std::move(e);
    }
  }
  // Where the plugin matches pods there is no lock: the node is taken while
  // a pod it could confuse with this one is being allocated there.
  size_t others_locked = 0;
  size_t others_in_flight = 0;
  bool any_lock = false;
  for (const std::string& node : locked) {
    const bool in_flight = matches_pods(node);
    any_lock = any_lock || !in_flight;
    if (node != r.node) (in_flight ? others_in_flight : others_locked) += 1;
  }
  std::string msg = first_error;
  if (more.others > 0) {
    const size_t untried = more.nodes.size() - looked;
    msg += "; of the " + std::to_string(more.others) + " other nodes it fitted in filter, " +
           std::to_string(more.no_fit + others_no_fit) + " no longer fit" +
           (others_in_flight > 0 ? ", " : " and ") + std::to_string(others_locked) +
           " are locked by pods being allocated";
    if (others_in_flight > 0) {
      msg += " and " + std::to_string(others_in_flight) +
             " are allocating a pod their device plugin could not tell from this one (as "
             "many GPUs; created in the same second, or bound in the other order)";
    }
    if (untried > 0) msg += " (" + std::to_string(untried) + " more not tried)";
  }
  if (!locked.empty()) {
    if (!any_lock) {
      return fail("InFlight", msg +
                                  "; those pods are allocated within moments, then kube-scheduler "
                                  "binds this one on its next try; if they stay pending, check "
                                  "the device plugin on " +
                                  locked.front());
    }
    return fail("NodeLock", msg +
                                "; the device plugin releases a node's lock once kubelet has "
                                "allocated the pod named in it: if a lock stays, check the "
                                "device plugin on " +
                                locked.front());
  }
  return fail("NoFit", msg + "; kube-scheduler tries again when GPUs are freed or nodes added");
}

}  // namespace hami::scheduler
