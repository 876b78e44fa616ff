#pragma once
// LaunchLimiter: holds one device's launches to an SM share, the container's
// percentage of the GPU's time. How it works (docs/sm-limiter.md has the
// reasoning and the measurements):
//
//  * Every launch is charged what it costs on the GPU when it has the GPU to
//    itself, looked up by its shape (kernel function, grid, block, shared
//    memory; or the CUDA graph) in a CostTable, and paced by a SharePacer so
//    the charged time stays at the share of wall time.
//  * Costs are measured, not guessed: now and then a launch is bracketed by
//    two GPU timestamps (GpuTimer). A lone launch gives its kernel time; a run
//    of the same launch back to back gives the period per launch, which is what
//    a stream of tiny kernels really occupies (the GPU front end, not the SMs,
//    is then the bottleneck). The period is charged when it is within 1.5x the
//    kernel time, i.e. when launches really are back to back; otherwise the gap
//    is the program's own idle time and only the kernel time is charged.
//  * Medians throw away samples stretched by another container's time slice,
//    so two containers pacing themselves this way each get their share.
//  * A throttled GPU has power to spare and clocks up, so a heavy kernel runs
//    faster than it does when the program runs unthrottled. Once a minute
//    (first at the first launch) the pacer lends the program up to 300 ms of
//    GPU time at once (a sustain run, repaid by the wait after it); kernels
//    timed in the second half of that run are timed at the speed the program
//    gets flat out, and a kernel is charged at least that. A run that shares
//    the GPU with another busy context (it takes much longer than its GPU
//    time) measures nothing, and ends a quarter in: its loan would be the
//    other context's time.
//  * A small kernel's launches are admitted in batches: after one is paced,
//    the thread's next launches of it (up to 200 us of charged GPU time) go
//    light, only counted, and are charged together when the batch ends. A
//    paced launch costs a launch-bound program a tenth of its period in our
//    hook; paced one by one, it could not run near its full speed.
//  * While the share is not enforced (the default policy on an uncontended
//    GPU) nothing is paced, but now and then a launch is sampled all the
//    same (observe): the program is running flat out, and a back-to-back
//    period averaged over those seconds is what its share is of once
//    enforcement starts, where a sustain run sees 150 ms.
//
// Thread-safe. The per-launch path is lock-free (a table probe, one CAS);
// sampling and harvesting take a lock at most once per sample, and a sustain
// run shared with other processes one to claim it and one to give it back.
//
//   SampleWindow& w = this_thread_window;
//   if (lim.light_launch(w, key, stream)) return real_launch(...);
//   int64_t go = lim.admit(key, LaunchPath::kKernel, now);
//   if (go > now) { lim.end_window(w); sleep_until(go); now = clock(); }
//   lim.before_launch(w, key, stream, now);
//   CUresult rc = real_launch(...);
//   lim.after_launch(w, rc == CUDA_SUCCESS);
//   lim.harvest(now);
//
// Not enforced, one launch in many (the rest go straight to the driver, or
// light while a window it opened lasts):
//   if (lim.observe(w, key, stream, now)) lim.start_run_clock(w, clock());
//   real_launch(...); lim.after_launch(w, ok); lim.harvest(now);

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>

#include "vgpu/limiter/cost_table.hpp"
#include "vgpu/limiter/gpu_timer.hpp"
#include "vgpu/limiter/share_pacer.hpp"

namespace hami::vgpu::limiter {

struct LimiterOptions {
  uint32_t percent = 100;                  // the share, 1..99
  int64_t burst_ns = 5'000'000;            // work admitted ahead of the share
  int64_t sample_interval_ns = 1'000'000;  // between samples of a known launch
  int learn_samples = 3;                   // a new launch is sampled until then
  int stream_window = 16;                  // launches in a back-to-back sample
  int min_stream_launches = 4;             // shorter runs are not samples
  int64_t stream_worth_ns = 50'000;        // longer kernels: launch overhead moot
  int64_t harvest_interval_ns = 100'000;   // between polls of samples in flight
  // Charged GPU time of a batch of light launches of a small kernel (its
  // cost below stream_worth_ns) let through after one is paced; 0: none.
  int64_t batch_ns = 200'000;
  // GPU time lent at once for a sustain run (capped at the share of a
  // second, so run and wait fit in one second); 0: none.
  int64_t sustain_run_ns = 300'000'000;
  int64_t sustain_every_ns = 60'000'000'000;  // from the end of one run to the next
  size_t table_capacity = 8192;
  // The container's pacer clock for this device, shared with its other
  // processes (region::PaceClocks); nullptr: a clock of this limiter's own.
  int64_t* shared_clock = nullptr;
  // Beside it, until when one of those processes holds its sustain run (the
  // others' runs wait for it: together they would share the GPU, and their
  // runs measure nothing); nullptr: no other process to wait for.
  int64_t* shared_run_until = nullptr;
};

enum class LaunchPath : uint8_t { kKernel, kKernelEx, kCooperative, kGraph };
inline constexpr int kLaunchPaths = 4;
const char* to_string(LaunchPath p);

struct LimiterStats {
  std::array<uint64_t, kLaunchPaths> launches{};  // charged launches per path
  uint64_t charged_ns = 0;
  uint64_t waited_ns = 0;
  uint64_t samples = 0;
  uint64_t shapes = 0;               // distinct launch shapes seen
  uint64_t sustain_runs = 0;         // loans used up (see LimiterOptions::sustain_run_ns)
  uint64_t sustain_runs_shared = 0;  // of which the GPU was shared: they measured nothing
  uint64_t unpaced_samples = 0;      // of `samples`, taken while the share was not enforced
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
  int64_t opened_ns = 0;  // host time the start mark was made (a batch: opened)
  LaunchPath path = LaunchPath::kKernel;
  bool spoiled = false;         // a launch in it failed: it measures nothing
  uint32_t epoch = 0;           // the shape's when the window opened
  uint32_t sustain = 0;         // the sustain run it was opened late in (0: none)
  int64_t run_charged_ns = -1;  // GPU time the run had admitted when it opened (-1: no run)
  // Opened while the share was not enforced (observe): its light launches
  // are not charged. Should enforcement start while it is open, the rest of
  // its launches (at most a run's) go uncharged too.
  bool unpaced = false;
};

class LaunchLimiter {
 public:
  LaunchLimiter(const LimiterOptions& options, GpuTimer& timer);
  LaunchLimiter(const LaunchLimiter&) = delete;
  LaunchLimiter& operator=(const LaunchLimiter&) = delete;

  uint32_t percent() const noexcept { return options_.percent; }

  // Charges `count` launches of shape `key`; returns the time the last may start.
  int64_t admit(uint64_t key, LaunchPath path, int64_t now_ns, uint32_t count = 1) noexcept;
  // Records time a caller spent waiting on admit's answer (for the stats).
  void note_wait(int64_t ns) noexcept;

  // Around the real launch: starts, extends or ends this thread's sample.
  // `warm`: the thread has been launching for a while since it last waited;
  // runs of back-to-back launches are only sampled then (the first launches
  // after a sleep are slower than the program's steady pace). True when it
  // opened a back-to-back run: its host clock starts once the start mark is
  // made (start_run_clock), the mark's own time being ours. When no sample is
  // taken, a small kernel's launch opens a batch of light launches instead.
  bool before_launch(SampleWindow& w, uint64_t key, uintptr_t stream, int64_t now_ns,
                     bool warm = true, LaunchPath path = LaunchPath::kKernel) noexcept;
  // The same while the share is not enforced: ends the thread's window, and
  // opens a sample of this launch when one is due (lone, or a back-to-back
  // run, as before_launch would), which charges nothing. No batches: nothing
  // is paced.
  bool observe(SampleWindow& w, uint64_t key, uintptr_t stream, int64_t now_ns,
               LaunchPath path = LaunchPath::kKernel) noexcept;
  // `now_ns` is the time after the launch (0: unknown).
  void after_launch(SampleWindow& w, bool launched, int64_t now_ns = 0) noexcept;
  // Inside a back-to-back run or a batch, a launch of the same shape on the
  // same stream is let through light: not admitted, not timed, only counted
  // (true); the launches are charged when the run ends, and a run's host time
  // is then the program's own period plus almost none of ours. The next launch
  // that is not light ends it (before_launch). False: launch as usual.
  bool light_launch(SampleWindow& w, uint64_t key, uintptr_t stream) noexcept {
    if (w.owner != this || w.launches >= w.target || w.target == 1 || w.key != key ||
        w.stream != stream) {
      return false;
    }
    ++w.launches;
    return true;
  }
  // A light launch the driver refused: nothing reached the GPU, so it is not
  // charged, and the run it was part of measures nothing.
  void light_launch_failed(SampleWindow& w) noexcept {
    if (w.owner != this) return;
    if (w.launches > 1) --w.launches;
    after_launch(w, false);
  }
  // The host time a run that before_launch just opened starts from.
  static void start_run_clock(SampleWindow& w, int64_t now_ns) noexcept { w.opened_ns = now_ns; }
  // Ends the thread's sample before it waits or switches device.
  static void end_window(SampleWindow& w, int64_t now_ns = 0) noexcept;
  // Gives the thread's sample up without touching the GPU (the thread is exiting).
  static void abandon_window(SampleWindow& w) noexcept;

  // Learns from samples the GPU has finished; cheap when none are due.
  void harvest(int64_t now_ns) noexcept;

  // A CUDA graph was destroyed: its handle may come back for another graph.
  void forget(uint64_t key) noexcept;
  // The timer's events are gone (context destroyed): drop what is in flight.
  void drop_samples() noexcept;

  // What a launch of `key` is charged now (0: unknown).
  int64_t cost_of(uint64_t key) const noexcept;
  // GPU time one sustain run lends (0: none at this share, or off).
  int64_t sustain_run_ns() const noexcept { return sustain_run_ns_; }
  int64_t default_cost() const noexcept { return default_cost_.load(std::memory_order_relaxed); }
  LimiterStats stats() const noexcept;

 private:
  struct Pending {
    GpuTimer::Event start = 0;
    GpuTimer::Event end = 0;
    uint64_t key = 0;
    int launches = 0;
    int64_t host_ns = 0;  // host time between the two marks (0: unknown)
    uint32_t epoch = 0;
    uint32_t sustain = 0;
    int64_t run_charged_ns = -1;
    bool unpaced = false;
  };
  static constexpr int kMaxInFlight = 32;

  // A sample of `key` when one is due (true: w holds it). `learning`: the
  // shape has fewer than learn_samples lone samples (or no entry yet).
  // `unpaced`: for observe.
  bool open_sample(SampleWindow& w, bool learning, uint64_t key, uintptr_t stream, int64_t now_ns,
                   bool warm, LaunchPath path, bool unpaced = false) noexcept;
  // Otherwise a batch of light launches, for a learnt small kernel.
  void open_batch(SampleWindow& w, const CostEntry& e, uint64_t key, uintptr_t stream,
                  int64_t now_ns, LaunchPath path) noexcept;
  void close_window(SampleWindow& w, int64_t now_ns) noexcept;  // w.owner == this
  // Charges the light launches of a run that is ending.
  void charge_light(const SampleWindow& w, int64_t now_ns) noexcept;
  void learn(const Pending& p, int64_t ns, int64_t now_ns) noexcept;  // under mu_
  void update_cost(CostEntry& e, int64_t now_ns) noexcept;            // under mu_
  // After a launch admitted while a run is due; `cost_ns` < 0: the program
  // was not ahead of its share.
  void track_sustain_run(int64_t cost_ns, int64_t now_ns) noexcept;
  void end_sustain_run(int64_t now_ns) noexcept;
  // Claims the container's sustain run for this process (false: another
  // process holds it, and ours is put off until it ends).
  bool hold_run(int64_t now_ns) noexcept;
  void release_run() noexcept;

  const LimiterOptions options_;
  // Derived from the options: a sustain run's GPU time, and the pacer's
  // tolerance while one is due.
  const int64_t sustain_run_ns_;
  const int64_t sustain_burst_ns_;
  GpuTimer& timer_;
  SharePacer pacer_;
  CostTable table_;

  std::mutex mu_;
  std::array<Pending, kMaxInFlight> pending_{};  // under mu_
  int npending_ = 0;                             // under mu_
  unsigned sample_seq_ = 0;                      // under mu_
  std::atomic<int> in_flight_{0};                // open windows + pending
  std::atomic<int> pending_hint_{0};             // npending_, for lock-free checks
  std::atomic<int64_t> last_open_ns_{INT64_MIN / 2};
  std::atomic<int64_t> last_harvest_ns_{INT64_MIN / 2};
  std::atomic<int64_t> default_cost_{0};
  std::atomic<int64_t> next_sustain_ns_{INT64_MIN / 2};  // a run is due from then
  std::atomic<int64_t> sustain_charged_ns_{0};           // GPU time admitted in the run so far
  std::atomic<int64_t> sustain_start_ns_{0};             // when the program got ahead
  std::atomic<bool> sustain_late_{false};                // the run is in its second half
  std::atomic<bool> sustain_shared_{false};  // the run shares the GPU: it measures nothing
  std::atomic<uint32_t> sustain_run_{1};     // numbers the runs
  std::atomic<int64_t> run_claim_{0};        // our value in *shared_run_until (0: none)
  std::mutex run_mu_;                        // taking or giving back a claim
  std::atomic<uint64_t> sustain_runs_{0};
  std::atomic<uint64_t> sustain_runs_shared_{0};

  std::array<std::atomic<uint64_t>, kLaunchPaths> launches_{};
  std::atomic<uint64_t> charged_ns_{0};
  std::atomic<uint64_t> waited_ns_{0};
  std::atomic<uint64_t> samples_{0};
  std::atomic<uint64_t> unpaced_samples_{0};
};

}  // namespace hami::vgpu::limiter
