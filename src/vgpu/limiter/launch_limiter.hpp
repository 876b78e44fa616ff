#pragma once
// LaunchLimiter: holds one device's launches to an SM share, the container's
// percentage of the GPU's time: the time during which its kernels run, as
// NVML's utilisation and CUPTI show it (docs/sm-limiter.md).
//
//  * Every launch is charged the GPU time it takes as it runs now, looked up
//    by its shape (kernel function, grid, block, shared memory; or the CUDA
//    graph) in a CostTable, and paced by a SharePacer so the charged time
//    stays at the share of wall time. Nothing else is charged: not the host's
//    time between launches, not a speed the program would have flat out.
//  * Costs are measured: now and then a launch is bracketed by two GPU
//    timestamps (GpuTimer). On a busy stream the first is reached when the
//    work before the launch ends, and the two bracket the kernel. On an idle
//    stream the first is reached at once (the limiter asks, right after the
//    launch), and the host's time from the mark to the launch is taken off,
//    and the further lag until the launch reached the GPU, learnt from
//    shapes sampled both ways; on a busy stream the timestamps' own time is,
//    measured now and then by a pair with nothing between. Samples are taken
//    at most once a millisecond, a random few launches after that.
//  * Medians throw away samples stretched by another container's time slice.
//  * A small kernel's launches are admitted in batches: after one is paced,
//    the thread's next launches of it (up to 200 us of charged GPU time) go
//    light, only counted, and are charged together when the batch ends. Paced
//    one by one, a launch-bound program would spend a tenth of its time in
//    our hook.
//  * A container on several GPUs whose other GPUs are busy too is paced by
//    a DutyGate instead: launches run in the same windows of wall time on
//    every GPU, so the ranks of a collective run together (duty_gate.hpp).
//    The caller says which launches are of a collective's kernel (admit's
//    `collective`); no batches then.
//  * The charged time is also added to a counter the process publishes (its
//    state-file slot), which the node agent and `vgpu top` read as the
//    container's SM utilisation. Launches are charged there while the share
//    is not enforced too (admit's `enforced`): they are then only not paced.
//
// Thread-safe. The per-launch path is lock-free (a table probe, one CAS,
// one add); sampling and harvesting take a lock at most once per sample.
//
//   SampleWindow& w = this_thread_window;
//   if (lim.light_launch(w, key, stream)) return real_launch(...);
//   int64_t go = lim.admit(key, LaunchPath::kKernel, now, 1, enforced, collective);
//   if (go > now) {
//     lim.end_window(w);
//     while (clock() < go && !lim.may_go_early(clock())) sleep_a_little();
//     lim.went(now = clock());                  // a no-op unless the gate held it
//   }
//   if (lim.before_launch(w, key, stream, now)) LaunchLimiter::start_clock(w, clock());
//   CUresult rc = real_launch(...);
//   lim.after_launch(w, rc == CUDA_SUCCESS, clock());
//   lim.harvest(now);

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>

#include "vgpu/limiter/cost_table.hpp"
#include "vgpu/limiter/duty_gate.hpp"
#include "vgpu/limiter/gpu_timer.hpp"
#include "vgpu/limiter/share_pacer.hpp"

namespace hami::vgpu::limiter {

struct LimiterOptions {
  uint32_t percent = 100;  // the share, 1..99
  // How far ahead of now the admitted work may reach, in wall time: at a
  // share of p %, p % of it is GPU time a program may use at once after an
  // idle spell (20 ms at 30 %: 6 ms). Programs whose GPU time comes in
  // bursts under that never wait.
  int64_t burst_ns = 20'000'000;
  int64_t sample_interval_ns = 1'000'000;  // between samples of a known launch
  // Once the interval is up, the sample is taken at a random one of this
  // many launches that are not light (1: at the first).
  uint32_t sample_spread = 8;
  int learn_samples = 3;  // a new launch is sampled until then
  // While enforced, a new shape's launches past this many wait for its
  // samples, for at most learn_wait_ns from its first.
  int learn_ahead = 16;
  int64_t learn_wait_ns = 50'000'000;
  int64_t harvest_interval_ns = 100'000;  // between polls of samples in flight
  // Charged GPU time of a batch of light launches of a small kernel (its
  // cost below batch_below_ns) let through after one is paced; 0: none.
  int64_t batch_ns = 200'000;
  int64_t batch_below_ns = 50'000;
  // One pair of timestamps with nothing between, measuring their own time,
  // for every this many samples (and with the first).
  int calibrate_every = 64;
  size_t table_capacity = 8192;
  // The container's pacer clock for this device, shared with its other
  // processes (region::PaceClocks); nullptr: a clock of this limiter's own.
  int64_t* shared_clock = nullptr;
  // The device's count of collective launches (DutyGate), shared the same
  // way; nullptr: the gate's own.
  int64_t* shared_collectives = nullptr;
  int64_t gate_period_ns = kGatePeriodNs;
  // Where the process publishes the GPU time charged on this device (its
  // state-file slot); added to atomically. nullptr: nowhere.
  uint64_t* published_ns = nullptr;
};

// A device whose pace clock is this far behind now has not launched for a
// while: a peer that is not running.
inline constexpr int64_t kLivePeerNs = 1'000'000'000;

enum class LaunchPath : uint8_t { kKernel, kKernelEx, kCooperative, kGraph };
inline constexpr int kLaunchPaths = 4;
const char* to_string(LaunchPath p);

struct LimiterStats {
  std::array<uint64_t, kLaunchPaths> launches{};  // charged launches per path
  uint64_t charged_ns = 0;
  uint64_t waited_ns = 0;
  uint64_t samples = 0;         // launches timed on the GPU
  uint64_t idle_samples = 0;    // of which the stream was idle (the host's time taken off)
  uint64_t gate_waits = 0;      // launches the gate sent to its next window
  uint64_t gate_catch_ups = 0;  // collectives it let through to meet a peer's
  uint64_t collectives = 0;     // launches of collectives' kernels (on several GPUs)
  uint64_t shapes = 0;          // distinct launch shapes seen
  int64_t mark_ns = 0;          // the timestamps' own time, taken off busy samples
  int64_t idle_lag_ns = 0;      // a launch's lag on an idle stream, taken off idle costs
};

class LaunchLimiter;

// The sample one thread is taking, or its batch of light launches (no start
// mark: not timed); lives in thread-local storage.
struct SampleWindow {
  LaunchLimiter* owner = nullptr;  // null: none open
  uintptr_t stream = 0;
  uint64_t key = 0;
  GpuTimer::Event start = 0;  // 0: a batch, not a sample
  int launches = 0;
  int target = 0;
  int64_t opened_ns = 0;  // a sample: host time just after its start mark; a batch: opened
  LaunchPath path = LaunchPath::kKernel;
  uint32_t epoch = 0;     // the shape's when the window opened
  bool enforced = false;  // a batch: its launches are paced when charged
};

class LaunchLimiter {
 public:
  LaunchLimiter(const LimiterOptions& options, GpuTimer& timer);
  LaunchLimiter(const LaunchLimiter&) = delete;
  LaunchLimiter& operator=(const LaunchLimiter&) = delete;

  uint32_t percent() const noexcept { return share_.load(std::memory_order_relaxed); }
  // A resize: the share is `percent` (1..99) from the next launch on; what
  // was charged stays on the clock, so pacing follows at once.
  void set_share(uint32_t percent) noexcept {
    share_.store(percent, std::memory_order_relaxed);
    pace_percent_.store(percent, std::memory_order_relaxed);
  }
  // Paces to `percent` instead of the share (what this process may take when
  // it cannot pace with the container's others); 0: the share again.
  void set_pace_percent(uint32_t percent) noexcept {
    pace_percent_.store(percent != 0 ? percent : share_.load(std::memory_order_relaxed),
                        std::memory_order_relaxed);
  }
  // What this process paces to once it has left a rewound shared clock for
  // one of its own (SharePacer): its part of the share; 0: the share.
  void set_alone_percent(uint32_t percent) noexcept {
    alone_percent_.store(percent, std::memory_order_relaxed);
  }
  uint32_t pace_percent() const noexcept {
    if (pacer_.clock_abandoned()) [[unlikely]] {
      const uint32_t alone = alone_percent_.load(std::memory_order_relaxed);
      if (alone != 0) return alone;
    }
    return pace_percent_.load(std::memory_order_relaxed);
  }
  // Whether the container's shared clock was found rewound, and this
  // process now paces on a clock of its own (SharePacer).
  bool clock_abandoned() const noexcept { return pacer_.clock_abandoned(); }

  // The clocks and collective counts of the container's other devices: while
  // one of them paces too, this device is gated in phase with them
  // (duty_gate.hpp). Set again as the container's devices grow; they stay
  // mapped for the process's life.
  static constexpr int kMaxPeers = DutyGate::kMaxPeers;
  void set_peer_clocks(const int64_t* const* clocks, const int64_t* const* collectives,
                       int n) noexcept;
  int peer_count() const noexcept { return npeers_.load(std::memory_order_relaxed); }
  // Whether launches at `now` go through the gate rather than the pacer.
  bool gated(int64_t now_ns) const noexcept;
  // A launch admit() sent to wait by the gate, checked as it waits: true
  // when it may go now, to catch up with a peer whose kernel waits for it.
  bool may_go_early(int64_t now_ns) noexcept;
  // The launch the calling thread waited for goes now: the gate books it.
  // A no-op for a wait the pacer asked for.
  void went(int64_t now_ns) noexcept;

  // Charges `count` launches of shape `key` and publishes the charge. When
  // `enforced`, returns the time the last may start; otherwise nothing is
  // paced and the answer is `now_ns`. `collective`: the launches are of a
  // collective's kernel, whose ranks on the peer GPUs wait for each other
  // (asked only of a device with peers: see set_peer_clocks).
  int64_t admit(uint64_t key, LaunchPath path, int64_t now_ns, uint32_t count = 1,
                bool enforced = true, bool collective = false) noexcept;
  // Records time a caller spent waiting on admit's answer (for the stats).
  void note_wait(int64_t ns) noexcept;

  // Before the real launch: ends the thread's window, and opens a sample of
  // this launch when one is due (true: the caller then reads the clock into
  // the window with start_clock, just after the start mark), or else, for a
  // small kernel, a batch of light launches (never of a collective's).
  bool before_launch(SampleWindow& w, uint64_t key, uintptr_t stream, int64_t now_ns,
                     LaunchPath path = LaunchPath::kKernel, bool enforced = true,
                     bool collective = false) noexcept;
  static void start_clock(SampleWindow& w, int64_t now_ns) noexcept { w.opened_ns = now_ns; }
  // After it; `now_ns` is the host time just after the launch returned
  // (needed when a sample is open, to take the host's time off).
  void after_launch(SampleWindow& w, bool launched, int64_t now_ns) noexcept;
  // Inside a batch, a launch of the same shape on the same stream is let
  // through light: not admitted, not timed, only counted (true); the
  // launches are charged when the batch ends. False: launch as usual.
  bool light_launch(SampleWindow& w, uint64_t key, uintptr_t stream) noexcept {
    if (w.owner != this || w.start != 0 || w.launches >= w.target || w.key != key ||
        w.stream != stream) {
      return false;
    }
    ++w.launches;
    return true;
  }
  // A light launch the driver refused: nothing reached the GPU, so it is not
  // charged, and the batch ends.
  void light_launch_failed(SampleWindow& w) noexcept {
    if (w.owner != this) return;
    if (w.launches > 0) --w.launches;
    close_window(w, w.opened_ns);
  }
  // Ends the thread's window before it waits or switches device.
  static void end_window(SampleWindow& w, int64_t now_ns = 0) noexcept;
  // Gives the thread's window up without touching the GPU (the thread is
  // exiting, or a capture is under way); a batch is still charged.
  static void abandon_window(SampleWindow& w) noexcept;

  // Learns from samples the GPU has finished; cheap when none are due.
  void harvest(int64_t now_ns) noexcept;

  // A CUDA graph was destroyed: its handle may come back for another graph.
  void forget(uint64_t key) noexcept;
  // The timer's events are gone (context destroyed): drop what is in flight.
  void drop_samples() noexcept;

  // What a launch of `key` is charged now (0: unknown).
  int64_t cost_of(uint64_t key) const noexcept;
  int64_t default_cost() const noexcept { return default_cost_.load(std::memory_order_relaxed); }
  LimiterStats stats() const noexcept;

 private:
  struct Pending {
    GpuTimer::Event start = 0;
    GpuTimer::Event end = 0;
    uint64_t key = 0;
    int64_t host_ns = 0;  // host time from the start mark to the launch (to the end mark: a pair)
    uint32_t epoch = 0;
    bool idle = false;  // the start mark was reached before the launch arrived
    bool pair = false;  // a calibration pair: nothing between the marks
  };
  static constexpr int kMaxInFlight = 32;

  // A sample of `key` when one is due (true: w holds it).
  bool open_sample(SampleWindow& w, uint64_t key, uintptr_t stream, int64_t now_ns,
                   LaunchPath path) noexcept;
  // Otherwise a batch of light launches, for a learnt small kernel.
  void open_batch(SampleWindow& w, const CostEntry& e, uint64_t key, uintptr_t stream,
                  int64_t now_ns, LaunchPath path, bool enforced) noexcept;
  // A pair of marks with nothing between (under mu_, room checked).
  void calibrate(uintptr_t stream) noexcept;
  void close_window(SampleWindow& w, int64_t now_ns) noexcept;  // w.owner == this
  void charge(int64_t ns) noexcept;
  void learn(const Pending& p, int64_t ns, int64_t now_ns) noexcept;  // under mu_
  void update_cost(CostEntry& e, int64_t now_ns) noexcept;            // under mu_

  const LimiterOptions options_;
  GpuTimer& timer_;
  SharePacer pacer_;
  std::atomic<uint32_t> share_;  // options_.percent until a resize
  std::atomic<uint32_t> pace_percent_;
  std::atomic<uint32_t> alone_percent_{0};
  std::array<std::atomic<const int64_t*>, kMaxPeers> peers_{};
  std::atomic<int> npeers_{0};
  // The latest of the peers' clocks (INT64_MIN without peers).
  int64_t busiest_peer_clock() const noexcept;
  DutyGate gate_;
  // admit(); `ran`: the launches ran already (a batch), only booked.
  int64_t charge_launches(uint64_t key, LaunchPath path, int64_t now_ns, uint32_t count,
                          bool enforced, bool ran, bool collective = false) noexcept;
  // Charges `count` launches costing `cost` in all; `ran`: they ran already
  // (a batch), only booked.
  int64_t pace(int64_t cost, uint32_t count, int64_t now_ns, bool ran, bool collective) noexcept;
  // Moves the gate's tail by a launch costing `cost` starting now
  // (catching up with a peer: no idle time added after it).
  void book_gated(int64_t cost, int64_t now_ns, uint32_t percent, bool catch_up = false) noexcept;
  // Counts collectives this device launched, in the gate's shared counter.
  void count_collectives(uint32_t n) noexcept;
  CostTable table_;

  std::mutex mu_;
  std::array<Pending, kMaxInFlight> pending_{};  // under mu_
  int npending_ = 0;                             // under mu_
  unsigned sample_seq_ = 0;                      // under mu_
  RobustEstimate mark_{};                        // under mu_: the marks' own time
  std::atomic<int64_t> mark_ns_{0};              // mark_.value(), for stats
  // Under mu_: how much later than its start mark a launch reached an idle
  // stream's GPU, beyond the host's time (from shapes sampled both ways).
  RobustEstimate idle_lag_{RobustEstimate::Pick::kMedian, 64};
  std::atomic<int64_t> idle_lag_ns_{0};
  uint64_t rng_ = 0x9e3779b97f4a7c15ull;  // under mu_
  std::atomic<int> countdown_{0};         // launches until the next due sample
  std::atomic<int> in_flight_{0};         // open windows + pending
  std::atomic<int> pending_hint_{0};      // npending_, for lock-free checks
  std::atomic<int64_t> last_open_ns_{INT64_MIN / 2};
  std::atomic<int64_t> last_harvest_ns_{INT64_MIN / 2};
  std::atomic<int64_t> default_cost_{0};

  std::array<std::atomic<uint64_t>, kLaunchPaths> launches_{};
  std::atomic<uint64_t> charged_ns_{0};
  std::atomic<uint64_t> waited_ns_{0};
  std::atomic<uint64_t> samples_{0};
  std::atomic<uint64_t> idle_samples_{0};
  std::atomic<uint64_t> gate_waits_{0};
  std::atomic<uint64_t> gate_catch_ups_{0};
  std::atomic<uint64_t> collectives_{0};
};

}  // namespace hami::vgpu::limiter
