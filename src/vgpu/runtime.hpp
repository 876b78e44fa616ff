#pragma once
// The library's per-process state: configuration, the state file and this
// process's slot in it, the device map, and what this process has charged.
// Created on the first hook that needs it; re-created in a forked child;
// its slot is released when the process exits.
//
// Charging is reserve-then-commit across every process of the container: a
// charge is added to our own slot first, then the container's total for that
// device (every slot) is compared with the limit, and the charge is withdrawn
// if it does not fit. Two processes racing for the last bytes can both be
// refused, never both admitted (each sees the other's reservation).
//
// The state file is writable by every process of the container, so what this
// process holds is counted from a copy in its own memory; its slot in the file
// is a mirror, rewritten whole at every change. Rewriting the file (our slot,
// proc_num) cannot lower the usage a process's own check counts for itself
// (docs/security.md: other processes' slots are the node agent's to verify).
//
//   auto* rt = hami::vgpu::Runtime::accounting();   // nullptr: pass-through
//   if (rt && !rt->reserve(dev, UsageKind::kData, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "region/control_file.hpp"
#include "region/region.hpp"
#include "vgpu/allocation_table.hpp"
#include "vgpu/config.hpp"
#include "vgpu/context_tracker.hpp"
#include "vgpu/cuda_abi.hpp"
#include "vgpu/device_map.hpp"
#include "vgpu/graph_memory.hpp"
#include "vgpu/memory_probe.hpp"
#include "vgpu/module_charges.hpp"
#include "vgpu/pool_charges.hpp"
#include "vgpu/sm_control.hpp"
#include "vgpu/vmm_tracker.hpp"

namespace hami::vgpu {

class Runtime {
 public:
  // Config-only decision, cheap and safe inside dlsym: does this process
  // account at all? Read once from the environment and the limits file.
  static bool hooks_active() noexcept;
  static const Config& config() noexcept;

  // The runtime, initialised; nullptr when nothing is configured, while the
  // process exits, or if initialisation failed (then calls pass through).
  // Every launch asks: once set up, that is one inline acquire load.
  static Runtime* accounting() noexcept;

  // Charges `bytes` to state-file device `dev` unless that would put the
  // container over its limit. dev < 0 (unknown device) is never refused.
  bool reserve(int dev, region::UsageKind kind, uint64_t bytes) noexcept;
  void release(int dev, region::UsageKind kind, uint64_t bytes) noexcept;
  void release(const Allocation& a) noexcept {
    if (a.spilled()) [[unlikely]]
      change_spilled(a.device, a.bytes, false);
    release(a.device, a.kind, a.bytes);
  }
  // CUDA_OVERSUBSCRIBE (spill.hpp): whether an allocation the GPU cannot back
  // may go to host memory, and the part of this process's charge on `dev` that
  // did, mirrored into its slot for the node agent.
  bool oversubscribe() const noexcept { return oversubscribe_; }
  void change_spilled(int dev, uint64_t bytes, bool add) noexcept;
  uint64_t own_spilled(int dev) const noexcept;
  // What this process itself holds on `dev` (its own copy, not the file's).
  uint64_t own_usage(int dev) const noexcept;
  // Records memory the driver has already committed and that cannot be handed
  // back (a pool that grew during a free): charged even past the limit.
  void force_charge(int dev, region::UsageKind kind, uint64_t bytes) noexcept;
  // Moves a charge from `from` to `to` bytes; false (and nothing changed) if
  // growing it does not fit.
  bool adjust(int dev, region::UsageKind kind, uint64_t from, uint64_t to) noexcept;

  // Settles this process's charge on `dev` on what NVML says the driver
  // holds for it, so memory committed where no hook sees it (the code of
  // kernels the CUDA runtime loads inside a launch, private driver paths) is
  // charged too: the excess over what the hooks charged, past a few MiB, is
  // charged as context memory. It follows NVML down only when two looks in a
  // row agree (a reservation whose allocation the driver has not made yet
  // looks like memory given back). At most every kSettleIntervalNs unless
  // `now`; nothing where NVML cannot name this process. Called on memory
  // queries, before a refusal, and by allocation hooks before they reserve
  // (never between a commit and its charge, which it would count twice).
  void settle(int dev, bool now = false) noexcept;

  // Follows a resize: when the limits file this process read was replaced or
  // changed (one stat, at most every 100 ms), applies its memory limits and
  // SM shares here. A limit lowered below what the container holds takes
  // nothing back: allocations are refused until usage falls under it. A file
  // that cannot be read or is corrupt changes nothing. Called off the hot
  // paths: from settle()'s slow branch and once a second from launches.
  void poll_limits() noexcept;

  // Effective limit in bytes (0 = none) and the container's usage.
  uint64_t limit(int dev) const noexcept;
  uint64_t usage(int dev) const noexcept;

  // State-file device of the current context (-1 if none); its CUDA ordinal in *ordinal.
  int current_device(cuda::CUdevice* ordinal) noexcept;
  DeviceMap& devices() noexcept { return devices_; }
  ContextTracker& contexts() noexcept { return contexts_; }
  AllocationTable& pointers() noexcept { return pointers_; }
  VmmTracker& vmm() noexcept { return vmm_; }
  GraphMemory& graph_memory() noexcept { return graph_memory_; }
  ModuleCharges& modules() noexcept { return modules_; }
  AllocationTable& arrays() noexcept { return arrays_; }
  PoolCharges& pools() noexcept { return pools_; }
  ProcessMemoryProbe& probe() noexcept { return probe_; }
  region::Region& region() noexcept { return region_; }
  SmControl& sm() noexcept { return sm_; }
  // The host PID the node agent recorded for us (0 until it has).
  int32_t own_host_pid() noexcept;
  // The node agent's switch for the SM share under the default policy: from
  // the read-only control file when the device plugin mounted one, otherwise
  // (standalone, other plugins) the state file's field, as upstream. Read on
  // every launch: one branch and one load.
  int32_t utilization_switch() const noexcept {
    return control_ ? control_->utilization_switch() : region_.utilization_switch();
  }
  // Whether the agent holds this container for a higher-priority one, from the
  // control file; nullopt without one (the state file's recent_kernel then).
  std::optional<bool> blocked_by_agent() const noexcept {
    return control_ ? std::optional<bool>(control_->blocked()) : std::nullopt;
  }
  // The read-only control file, or nullptr without one.
  const region::ControlView* control() const noexcept { return control_ ? &*control_ : nullptr; }
  // Gives back every pointer and array charge on `dev` (its context was reset).
  void forget_allocations(int dev) noexcept;

  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

 private:
  static Runtime* accounting_slow() noexcept;
  Runtime(region::Region region, int slot);
  static Runtime* create() noexcept;
  static void on_fork_child() noexcept;
  static void on_exit() noexcept;
  friend struct RuntimeLifecycle;
  // Changes our own copy by +bytes or -bytes (saturating) and mirrors it into
  // our slot; returns our new total on `dev`.
  uint64_t change_own(int dev, region::UsageKind kind, uint64_t bytes, bool add) noexcept;
  void reload_limits() noexcept;

  region::Region region_;
  int slot_;
  // Effective, bytes; atomic because a resize changes them under running
  // hooks (a relaxed load is the same instruction as a plain one).
  std::array<std::atomic<uint64_t>, kMaxDevices> limits_{};
  // The limits file a resize replaces (empty: limits from the environment),
  // what it was when last read, and who is reading it now.
  struct FileStamp {
    uint64_t dev = 0, ino = 0, size = 0;
    int64_t mtime_ns = 0, ctime_ns = 0;
    bool operator==(const FileStamp&) const = default;
  };
  std::string limits_path_;
  FileStamp limits_stamp_{};  // under reloading_
  std::atomic_flag reloading_ = ATOMIC_FLAG_INIT;
  std::atomic<int64_t> limits_polled_ns_{0};
  bool mps_client_ = false;
  // This process's own usage per device; the file's slot only mirrors it.
  // Changed under own_lock_ (held for a few stores; a spin lock costs a
  // fraction of a mutex on every allocation) so the mirror is never written
  // out of order.
  std::atomic_flag own_lock_ = ATOMIC_FLAG_INIT;
  std::array<std::atomic<uint64_t>, kMaxDevices> own_context_{};
  std::array<std::atomic<uint64_t>, kMaxDevices> own_data_{};
  std::array<std::atomic<uint64_t>, kMaxDevices> own_spilled_{};
  // What settle() charged beyond the hooks' charges, and when it last looked.
  std::array<std::atomic<uint64_t>, kMaxDevices> unexplained_{};
  std::array<std::atomic<int64_t>, kMaxDevices> settled_at_ns_{};
  std::array<std::atomic<uint64_t>, kMaxDevices> lower_seen_{};  // 0: none
  std::atomic<bool> nvml_names_me_{false};
  bool oversubscribe_ = false;
  bool limits_from_file_ = false;
  DeviceMap devices_;
  ContextTracker contexts_;
  AllocationTable pointers_;
  VmmTracker vmm_;
  GraphMemory graph_memory_;
  ModuleCharges modules_;
  AllocationTable arrays_;
  PoolCharges pools_;
  ProcessMemoryProbe probe_;
  SmControl sm_;
  std::optional<region::ControlView> control_;
};

namespace detail {
// Runtime::accounting's fast path (runtime.cpp owns both): the state is
// kRuntimeReady once the runtime is set up, kRuntimePassThrough when this
// process does not account.
inline constexpr int kRuntimePassThrough = 1;
inline constexpr int kRuntimeReady = 2;
extern std::atomic<int> g_runtime_state;
extern Runtime* g_runtime;
}  // namespace detail

inline Runtime* Runtime::accounting() noexcept {
  const int s = detail::g_runtime_state.load(std::memory_order_acquire);
  if (s == detail::kRuntimeReady) [[likely]] {
    return detail::g_runtime;
  }
  return s == detail::kRuntimePassThrough ? nullptr : accounting_slow();
}

}  // namespace hami::vgpu
