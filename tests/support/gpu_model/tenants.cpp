#include "gpu_model/tenants.hpp"

#include <algorithm>
#include <limits>

namespace hami::test {

using vgpu::limiter::LaunchLimiter;
using vgpu::limiter::LimiterOptions;

namespace {
constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
}  // namespace

int Tenants::add(const TenantSpec& spec) {
  tenants_.push_back(std::make_unique<Tenant>(gpu_, spec));
  Tenant& x = *tenants_.back();
  x.next = spec.cycle.empty() ? kNever : spec.start_ns + shape(x).host_ns;
  return static_cast<int>(tenants_.size()) - 1;
}

const Shape& Tenants::shape(const Tenant& x) {
  const size_t n = x.spec.prologue.size();
  return x.shape < n ? x.spec.prologue[x.shape] : x.spec.cycle[(x.shape - n) % x.spec.cycle.size()];
}

LaunchLimiter& Tenants::limit(int i, const LimiterOptions& options) {
  Tenant& x = t(i);
  x.owned = std::make_unique<LaunchLimiter>(options, x.timer);
  x.lim = x.owned.get();
  return *x.lim;
}

void Tenants::run_until(int64_t end) {
  for (;;) {
    Tenant* first = nullptr;
    bool blocked = false;
    for (const auto& p : tenants_) {
      if (p->phase == Phase::kBlocked) {
        blocked = true;
      } else if (first == nullptr || p->next < first->next) {
        first = p.get();
      }
    }
    const int64_t t = first != nullptr ? std::min(first->next, end) : end;
    if (blocked) {
      // Run the GPU to the next action, or to the moment a blocked launch
      // finds room in its queue, whichever comes first.
      const int64_t reached = gpu_.advance_until_watch(t);
      bool woke = false;
      for (const auto& p : tenants_) {
        if (p->phase == Phase::kBlocked && gpu_.queued(p->ctx) < p->spec.queue_limit) {
          gpu_.watch(p->ctx, 0);
          p->phase = Phase::kUnblocked;
          p->next = reached;
          woke = true;
        }
      }
      if (woke) continue;
    }
    if (first == nullptr || first->next >= end) break;
    step(*first);
  }
  gpu_.advance_to(std::max(end, gpu_.now()));
}

void Tenants::step(Tenant& x) {
  const int64_t now = x.next;
  gpu_.advance_to(now);
  switch (x.phase) {
    case Phase::kHost: {
      x.call_ns = now;
      x.light = false;
      if (x.lim != nullptr && now < x.spec.enforced_from_ns) {
        observe(x, now);
        return;
      }
      if (x.lim != nullptr) {
        const Shape& s = shape(x);
        if (x.lim->light_launch(x.w, s.key, x.spec.stream)) {
          x.light = true;
          if (x.since_wait < kWarmLaunches) ++x.since_wait;
          call(x, now);
          return;
        }
        const int64_t go = x.lim->admit(s.key, s.path, now);
        if (go - now >= kMinWaitNs) {
          LaunchLimiter::end_window(x.w);  // a sample must not contain our own wait
          x.timer.take_host_cost();        // spent before the sleep, which ends at `go` anyway
          x.go_ns = go + kBatchNs;
          x.phase = Phase::kWaiting;
          x.next = std::min(x.go_ns, now + kWaitSliceNs);
          x.since_wait = 0;
          return;
        }
      }
      launch(x, now);
      return;
    }
    case Phase::kWaiting:
      x.lim->harvest(now);
      if (now < x.go_ns) {
        x.next = std::min(x.go_ns, now + kWaitSliceNs);
        return;
      }
      x.lim->note_wait(now - x.call_ns);
      x.waited_ns += now - x.call_ns;
      x.call_ns = now;
      x.woke_ns = now;
      launch(x, now);
      return;
    case Phase::kUnblocked:
      enqueue(x, now);
      return;
    case Phase::kBlocked:
      return;  // not scheduled
  }
}

void Tenants::launch(Tenant& x, int64_t now) {
  if (x.lim != nullptr) {
    if (x.since_wait < kWarmLaunches) ++x.since_wait;
    if (x.lim->before_launch(x.w, shape(x).key, x.spec.stream, now, x.since_wait >= kWarmLaunches,
                             shape(x).path)) {
      // paced() reads the clock again once a run's start mark is made.
      x.marks_ns += x.timer.take_host_cost();
      LaunchLimiter::start_run_clock(x.w, now + x.marks_ns);
    }
  }
  call(x, now);
}

void Tenants::observe(Tenant& x, int64_t now) {
  const Shape& s = shape(x);
  x.light = true;  // unless a sample is opened: then the hook's work after the call
  if (LaunchLimiter* owner = x.w.owner) {
    if (!owner->light_launch(x.w, s.key, x.spec.stream)) {
      LaunchLimiter::end_window(x.w, now);
      owner->harvest(now);
    }
  } else if ((++x.unenforced & (kObserveEvery - 1)) == 0) {
    x.since_wait = kWarmLaunches;
    x.light = false;
    if (x.lim->observe(x.w, s.key, x.spec.stream, now, s.path)) {
      x.marks_ns += x.timer.take_host_cost();
      LaunchLimiter::start_run_clock(x.w, now + x.marks_ns);
    }
  }
  call(x, now);
}

void Tenants::call(Tenant& x, int64_t now) {
  if (gpu_.queued(x.ctx) >= x.spec.queue_limit) {
    // The driver's launch blocks until the queue has room.
    x.phase = Phase::kBlocked;
    x.next = kNever;
    gpu_.watch(x.ctx, x.spec.queue_limit);
    return;
  }
  enqueue(x, now);
}

void Tenants::enqueue(Tenant& x, int64_t at) {
  gpu_.launch(x.ctx, shape(x).gpu_ns);
  ++x.launches;
  int64_t hook = 0;
  if (x.lim != nullptr && !x.light) {
    x.lim->after_launch(x.w, true);
    x.lim->harvest(x.call_ns);  // paced() harvests with the time it took before the launch
    hook = x.spec.hook_ns;
  }
  const size_t n = x.spec.prologue.size();
  x.shape = x.shape + 1 < n ? x.shape + 1 : n + (x.shape + 1 - n) % x.spec.cycle.size();
  x.phase = Phase::kHost;
  const int64_t back = at + hook + x.marks_ns + x.timer.take_host_cost();  // back in the program
  x.marks_ns = 0;
  int64_t host = shape(x).host_ns;
  const TenantSpec& s = x.spec;
  if (s.slow_every_ns > 0 && back % s.slow_every_ns < s.slow_ns) host = host * s.slow_percent / 100;
  if (back - x.woke_ns < s.throttled_for_ns) host = host * s.throttled_percent / 100;
  x.next = back + host;
}

}  // namespace hami::test
