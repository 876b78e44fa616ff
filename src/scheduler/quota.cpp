#include "scheduler/quota.hpp"

#include <algorithm>
#include <limits>

#include <nlohmann/json.hpp>

#include "common/log.hpp"
#include "fit/quantity.hpp"

namespace hami::scheduler {

QuotaRequest quota_request(const fit::PodRequest& request) {
  QuotaRequest app, init;
  for (const fit::ContainerRequest& c : request.containers) {
    if (c.nums <= 0) continue;
    const int64_t mem = int64_t{c.mem_mib} * c.nums;
    const int64_t cores = int64_t{c.cores} * c.nums;
    const bool pct = c.mem_mib == 0 && c.mem_percent != fit::kMemPercentUnset;
    if (c.kind == fit::ContainerKind::kInit) {
      init.mem_mib = std::max(init.mem_mib, mem);
      init.cores = std::max(init.cores, cores);
      init.mem_percent = init.mem_percent || pct;
    } else {
      app.mem_mib += mem;
      app.cores += cores;
      app.mem_percent = app.mem_percent || pct;
    }
  }
  return {std::max(app.mem_mib, init.mem_mib), std::max(app.cores, init.cores),
          app.mem_percent || init.mem_percent};
}

namespace {

struct Meta {
  std::string ns, name;
};

std::optional<Meta> meta_of(const nlohmann::json& rq) {
  if (!rq.is_object()) return std::nullopt;
  auto m = rq.find("metadata");
  if (m == rq.end() || !m->is_object()) return std::nullopt;
  auto ns = m->find("namespace");
  auto name = m->find("name");
  if (ns == m->end() || name == m->end() || !ns->is_string() || !name->is_string())
    return std::nullopt;
  Meta out{ns->get<std::string>(), name->get<std::string>()};
  if (out.ns.empty() || out.name.empty()) return std::nullopt;
  return out;
}

}  // namespace

void QuotaTracker::quota_changed(const nlohmann::json& rq) {
  auto meta = meta_of(rq);
  if (!meta) return;
  std::map<std::string, int64_t> ours;
  const nlohmann::json* hard = nullptr;
  if (auto spec = rq.find("spec"); spec != rq.end() && spec->is_object()) {
    if (auto h = spec->find("hard"); h != spec->end() && h->is_object()) hard = &*h;
  }
  if (hard != nullptr) {
    for (const std::string* name : {&resources_.memory_name, &resources_.cores_name}) {
      if (name->empty()) continue;
      auto v = hard->find("limits." + *name);
      if (v == hard->end()) continue;
      auto q = v->is_string() ? fit::parse_whole_quantity(v->get<std::string>())
                              : Result<int64_t>(Error{"not a quantity string"});
      if (!q || *q < 0) {
        log::warn("ResourceQuota %s/%s: limits.%s: %s; that limit is not enforced",
                  meta->ns.c_str(), meta->name.c_str(), name->c_str(),
                  q ? "negative" : q.error().message.c_str());
        continue;
      }
      int64_t limit = *q;
      if (name == &resources_.memory_name && resources_.memory_factor > 1) {
        const int64_t f = resources_.memory_factor;
        limit = limit > std::numeric_limits<int64_t>::max() / f
                    ? std::numeric_limits<int64_t>::max()
                    : limit * f;
      }
      ours[*name] = limit;
    }
  }
  std::lock_guard lk(mu_);
  auto& in_ns = quotas_[meta->ns];
  const bool had = in_ns.count(meta->name) > 0;
  if (ours.empty()) {
    if (had) {
      in_ns.erase(meta->name);
      objects_.fetch_sub(1, std::memory_order_relaxed);
    }
    if (in_ns.empty()) quotas_.erase(meta->ns);
    return;
  }
  if (!had) objects_.fetch_add(1, std::memory_order_relaxed);
  in_ns[meta->name] = std::move(ours);
}

void QuotaTracker::quota_deleted(const nlohmann::json& rq) {
  auto meta = meta_of(rq);
  if (!meta) return;
  std::lock_guard lk(mu_);
  auto ns = quotas_.find(meta->ns);
  if (ns == quotas_.end()) return;
  if (ns->second.erase(meta->name) > 0) objects_.fetch_sub(1, std::memory_order_relaxed);
  if (ns->second.empty()) quotas_.erase(ns);
}

std::string QuotaTracker::check(const std::string& ns, const NamespaceUsage& used,
                                const QuotaRequest& need) const {
  if (!any()) return "";
  std::lock_guard lk(mu_);
  auto it = quotas_.find(ns);
  if (it == quotas_.end()) return "";
  for (const auto& [quota, limits] : it->second) {
    for (const auto& [resource, limit] : limits) {
      const bool mem = resource == resources_.memory_name;
      const int64_t u = mem ? used.mem_mib : used.cores;
      const int64_t n = mem ? need.mem_mib : need.cores;
      // u + n > limit, without overflow.
      if (n > 0 && (u > limit || n > limit - u)) {
        return std::string(kReasonQuota) + ": namespace " + ns + " ResourceQuota " + quota +
               " limits " + resource + " to " + std::to_string(limit) + "; " + std::to_string(u) +
               " used + " + std::to_string(n) + " requested";
      }
    }
  }
  return "";
}

std::vector<QuotaTracker::Limit> QuotaTracker::limits() const {
  std::vector<Limit> out;
  std::lock_guard lk(mu_);
  for (const auto& [ns, objects] : quotas_) {
    std::map<std::string, Limit> least;
    for (const auto& [quota, limits] : objects) {
      for (const auto& [resource, limit] : limits) {
        auto [it, added] = least.try_emplace(resource, Limit{ns, resource, limit, quota});
        if (!added && limit < it->second.limit) it->second = Limit{ns, resource, limit, quota};
      }
    }
    for (auto& [r, l] : least)
      out.push_back(std::move(l));
  }
  return out;
}

}  // namespace hami::scheduler
