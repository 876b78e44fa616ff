#include "fit/fit.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstring>

namespace hami::fit {
namespace {

std::atomic<uint64_t> g_next_pod_id{1};

// Enough for any real cluster's models × modes; a flood of odd strings only
// costs recomputation, never memory.
constexpr size_t kMaxVerdicts = 64;
constexpr size_t kMaxDevices = 0xFFFF;

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

bool contains(std::string_view hay, std::string_view needle) {
  return hay.find(needle) != std::string_view::npos;
}

bool contains_any(std::string_view hay, const std::vector<std::string>& needles) {
  for (const auto& n : needles)
    if (contains(hay, n)) return true;
  return false;
}

// String equality without a libc call, for the short model and mode names
// compared for every GPU of every node.
bool same(const std::string& a, const std::string& b) {
  const size_t n = a.size();
  if (n != b.size()) return false;
  const char* p = a.data();
  const char* q = b.data();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x, y;
    std::memcpy(&x, p + i, 8);
    std::memcpy(&y, q + i, 8);
    if (x != y) return false;
  }
  for (; i < n; ++i)
    if (p[i] != q[i]) return false;
  return true;
}

FitScratch::TypeVerdict make_verdict(const GpuDevice& d, const PreparedPod& pod) {
  const PodOptions& o = pod.options();
  FitScratch::TypeVerdict v{d.type, d.mode, d.model_id, 0, true};
  const std::string type = upper(d.type);
  for (size_t k = 0; k < pod.vendor_keys().size(); ++k)
    if (contains(type, pod.vendor_keys()[k])) v.vendors |= 1u << k;
  if (!o.use_types.empty() && !contains_any(type, o.use_types)) v.allowed = false;
  if (contains_any(type, o.nouse_types)) v.allowed = false;
  if (o.vgpu_mode && !contains(*o.vgpu_mode, d.mode)) v.allowed = false;
  // An MPS GPU's tenants are clients of one MPS server: a pod that did not ask
  // for that (no annotation accepts every mode) must not join them.
  if (d.mode == kModeMps && !(o.vgpu_mode && contains(*o.vgpu_mode, kModeMps))) v.allowed = false;
  return v;
}

const FitScratch::TypeVerdict& verdict_for(const GpuDevice& d, const PreparedPod& pod,
                                           FitScratch& s) {
  auto matches = [&](const FitScratch::TypeVerdict& v) {
    if (v.model_id != 0 && d.model_id != 0) return v.model_id == d.model_id;
    return same(v.type, d.type) && same(v.mode, d.mode);
  };
  if (s.last_verdict < s.verdicts.size() && matches(s.verdicts[s.last_verdict])) {
    return s.verdicts[s.last_verdict];
  }
  for (size_t i = 0; i < s.verdicts.size(); ++i) {
    if (matches(s.verdicts[i])) {
      s.last_verdict = i;
      return s.verdicts[i];
    }
  }
  if (s.verdicts.size() >= kMaxVerdicts) s.verdicts.clear();
  s.verdicts.push_back(make_verdict(d, pod));
  s.last_verdict = s.verdicts.size() - 1;
  return s.verdicts.back();
}

bool uuid_accepted(const std::string& uuid, const PodOptions& o) {
  auto listed = [&](const std::vector<std::string>& l) {
    return std::find(l.begin(), l.end(), uuid) != l.end();
  };
  if (!o.use_uuids.empty() && !listed(o.use_uuids)) return false;
  return !listed(o.nouse_uuids);
}

constexpr uint8_t kTypeAllowed = 1;
constexpr uint8_t kUuidAccepted = 2;

constexpr Reason kPass = Reason::kCount;

// The checks upstream makes before its numa-bind bookkeeping.
Reason check_before_numa(const GpuDevice& d, uint8_t eligible) {
  if (!d.healthy) return Reason::kCardNotHealth;
  if (d.cordoned) return Reason::kCardCordoned;
  if (!(eligible & kTypeAllowed)) return Reason::kCardTypeMismatch;
  return kPass;
}

// The checks after it; mem receives what the container would take here.
Reason check_after_numa(const GpuDevice& d, const DeviceUsage& u, uint8_t eligible,
                        const ContainerRequest& c, int32_t cores, bool mutex, int64_t user,
                        int32_t& mem) {
  if (!(eligible & kUuidAccepted)) return Reason::kCardUuidMismatch;
  if (d.mode == kModeMps && d.mps_user_pods > 0 && d.mps_user != user)
    return Reason::kMpsUserMismatch;
  if (d.split_count <= u.tenants) return Reason::kCardTimeSlicingExhausted;
  if (mutex && u.tenants > 0) return Reason::kExclusiveDeviceAllocateConflict;
  int64_t want = c.mem_mib;
  if (want <= 0 && c.mem_percent != kMemPercentUnset) {
    want = int64_t{d.total_mem_mib} * c.mem_percent / 100;
  }
  if (int64_t{d.total_mem_mib} - u.mem_mib < want) return Reason::kCardInsufficientMemory;
  mem = static_cast<int32_t>(want);
  // A dynamic MIG GPU: cores are percent of the MIG device made for the
  // container, not of the GPU; check_mig decides.
  if (!d.mig_profiles.empty()) return kPass;
  if (int64_t{d.total_cores} - u.cores < cores) return Reason::kCardInsufficientCore;
  if (d.total_cores == 100 && cores == 100 && u.tenants > 0) {
    return Reason::kExclusiveDeviceAllocateConflict;
  }
  if (u.cores == d.total_cores && cores == 0) return Reason::kCardComputeUnitsExhausted;
  return kPass;
}

// Upstream's last check on a dynamic MIG GPU: a MIG device of an allowed
// profile that holds `mem` (0: any) at a placement free of instances,
// reservations and this pod's earlier picks. Fills a's profile, placement
// and, where the container gave no size, its memory (the whole MIG device).
Reason check_mig(const GpuDevice& d, uint16_t i, FitScratch& s, Assignment& a) {
  if (d.mig_profiles.empty()) return kPass;
  s.mig_taken.assign(d.mig_taken.begin(), d.mig_taken.end());
  for (const auto& [dev, pl] : s.mig_picks)
    if (dev == i) s.mig_taken.push_back(pl);
  auto pick = choose_mig(d.mig_profiles, s.mig_taken, a.mem_mib);
  if (!pick) return Reason::kCardMigTopologyInfeasible;
  for (size_t k = 0; k < d.mig_profiles.size(); ++k) {
    if (d.mig_profiles[k].name == pick->profile) a.mig_profile = static_cast<int16_t>(k);
  }
  a.mig_placement = pick->placement;
  if (a.mem_mib == 0) a.mem_mib = pick->memory_mib;
  return kPass;
}

DeviceKey key_of(const GpuDevice& d, const DeviceUsage& u, const ScoringWeights& w) {
  return {device_score(d, u, w), d.numa, d.index, u.tenants};
}

// Which `nums` of the passing GPUs (s.chosen, walked in s.order) a container
// takes on a node that says how its GPUs connect; into s.trial_chosen, in
// walk order. topology-aware: the best-connected set of all of them (one GPU:
// the least connected). Other policies: the GPUs the policy ranks above the
// last one it would take stay, and among those it cannot tell apart from
// that last one, the best-connected completion wins.
void choose_by_topology(const NodeDevices& node, int32_t nums, const GpuPolicy& policy,
                        FitScratch& s) {
  const size_t want = static_cast<size_t>(nums);
  const size_t passing = s.order.size();
  size_t first = 0;  // walk positions [first, last) compete
  size_t last = passing;
  if (!policy.topology_aware) {
    const DeviceKey& edge = s.keys[s.order[want - 1]];
    first = want - 1;
    while (first > 0 && same_rank(s.keys[s.order[first - 1]], edge, policy))
      --first;
    last = want;
    while (last < passing && same_rank(s.keys[s.order[last]], edge, policy))
      ++last;
  }
  s.forced.clear();
  s.pool.clear();
  for (size_t w = 0; w < last; ++w)
    (w < first ? s.forced : s.pool).push_back(s.chosen[s.order[w]].device);
  s.picked.clear();
  if (want == 1) {
    s.picked.push_back(static_cast<uint16_t>(least_connected(node.links, s.pool)));
  } else if (last == want) {
    for (size_t w = first; w < last; ++w)
      s.picked.push_back(static_cast<uint16_t>(w - first));
  } else {
    choose_connected(node.links, s.forced, s.pool, want - first, s.connect, s.picked);
  }
  s.trial_chosen.clear();
  for (size_t w = 0; w < first; ++w)
    s.trial_chosen.push_back(s.chosen[s.order[w]]);
  for (const uint16_t p : s.picked)
    s.trial_chosen.push_back(s.chosen[s.order[first + p]]);
}

// Upstream walks the ordered GPUs and takes the first that pass. Without
// numa-bind whether a GPU passes does not depend on the walk (the
// container's own picks are charged only at the end), so: check every GPU
// once, then take the first `nums` passing ones in walk order. That is the
// same choice and the same reasons, without ordering the GPUs that fail
// (and, for one GPU, without ordering at all).
// decide_only: the caller needs only whether the container fits, not which
// GPUs it would take (the last container of a fit without a placement).
bool choose_unbound(const NodeDevices& node, const ContainerRequest& c, uint16_t ci,
                    const std::vector<DeviceUsage>& usage, const PodOptions& o, int32_t cores,
                    bool decide_only, FitScratch& s, FitFailure& failure) {
  s.chosen.clear();
  for (const uint16_t i : s.candidates) {
    const GpuDevice& d = node.devices[i];
    int32_t mem = 0;
    Reason r = check_before_numa(d, s.eligible[i]);
    if (r == kPass)
      r = check_after_numa(d, usage[i], s.eligible[i], c, cores, o.gpu_policy.mutex, o.user, mem);
    Assignment a{ci, i, mem, cores};
    if (r == kPass) r = check_mig(d, i, s, a);
    if (r != kPass) {
      failure.add(r);
      continue;
    }
    s.chosen.push_back(a);
  }
  const size_t passing = s.chosen.size();
  if (passing < static_cast<size_t>(c.nums)) {
    if (passing > 0) {
      failure.add(Reason::kAllocatedCardsInsufficientRequest, static_cast<uint16_t>(passing));
    }
    return false;
  }
  if (decide_only) return true;
  s.keys.clear();
  for (const Assignment& a : s.chosen)
    s.keys.push_back(key_of(node.devices[a.device], usage[a.device], o.weights));
  const bool by_topology = passing > static_cast<size_t>(c.nums) && !node.links.empty() &&
                           node.links.size() == node.devices.size();
  if (c.nums == 1 && !(by_topology && o.gpu_policy.topology_aware)) {
    size_t best = 0;
    for (size_t k = 1; k < passing; ++k)
      if (tried_before(s.keys[k], s.keys[best], o.gpu_policy, false)) best = k;
    s.chosen[0] = s.chosen[best];
    s.chosen.resize(1);
    return true;
  }
  order_devices(s.keys, o.gpu_policy, false, s.order);
  if (by_topology) {
    choose_by_topology(node, c.nums, o.gpu_policy, s);
  } else {
    s.trial_chosen.clear();
    for (int32_t k = 0; k < c.nums; ++k)
      s.trial_chosen.push_back(s.chosen[s.order[k]]);
  }
  s.chosen.swap(s.trial_chosen);
  return true;
}

// With numa-bind the walk order matters: a GPU on another NUMA node than the
// previous candidate starts the selection over, as upstream does.
bool choose_numa_bound(const NodeDevices& node, const ContainerRequest& c, uint16_t ci,
                       const std::vector<DeviceUsage>& usage, const PodOptions& o, int32_t cores,
                       FitScratch& s, FitFailure& failure) {
  s.keys.clear();
  for (const uint16_t i : s.candidates)
    s.keys.push_back(key_of(node.devices[i], usage[i], o.weights));
  order_devices(s.keys, o.gpu_policy, true, s.order);

  int32_t remaining = c.nums;
  bool have_numa = false;
  int32_t numa = 0;
  s.chosen.clear();
  for (const uint16_t pos : s.order) {
    const uint16_t i = s.candidates[pos];
    const GpuDevice& d = node.devices[i];
    Reason r = check_before_numa(d, s.eligible[i]);
    if (r != kPass) {
      failure.add(r);
      continue;
    }
    if (!have_numa || numa != d.numa) {
      if (remaining != c.nums) {
        failure.add(Reason::kNumaNotFit, static_cast<uint16_t>(s.chosen.size()));
      }
      remaining = c.nums;
      numa = d.numa;
      have_numa = true;
      s.chosen.clear();
    }
    int32_t mem = 0;
    r = check_after_numa(d, usage[i], s.eligible[i], c, cores, o.gpu_policy.mutex, o.user, mem);
    Assignment a{ci, i, mem, cores};
    if (r == kPass) r = check_mig(d, i, s, a);
    if (r != kPass) {
      failure.add(r);
      continue;
    }
    s.chosen.push_back(a);
    if (--remaining == 0) return true;
  }
  if (!s.chosen.empty()) {
    failure.add(Reason::kAllocatedCardsInsufficientRequest, static_cast<uint16_t>(s.chosen.size()));
  }
  return false;
}

// Upstream's NVIDIA Fit for one container against usage, which it updates on
// success. The checks and their order are upstream's, §3.5.
bool fit_container(const NodeDevices& node, const PreparedPod& pod, uint16_t ci,
                   std::vector<DeviceUsage>& usage, FitScratch& s, FitFailure& failure,
                   Placement* placement, bool last) {
  const ContainerRequest& c = pod.request().containers[ci];
  const PodOptions& o = pod.options();
  const uint32_t vendor_bit = 1u << pod.vendor_of(ci);
  failure = FitFailure{};  // only the container that fails reports its reasons

  s.candidates.clear();
  for (size_t i = 0; i < node.devices.size(); ++i)
    if (s.vendors[i] & vendor_bit) s.candidates.push_back(static_cast<uint16_t>(i));
  const auto cards = static_cast<uint16_t>(s.candidates.size());
  failure.cards = cards;
  if (c.nums > cards) {
    failure.node_insufficient_device = true;
    return false;
  }
  const int32_t cores = std::clamp(c.cores, 0, 100);
  // Nothing reads which GPUs the last container would take unless the caller
  // asked for the placement: filter over 5,000 nodes skips ordering them.
  const bool decide_only = last && placement == nullptr;
  const bool ok = o.numa_bind
                      ? choose_numa_bound(node, c, ci, usage, o, cores, s, failure)
                      : choose_unbound(node, c, ci, usage, o, cores, decide_only, s, failure);
  if (!ok) return false;
  if (decide_only) return true;
  for (const Assignment& a : s.chosen) {
    DeviceUsage& du = usage[a.device];
    du.tenants += 1;
    du.mem_mib += a.mem_mib;
    du.cores += a.cores;
    if (a.mig_profile >= 0) s.mig_picks.emplace_back(a.device, a.mig_placement);
    if (placement) placement->assignments.push_back(a);
  }
  return true;
}

}  // namespace

Result<PreparedPod> PreparedPod::make(PodRequest request, PodOptions options) {
  PreparedPod p;
  if (request.containers.size() > 0xFFFF) {
    return Error{"pod has " + std::to_string(request.containers.size()) + " containers"};
  }
  p.vendor_of_.assign(request.containers.size(), 0);
  for (size_t i = 0; i < request.containers.size(); ++i) {
    const ContainerRequest& c = request.containers[i];
    auto bad = [&](const char* why) {
      return Error{"container " + std::to_string(i) + ": " + why};
    };
    if (c.nums < 0) return bad("negative GPU count");
    if (c.nums == 0) continue;
    if (c.type.empty()) return bad("empty device type");
    if (c.mem_mib < 0) return bad("negative memory");
    if (c.cores < 0) return bad("negative cores");
    if (c.mem_percent != kMemPercentUnset && (c.mem_percent < 1 || c.mem_percent > 100)) {
      return bad("memory percentage outside 1..100");
    }
    // One MPS server per GPU, and a client reaches one server.
    if (c.nums > 1 && options.vgpu_mode && contains(*options.vgpu_mode, kModeMps)) {
      return Error{"container " + std::to_string(i) + " asks for " + std::to_string(c.nums) +
                   " GPUs with nvidia.com/vgpu-mode " + *options.vgpu_mode +
                   ": a container on an MPS GPU takes exactly one GPU"};
    }
    std::string key = upper(c.type);
    auto it = std::find(p.vendors_.begin(), p.vendors_.end(), key);
    if (it == p.vendors_.end()) {
      if (p.vendors_.size() == 32) return bad("more than 32 device types in one pod");
      p.vendors_.push_back(std::move(key));
      it = p.vendors_.end() - 1;
    }
    p.vendor_of_[i] = static_cast<uint8_t>(it - p.vendors_.begin());
    p.empty_ = false;
  }
  // Model filters match case-insensitively whoever built the options.
  for (auto* list : {&options.use_types, &options.nouse_types})
    for (std::string& t : *list)
      t = upper(t);
  p.request_ = std::move(request);
  p.options_ = std::move(options);
  p.id_ = g_next_pod_id.fetch_add(1, std::memory_order_relaxed);
  return p;
}

NodeFit fit_pod(const NodeDevices& node, const PreparedPod& pod, FitScratch& s,
                Placement* placement) {
  if (placement) placement->assignments.clear();
  NodeFit result;
  if (pod.empty()) {
    result.fits = true;
    if (placement) result.score = node_score(node);
    return result;
  }
  if (node.devices.size() > kMaxDevices) {
    result.failure.node_insufficient_device = true;
    return result;
  }
  if (s.pod_id != pod.id()) {
    s.verdicts.clear();
    s.pod_id = pod.id();
  }
  const PodOptions& o = pod.options();
  const bool check_uuids = !o.use_uuids.empty() || !o.nouse_uuids.empty();
  const size_t n = node.devices.size();
  s.vendors.resize(n);
  s.eligible.resize(n);
  s.state.resize(n);
  s.mig_picks.clear();
  for (size_t i = 0; i < n; ++i) {
    const GpuDevice& d = node.devices[i];
    const FitScratch::TypeVerdict& v = verdict_for(d, pod, s);
    s.vendors[i] = v.vendors;
    s.eligible[i] =
        static_cast<uint8_t>((v.allowed ? kTypeAllowed : 0) |
                             (!check_uuids || uuid_accepted(d.uuid, o) ? kUuidAccepted : 0));
    s.state[i] = usage_of(d);
  }

  const auto& containers = pod.request().containers;
  size_t last = 0;
  for (size_t ci = 0; ci < containers.size(); ++ci)
    if (containers[ci].nums != 0) last = ci;
  for (size_t ci = 0; ci < containers.size(); ++ci) {
    if (containers[ci].nums == 0) continue;
    // An init container runs alone: it is fitted against what the earlier
    // sidecars hold, and leaves nothing behind for the containers after it.
    std::vector<DeviceUsage>* usage = &s.state;
    if (containers[ci].kind == ContainerKind::kInit) {
      s.trial = s.state;
      usage = &s.trial;
    }
    if (!fit_container(node, pod, static_cast<uint16_t>(ci), *usage, s, result.failure, placement,
                       ci == last)) {
      result.failure.container = static_cast<uint16_t>(ci);
      if (placement) placement->assignments.clear();
      return result;
    }
  }
  result.fits = true;
  if (placement) result.score = node_score(node);
  return result;
}

PodDevices to_pod_devices(const NodeDevices& node, const PreparedPod& pod,
                          const Placement& placement) {
  const auto& containers = pod.request().containers;
  PodDevices out(containers.size());
  for (const Assignment& a : placement.assignments) {
    if (a.container >= out.size() || a.device >= node.devices.size()) continue;
    out[a.container].push_back(
        {node.devices[a.device].uuid, containers[a.container].type, a.mem_mib, a.cores});
  }
  return out;
}

std::vector<protocol::MigAllocation> to_mig_allocations(const NodeDevices& node,
                                                        const Placement& placement) {
  std::vector<protocol::MigAllocation> out;
  std::vector<int> per_container;
  for (const Assignment& a : placement.assignments) {
    if (a.container >= per_container.size()) per_container.resize(a.container + 1u, 0);
    const int position = per_container[a.container]++;
    if (a.mig_profile < 0 || a.device >= node.devices.size()) continue;
    const GpuDevice& d = node.devices[a.device];
    if (static_cast<size_t>(a.mig_profile) >= d.mig_profiles.size()) continue;
    protocol::MigAllocation m;
    m.container_index = a.container;
    m.device_index = position;
    m.gpu_uuid = d.uuid;
    m.profile = d.mig_profiles[static_cast<size_t>(a.mig_profile)].name;
    m.placement = a.mig_placement;
    out.push_back(std::move(m));
  }
  return out;
}

Result<PodDevices> place_pod(const NodeDevices& node, const PreparedPod& pod) {
  FitScratch scratch;
  Placement placement;
  const NodeFit f = fit_pod(node, pod, scratch, &placement);
  if (!f.fits) return Error{"node " + node.name + ": " + describe(f.failure)};
  return to_pod_devices(node, pod, placement);
}

}  // namespace hami::fit
