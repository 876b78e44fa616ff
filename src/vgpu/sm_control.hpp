#pragma once
// SmControl: the runtime's part in compute sharing. It owns one LaunchLimiter
// per state-file device whose SM share is below 100 %, which charges every
// launch there and publishes the charged GPU time in this process's slot;
// decides per launch whether the share is enforced now, i.e. whether launches
// are paced (GPU_CORE_UTILIZATION_POLICY and the node agent's
// utilization_switch); and speaks upstream's activity protocol on the
// state file: every launch marks the container active (recent_kernel = 2, and
// last_kernel_time to the second), and
// while the node agent has set recent_kernel to -1 (a high-priority container
// is busy on the same GPU) launches wait. The share is the container's: every
// process of it paces against the same clock (region::PaceClocks, a file
// beside the state file).
//
//   SmControl& sm = runtime->sm();
//   sm.on_launch(runtime->region(), runtime->control());
//   if (auto* lim = sm.limiter_for_current(*runtime)) {
//     bool paced = sm.enforced(runtime->utilization_switch());  ...charge; pace if paced...
//   }

#include <time.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>

#include "region/control_file.hpp"
#include "region/pace_clocks.hpp"
#include "region/region.hpp"
#include "vgpu/config.hpp"
#include "vgpu/cuda_abi.hpp"
#include "vgpu/cuda_event_timer.hpp"
#include "vgpu/limiter/launch_limiter.hpp"

namespace hami::vgpu {

class Runtime;

class SmControl {
 public:
  // Limiters for the devices with a share below 100 % (the state file's
  // values). `rt` is told once a second, off the launch path, to look for a
  // new limits file (Runtime::poll_limits).
  void init(region::Region& region, const Config& cfg, Runtime* rt) noexcept;
  bool any_limit() const noexcept { return any_limit_.load(std::memory_order_relaxed); }
  // A resize: device `dev`'s share is `percent` (0 or 100: no cap) from the
  // next launch on, in every thread. Nothing under the `disable` policy.
  void set_share(int dev, uint64_t percent, const region::Region& region) noexcept;

  // Activity and priority, on every launch of an accounted process. While a
  // higher-priority container is busy on the GPU, launches wait: as the
  // read-only control file says when there is one (`control`), else as the
  // state file's recent_kernel (-1) says, upstream's protocol.
  void on_launch(region::Region& region, const region::ControlView* control) noexcept {
    // last_kernel_time (Unix seconds) changes at most once a second; so
    // does whatever is checked each second (one thread does it).
    const int64_t second = ::time(nullptr);
    if (second != last_second_.load(std::memory_order_relaxed) &&
        last_second_.exchange(second, std::memory_order_relaxed) != second) {
      each_second(region, second);
    }
    if (control != nullptr && control->blocked()) wait_while_blocked(region, control);
    const int32_t rk = region.recent_kernel();
    if (rk == 2) return;
    if (rk < 0 && control == nullptr) {
      wait_while_blocked(region, nullptr);
      return;
    }
    region.exchange_recent_kernel(rk, 2);
  }

  // The limiter of the current context's device: nullptr when it has no
  // share, there is no context, or the policy is `disable`.
  limiter::LaunchLimiter* limiter_for_current(Runtime& rt) noexcept {
    return any_limit_.load(std::memory_order_relaxed) ? limiter_with_share(rt) : nullptr;
  }
  // Whether launches are paced now: the policy, and the agent's switch
  // (Runtime::utilization_switch()).
  bool enforced(int32_t utilization_switch) const noexcept {
    return limiter::enforces(policy_, utilization_switch);
  }

  // A context was destroyed or reset: its events are gone, and its handle
  // may come back for another device.
  void context_gone(cuda::CUcontext ctx) noexcept;
  // A CUDA graph was destroyed.
  void forget(uint64_t key) noexcept;
  // One info line per limited device: what was charged and waited for.
  void log_summary(region::Region& region) const noexcept;

 private:
  limiter::LaunchLimiter* limiter_with_share(Runtime& rt) noexcept;
  void wait_while_blocked(region::Region& region, const region::ControlView* control) noexcept;

  // Built on a device's first limited launch: the limit applies to every
  // index of the state file, most of which no process ever uses.
  limiter::LaunchLimiter* create_limiter(int dev, region::Region& region) noexcept;
  void open_pace_clocks(const region::Region& region) noexcept;
  // Once a second: last_kernel_time; the pace clock file followed if it was
  // replaced; without one, this process's part of the share.
  void each_second(region::Region& region, int64_t second) noexcept;
  // Without the container's clock, this process paces to the share divided
  // among the container's processes (the state file's count), never more.
  uint32_t share_alone(int dev, const region::Region& region) const noexcept;
  // The container's other devices' clocks and window counts, for gating
  // this one in the same windows (limiter/duty_gate.hpp).
  void set_peers(limiter::LaunchLimiter& lim, int dev, const region::Region& region) noexcept;

  // Atomic: a resize can give a share to a process that started without one.
  std::atomic<bool> any_limit_{false};
  Runtime* runtime_ = nullptr;
  limiter::CorePolicy policy_ = limiter::CorePolicy::kDefault;
  // The container's pacer clocks; without them each process paces itself,
  // to its part of the share when the file is there but unusable.
  std::optional<region::PaceClocks> clocks_;
  bool clocks_broken_ = false;
  // 0: no share on that device (or its limiter could not be built). Atomic: a
  // failed build clears it while other threads' launches read it.
  std::array<std::atomic<uint32_t>, kMaxDevices> percent_{};
  std::mutex create_mu_;
  std::array<std::atomic<limiter::LaunchLimiter*>, kMaxDevices> limiters_{};
  std::array<std::atomic<CudaEventTimer*>, kMaxDevices> timers_{};
  std::atomic<uint32_t> generation_{1};
  std::atomic<int64_t> last_second_{0};
  std::array<std::atomic<bool>, kMaxDevices> abandon_logged_{};
};

}  // namespace hami::vgpu
