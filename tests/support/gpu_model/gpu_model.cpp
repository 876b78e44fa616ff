#include "gpu_model/gpu_model.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace hami::test {

int GpuModel::add_context() {
  ctx_.emplace_back();
  return static_cast<int>(ctx_.size()) - 1;
}

int GpuModel::next_with_work(int from) const {
  const int n = static_cast<int>(ctx_.size());
  for (int i = 1; i <= n; ++i) {
    const int c = ((from + i) % n + n) % n;
    if (!ctx_[idx(c)].q.empty()) return c;
  }
  return -1;
}

void GpuModel::push(int ctx, Op op) {
  Context& c = ctx_[idx(ctx)];
  if (c.q.empty()) ++with_work_;
  c.q.push_back(op);
}

void GpuModel::pop(Context& c) {
  c.q.pop_front();
  if (c.q.empty()) --with_work_;
}

void GpuModel::launch(int ctx, int64_t gpu_ns) {
  push(ctx, Op{gpu_ns < 0 ? 0 : gpu_ns, 0});
}

uint64_t GpuModel::record_event(int ctx) {
  uint32_t slot = 0;
  if (!free_events_.empty()) {
    slot = free_events_.back();
    free_events_.pop_back();
  } else {
    slot = static_cast<uint32_t>(events_.size());
    events_.push_back(EventSlot{});
  }
  EventSlot& e = events_[slot];
  ++e.generation;
  e.live = true;
  e.time = -1;
  ++live_events_;
  const uint64_t id = uint64_t{e.generation} << 32 | (uint64_t{slot} + 1);
  push(ctx, Op{options_.event_ns, id});
  return id;
}

const GpuModel::EventSlot* GpuModel::slot_of(uint64_t id) const {
  const uint64_t slot = (id & 0xffffffffu) - 1;
  if ((id & 0xffffffffu) == 0 || slot >= events_.size()) return nullptr;
  const EventSlot& e = events_[slot];
  return e.live && e.generation == static_cast<uint32_t>(id >> 32) ? &e : nullptr;
}

std::optional<int64_t> GpuModel::event_time(uint64_t id) const {
  const EventSlot* e = slot_of(id);
  if (e == nullptr || e->time < 0) return std::nullopt;
  return e->time;
}

void GpuModel::release_event(uint64_t id) {
  EventSlot* e = slot_of(id);
  if (e == nullptr) return;
  e->live = false;
  --live_events_;
  free_events_.push_back(static_cast<uint32_t>((id & 0xffffffffu) - 1));
}

uint64_t GpuModel::completed_between(int ctx, int64_t t0, int64_t t1) const {
  const std::vector<int64_t>& d = ctx_[idx(ctx)].done;
  const auto a = std::lower_bound(d.begin(), d.end(), t0);
  const auto b = std::lower_bound(d.begin(), d.end(), t1);
  return b > a ? static_cast<uint64_t>(b - a) : 0;
}

double GpuModel::speed() const {
  if (options_.boost <= 1.0) return 1.0;
  const double headroom = (1.0 - busy_avg_) / (1.0 - options_.boost_knee);
  return 1.0 + (options_.boost - 1.0) * std::clamp(headroom, 0.0, 1.0);
}

void GpuModel::age(int64_t dt, bool busy) {
  if (options_.boost <= 1.0 || dt <= 0) return;
  const double keep =
      std::exp(-static_cast<double>(dt) / static_cast<double>(options_.power_tau_ns));
  busy_avg_ = busy_avg_ * keep + (busy ? 1.0 - keep : 0.0);
}

void GpuModel::advance_to(int64_t t) {
  run(t, false);
}

int64_t GpuModel::advance_until_watch(int64_t t) {
  for (const Context& c : ctx_)
    if (watch_hit(c)) return t_;
  run(t, true);
  return t_;
}

void GpuModel::run(int64_t t, bool stop_on_watch) {
  assert(t >= t_);
  if (t < t_) return;
  const int64_t slice = options_.timeslice_ns;
  auto begin_switch = [&](int to) {
    state_ = State::kSwitching;
    cur_ = to;
    switch_end_ = t_ + options_.switch_ns;
    switch_total_ns_ += options_.switch_ns;
    ++switches_;
  };
  for (;;) {
    switch (state_) {
      case State::kIdle: {
        const int c = next_with_work(cur_);
        if (c < 0) {
          age(t - t_, false);
          t_ = t;
          return;
        }
        if (cur_ < 0 || c == cur_) {  // the engine still holds this context
          cur_ = c;
          state_ = State::kRunning;
          slice_end_ = t_ + slice;
        } else {
          begin_switch(c);
        }
        break;
      }
      case State::kSwitching:
        if (switch_end_ > t) {
          age(t - t_, false);
          t_ = t;
          return;
        }
        age(switch_end_ - t_, false);
        t_ = switch_end_;
        state_ = State::kRunning;
        slice_end_ = t_ + slice;
        break;
      case State::kRunning: {
        Context& c = ctx_[idx(cur_)];
        if (c.q.empty()) {
          state_ = State::kIdle;
          break;
        }
        const bool others = with_work_ > 1;
        if (t_ >= slice_end_) {
          if (others) {
            begin_switch(next_with_work(cur_));
            break;
          }
          slice_end_ += ((t_ - slice_end_) / slice + 1) * slice;  // alone: the slice renews
        }
        Op& op = c.q.front();
        if (op.event != 0) {
          // A timestamp takes the engine event_ns (not a kernel: not busy time).
          const int64_t lim_t = others ? std::min(t, slice_end_) : t;
          if (t_ + op.remaining > lim_t) {
            op.remaining -= lim_t - t_;
            age(lim_t - t_, false);
            t_ = lim_t;
            if (lim_t == t) return;
            break;
          }
          age(op.remaining, false);
          t_ += op.remaining;
          if (EventSlot* e = slot_of(op.event)) e->time = t_;
          pop(c);
          if (stop_on_watch && watch_hit(c)) return;
          break;
        }
        const int64_t limit = others ? std::min(t, slice_end_) : t;
        // `remaining` is flat-out GPU time; at a boost it takes less.
        const double sp = speed();
        const int64_t need =
            sp == 1.0 ? op.remaining
                      : static_cast<int64_t>(std::ceil(static_cast<double>(op.remaining) / sp));
        if (t_ + need <= limit) {
          age(need, true);
          t_ += need;
          c.busy_ns += need;
          c.done.push_back(t_);
          pop(c);
          if (stop_on_watch && watch_hit(c)) return;
          break;
        }
        const int64_t ran = limit - t_;
        age(ran, true);
        c.busy_ns += ran;
        const int64_t work = sp == 1.0 ? ran : static_cast<int64_t>(static_cast<double>(ran) * sp);
        op.remaining = std::max<int64_t>(1, op.remaining - work);
        t_ = limit;
        if (limit == t) {
          if (!others && t_ >= slice_end_) slice_end_ += ((t_ - slice_end_) / slice + 1) * slice;
          return;
        }
        break;  // the slice is over: the next pass switches
      }
    }
  }
}

ModelTimer::Event ModelTimer::record(uintptr_t) noexcept {
  if (fail_records_) return 0;
  const uint64_t id = gpu_.record_event(ctx_);
  host_cost_ns_ += record_cost_ns_;
  ++records_;
  mine_.push_back(id);
  return id;
}

ModelTimer::Poll ModelTimer::elapsed(Event from, Event to, int64_t* ns) noexcept {
  if (!gpu_.event_known(from) || !gpu_.event_known(to)) return Poll::kFailed;
  const std::optional<int64_t> b = gpu_.event_time(to);
  if (!b) return Poll::kPending;
  const std::optional<int64_t> a = gpu_.event_time(from);
  if (!a) return Poll::kFailed;  // `to` was reached first: not one stream
  *ns = *b - *a;
  return Poll::kReady;
}

void ModelTimer::release(Event e) noexcept {
  if (e == 0) return;
  auto erase = [e](std::vector<uint64_t>& v) {
    const auto it = std::find(v.begin(), v.end(), e);
    if (it == v.end()) return false;
    *it = v.back();
    v.pop_back();
    return true;
  };
  if (erase(mine_)) {
    gpu_.release_event(e);
  } else if (!erase(gone_)) {
    ++bad_releases_;
  }
}

void ModelTimer::invalidate_events() {
  for (const uint64_t id : mine_) {
    gpu_.release_event(id);
    gone_.push_back(id);
  }
  mine_.clear();
}

}  // namespace hami::test
