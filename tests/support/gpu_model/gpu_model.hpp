#pragma once
// GpuModel: a discrete-event model of one GPU without MPS, on a simulated
// clock, for testing the SM limiter (src/vgpu/limiter/) deterministically: no
// sleeps, no wall clock. Each context (one per simulated process) has one FIFO
// stream of ops, kernels (a GPU duration) and timestamp events (no duration).
// One engine is time-sliced between the contexts the way the GPU does it: the
// running context keeps the engine until its queue is empty, or until its
// timeslice ends while another context has work; then the next context with
// work, round robin, gets it after a context-switch cost. A kernel cut by the
// slice end resumes later with what it has left. A context alone keeps the
// engine (its slice renews). Host code calls advance_to(t) before whatever it
// does at time t, then enqueues at t; the model never runs past t.
// ModelTimer is the limiter's GpuTimer over one context of the model.
//
//   hami::test::GpuModel gpu;
//   int a = gpu.add_context(), b = gpu.add_context();
//   gpu.launch(a, 3'000'000);               // at t = 0: 3 ms kernel on a
//   gpu.launch(b, 1'000'000);               // and 1 ms on b
//   uint64_t e = gpu.record_event(b);
//   gpu.advance_to(10'000'000);
//   gpu.event_time(e);                      // 3'025'000 (a ran 2 ms, switch 25 us, b 1 ms)
//   gpu.completions(a);                     // {4'050'000}: a resumed after its 1 ms left
//
//   ModelTimer timer(gpu, a);
//   LaunchLimiter lim(options, timer);      // samples now measure context a

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "vgpu/limiter/gpu_timer.hpp"

namespace hami::test {

class GpuModel {
 public:
  struct Options {
    int64_t timeslice_ns = 2'000'000;
    int64_t switch_ns = 25'000;
    // Engine time a timestamp takes (stamped as it ends); not kernel time.
    int64_t event_ns = 0;
    // Power headroom: kernels run `boost` times faster while the engine's
    // recent busy fraction (an exponential average over `power_tau_ns`) is
    // at most `boost_knee`, slowing linearly to 1x when it is busy all the
    // time, as a GPU clocks up when it has power to spare. On an H200 a GEMM
    // runs 1.15x faster at a 30-70 % duty cycle than flat out at the power
    // limit, and a burst after idle got 83 % of the way to the flat-out time
    // in its first 100 ms (measured with a duty-cycled GEMM loop).
    // Kernel durations are the flat-out ones. 1: no boost.
    double boost = 1.0;
    double boost_knee = 0.75;
    int64_t power_tau_ns = 55'000'000;
  };

  GpuModel() : GpuModel(Options{}) {}
  explicit GpuModel(const Options& options) : options_(options) {}
  GpuModel(const GpuModel&) = delete;
  GpuModel& operator=(const GpuModel&) = delete;

  // A new context with an empty stream; contexts are numbered from 0.
  int add_context();
  int contexts() const { return static_cast<int>(ctx_.size()); }

  // Runs the engine up to time t (>= now()), exactly: a kernel part-way or a
  // switch in progress at t is carried over. Events due at t are stamped.
  void advance_to(int64_t t);
  // Like advance_to, but stops at the first moment (<= t) when a watched
  // context's queue is shorter than its watch (see watch()); returns now().
  int64_t advance_until_watch(int64_t t);
  // Makes advance_until_watch stop once `ctx` has fewer than `below` ops
  // queued; 0 stops watching.
  void watch(int ctx, size_t below) { ctx_[idx(ctx)].watch = below; }
  int64_t now() const { return t_; }

  // Enqueue on `ctx` at now().
  void launch(int ctx, int64_t gpu_ns);
  // An event op; its id (never 0) stays valid until release_event.
  uint64_t record_event(int ctx);
  // When the engine processed the event; nullopt while not yet, or when the
  // id is unknown (released, or never issued).
  std::optional<int64_t> event_time(uint64_t id) const;
  bool event_known(uint64_t id) const { return slot_of(id) != nullptr; }
  void release_event(uint64_t id);
  size_t live_events() const { return live_events_; }

  // Ops (kernels and events) queued on `ctx` and not finished, the running one included.
  size_t queued(int ctx) const { return ctx_[idx(ctx)].q.size(); }
  // Kernels of `ctx` finished, and when each finished (in order).
  uint64_t completed(int ctx) const { return ctx_[idx(ctx)].done.size(); }
  const std::vector<int64_t>& completions(int ctx) const { return ctx_[idx(ctx)].done; }
  // Kernels of `ctx` that finished in [t0, t1).
  uint64_t completed_between(int ctx, int64_t t0, int64_t t1) const;
  // Engine time spent running `ctx`'s kernels, and on context switches.
  int64_t busy_ns(int ctx) const { return ctx_[idx(ctx)].busy_ns; }
  int64_t switch_time_ns() const { return switch_total_ns_; }
  uint64_t switches() const { return switches_; }
  // How fast kernels run now, relative to flat out (1 without boost).
  double speed() const;

 private:
  struct Op {
    int64_t remaining = 0;  // GPU time left (an event: of its event_ns)
    uint64_t event = 0;     // 0: a kernel
  };
  struct Context {
    std::deque<Op> q;
    std::vector<int64_t> done;
    int64_t busy_ns = 0;
    size_t watch = 0;
  };
  struct EventSlot {
    uint32_t generation = 0;
    bool live = false;
    int64_t time = -1;  // -1: not reached
  };
  enum class State { kIdle, kSwitching, kRunning };

  static size_t idx(int ctx) { return static_cast<size_t>(ctx); }
  const EventSlot* slot_of(uint64_t id) const;
  EventSlot* slot_of(uint64_t id) {
    return const_cast<EventSlot*>(static_cast<const GpuModel*>(this)->slot_of(id));
  }
  // The next context with work after `from`, round robin, `from` itself last; -1: none.
  int next_with_work(int from) const;
  void push(int ctx, Op op);
  void pop(Context& c);
  bool watch_hit(const Context& c) const { return c.watch != 0 && c.q.size() < c.watch; }
  void run(int64_t t, bool stop_on_watch);
  // The engine spent `dt` from now, running kernels or not: ages the busy average.
  void age(int64_t dt, bool busy);

  const Options options_;
  std::vector<Context> ctx_;
  int64_t t_ = 0;
  State state_ = State::kIdle;
  int cur_ = -1;  // running, or switched to; the last one to run while idle
  int64_t slice_end_ = 0;
  int64_t switch_end_ = 0;
  int with_work_ = 0;  // contexts whose queue is not empty
  int64_t switch_total_ns_ = 0;
  uint64_t switches_ = 0;
  double busy_avg_ = 0;  // recent busy fraction, for the boost

  std::vector<EventSlot> events_;
  std::vector<uint32_t> free_events_;
  size_t live_events_ = 0;
};

// The limiter's GpuTimer over one context of a GpuModel. Every record costs
// the host `record_cost_ns`, summed for the caller to add to its clock.
class ModelTimer : public vgpu::limiter::GpuTimer {
 public:
  ModelTimer(GpuModel& gpu, int ctx, int64_t record_cost_ns = 0)
      : gpu_(gpu), ctx_(ctx), record_cost_ns_(record_cost_ns) {}

  Event record(uintptr_t stream) noexcept override;
  Poll elapsed(Event from, Event to, int64_t* ns) noexcept override;
  void release(Event e) noexcept override;
  bool reached(Event e) noexcept override { return gpu_.event_time(e).has_value(); }

  // Host time the records made since the last call.
  int64_t take_host_cost() noexcept {
    const int64_t c = host_cost_ns_;
    host_cost_ns_ = 0;
    return c;
  }
  // Makes record() fail (return 0) while set.
  void fail_records(bool fail) { fail_records_ = fail; }
  // The context is gone: every event recorded so far is released, and later
  // queries of them fail (releasing them again is harmless).
  void invalidate_events();
  uint64_t records() const { return records_; }
  size_t live() const { return mine_.size(); }  // recorded and not released
  // release() of an id this timer never issued, or issued and released already.
  uint64_t bad_releases() const { return bad_releases_; }
  int context() const { return ctx_; }

 private:
  GpuModel& gpu_;
  const int ctx_;
  const int64_t record_cost_ns_;
  int64_t host_cost_ns_ = 0;
  bool fail_records_ = false;
  uint64_t records_ = 0;
  uint64_t bad_releases_ = 0;
  std::vector<uint64_t> mine_;  // ids recorded and not released
  std::vector<uint64_t> gone_;  // ids invalidated and not released since
};

}  // namespace hami::test
