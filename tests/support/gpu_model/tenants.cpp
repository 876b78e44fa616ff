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
      x.sampled = false;
      if (x.lim != nullptr) {
        const Shape& s = shape(x);
        if (x.lim->light_launch(x.w, s.key, x.spec.stream)) {
          x.light = true;
          call_after(x, now, now + x.spec.launch_ns);
          return;
        }
        const int64_t go = x.lim->admit(s.key, s.path, now, 1, enforced(x, now));
        if (go - now >= kMinWaitNs) {
          LaunchLimiter::end_window(x.w, now);  // a sample must not contain our own wait
          x.timer.take_host_cost();             // spent before the sleep, which ends at `go` anyway
          x.go_ns = go + kBatchNs;
          x.phase = Phase::kWaiting;
          x.next = std::min(x.go_ns, now + kWaitSliceNs);
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
      launch(x, now);
      return;
    case Phase::kCalling:
      call(x, now);
      return;
    case Phase::kUnblocked:
      enqueue(x, now);
      return;
    case Phase::kBlocked:
      return;  // not scheduled
  }
}

void Tenants::launch(Tenant& x, int64_t now) {
  int64_t t = now;
  if (x.lim != nullptr) {
    const Shape& s = shape(x);
    x.sampled = x.lim->before_launch(x.w, s.key, x.spec.stream, now, s.path, enforced(x, now));
    if (x.sampled) {
      // paced() reads the clock again once the start mark is made, which the
      // GPU sees as its record call returns. The model stamps a mark as the
      // call starts (it enqueues at `now`), so here the clock is read then:
      // the sample's host time is the time from the mark to the launch alike.
      LaunchLimiter::start_clock(x.w, now);
      t += x.timer.take_host_cost();
    }
  }
  call_after(x, now, t + x.spec.launch_ns);
}

void Tenants::call_after(Tenant& x, int64_t now, int64_t at) {
  if (at <= now) {
    call(x, now);
    return;
  }
  x.phase = Phase::kCalling;
  x.next = at;
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
    x.lim->after_launch(x.w, true, at);
    x.lim->harvest(x.call_ns);  // paced() harvests with the time it took before the launch
    hook = x.spec.hook_ns;
  }
  const size_t n = x.spec.prologue.size();
  x.shape = x.shape + 1 < n ? x.shape + 1 : n + (x.shape + 1 - n) % x.spec.cycle.size();
  x.phase = Phase::kHost;
  const int64_t back = at + hook + x.timer.take_host_cost();  // back in the program
  x.next = back + shape(x).host_ns;
}

}  // namespace hami::test
