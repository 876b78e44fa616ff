#pragma once
// The per-container state file, attached read-write: creation that concurrent
// processes agree on, typed atomic accessors, and the process-slot registry.
// Used by libvgpu.so (one Region per process), the node agent and the CLI.
//
// Coordination uses kernel-released OFD locks (ofd_lock.hpp), never a semaphore
// in the file: a process killed at any instruction leaves nothing held. A slot is
// owned by (pid, start time) plus a liveness lock its owner holds while it lives;
// the next registration or an explicit sweep() reclaims a dead owner's slot and
// usage. Slots never move, so a slot index stays valid for its owner's lifetime.
//
//   hami::region::OpenOptions opt;
//   opt.initial.memory_limit.fill(4ull << 30);
//   auto region = hami::region::Region::open("/usr/local/vgpu/x.cache", opt);
//   if (!region) { log(region.error().message); return; }
//   auto slot = region->register_process(*hami::region::self_identity());
//   region->slot(*slot).add_usage(0, hami::region::UsageKind::kData, 2 << 20);
//
// Not fork-safe by design: a child shares the parent's open file description and
// so its locks. A child calls abandon() on the inherited Region and opens its own.

#include <sys/types.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"
#include "region/layout_v1.hpp"
#include "region/process_identity.hpp"
#include "region/snapshot.hpp"

namespace hami::region {

struct InitialValues {
  std::array<uint64_t, kMaxDevices> memory_limit{};  // bytes, 0 = unlimited
  std::array<uint64_t, kMaxDevices> sm_limit = filled_sm_limit(100);
  int32_t priority = 1;  // 0 high, 1 low (upstream default)

  static constexpr std::array<uint64_t, kMaxDevices> filled_sm_limit(uint64_t pct) {
    std::array<uint64_t, kMaxDevices> a{};
    for (auto& v : a)
      v = pct;
    return a;
  }
};

struct OpenOptions {
  bool create = true;       // false: attach an existing file only
  mode_t file_mode = 0666;  // applied with fchmod, whatever the umask
  InitialValues initial;    // used only by the process that initialises the file
  std::chrono::milliseconds lock_timeout{5000};
};

enum class UsageKind { kContext, kData };

struct MemoryUsage {
  uint64_t context = 0;
  uint64_t data = 0;
  uint64_t total = 0;
};

// Atomic view of one slot. Every field may be read while other processes write.
class SlotRef {
 public:
  explicit SlotRef(ProcSlot& slot) : s_(&slot) {}

  int32_t pid() const;
  int32_t host_pid() const;
  void set_host_pid(int32_t pid);
  int32_t status() const;
  void set_status(int32_t status);
  uint64_t owner_start_time() const;
  bool owner_tagged() const;

  // Out-of-range devices read as zero and are not written (setters return false).
  MemoryUsage usage(int dev) const;
  bool add_usage(int dev, UsageKind kind, uint64_t bytes);
  // Saturates at zero: a release without a matching charge never wraps.
  bool sub_usage(int dev, UsageKind kind, uint64_t bytes);
  // Overwrites the counters with what the owner knows it holds (total =
  // context + data): its own copy, kept where a tenant cannot write, wins over
  // whatever the file said.
  bool set_usage(int dev, uint64_t context, uint64_t data);
  // The part of the data bytes that lives in host memory (CUDA_OVERSUBSCRIBE).
  uint64_t spilled(int dev) const;
  bool set_spilled(int dev, uint64_t bytes);
  uint64_t nvml_used(int dev) const;
  bool set_nvml_used(int dev, uint64_t bytes);
  uint64_t sm_util(int dev) const;
  bool set_sm_util(int dev, uint64_t percent);
  // The GPU time the slot's owner published for the device (nullopt: it
  // publishes none, e.g. upstream's library, or no SM share there).
  std::optional<uint64_t> gpu_time_ns(int dev) const;
  // Marks the slot as publishing it and returns the counter, for the owner's
  // limiter to add to atomically (nullptr: device out of range).
  uint64_t* publish_gpu_time(int dev);

 private:
  ProcSlot* s_;
};

struct SweepOptions {
  // Slots written by upstream HAMi-core have no liveness lock; when the sweeper
  // shares the writers' PID namespace it may judge them by /proc/<pid>.
  bool check_untagged_pids = false;
  std::string proc_root = "/proc";
};

struct ReclaimedSlot {
  int index = 0;
  int32_t pid = 0;
  uint64_t bytes = 0;  // usage given back, all devices
};

struct SweepReport {
  std::vector<ReclaimedSlot> reclaimed;
  int proc_num_before = 0;
  int proc_num_after = 0;
};

class Region;

// Holds the registry lock (process mutex + OFD lock); released on destruction.
class RegistryLock {
 public:
  RegistryLock(RegistryLock&& other) noexcept;
  RegistryLock& operator=(RegistryLock&&) = delete;
  ~RegistryLock();

 private:
  friend class Region;
  RegistryLock(std::unique_lock<std::mutex> guard, int fd);
  std::unique_lock<std::mutex> guard_;
  int fd_;
};

class Region {
 public:
  static Result<Region> open(const std::string& path, const OpenOptions& options = {});
  // A region of this process alone (an anonymous memfd), for when the state
  // file cannot be used: limits still hold within the process.
  static Result<Region> create_private(const InitialValues& initial);
  static constexpr const char* kPrivatePath = "(private)";

  Region(Region&& other) noexcept;
  Region& operator=(Region&& other) noexcept;
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
  ~Region();  // releases our slot (if any), unmaps, closes

  const std::string& path() const { return path_; }
  // false for a region from create_private(): no file, no other process.
  bool file_backed() const { return path_ != kPrivatePath; }
  int fd() const { return fd_; }
  SharedRegion& raw() { return *r_; }
  const SharedRegion& raw() const { return *r_; }
  uint32_t minor_version() const;

  // --- region-wide fields ---------------------------------------------------
  uint64_t memory_limit(int dev) const;
  bool set_memory_limit(int dev, uint64_t bytes);
  uint64_t sm_limit(int dev) const;
  bool set_sm_limit(int dev, uint64_t percent);
  uint64_t device_count() const;
  void set_device_count(uint64_t n);
  std::string device_uuid(int dev) const;
  // Fails for an index out of range or a UUID that does not fit (95 chars max).
  Result<void> set_device_uuid(int dev, std::string_view uuid);
  // Read on every kernel launch of a process with a share (the switch) or
  // accounting at all (recent_kernel): inline, one load each.
  int32_t utilization_switch() const {
    return std::atomic_ref<int32_t>(r_->utilization_switch).load();
  }
  void set_utilization_switch(int32_t v);
  int32_t recent_kernel() const { return std::atomic_ref<int32_t>(r_->recent_kernel).load(); }
  void set_recent_kernel(int32_t v);
  // Sets it to `desired` only if it still holds `expected` (the agent may have just written it).
  bool exchange_recent_kernel(int32_t expected, int32_t desired);
  int32_t priority() const;
  void set_priority(int32_t v);
  uint64_t last_kernel_time() const;
  void set_last_kernel_time(uint64_t unix_seconds);
  int32_t proc_num() const;

  // Sum of used[dev].total over every slot below proc_num, dead-but-unswept
  // ones included: counting them can only make a limit stricter, never looser.
  uint64_t device_usage(int dev) const;
  // The same without slot `skip` (the caller's own, which it counts from
  // memory of its own: a tenant rewriting the file cannot lower it).
  uint64_t device_usage_excluding(int dev, int skip) const;

  // --- slots ----------------------------------------------------------------
  SlotRef slot(int index);  // index in [0, kMaxProcesses)
  Liveness slot_liveness(int index) const;
  std::optional<int> own_slot() const {
    return own_slot_ >= 0 ? std::optional(own_slot_) : std::nullopt;
  }

  // Claims a free slot for `who` and holds its liveness lock until
  // unregister_process() or destruction. Sweeps dead owners first. One slot
  // per Region object.
  Result<int> register_process(const ProcessIdentity& who, const SweepOptions& sweep_options = {});
  // Gives the slot's usage back and frees it. Never waits for a lock.
  void unregister_process();
  // Reclaims every slot whose owner is dead and trims proc_num.
  Result<SweepReport> sweep(const SweepOptions& options = {});

  Result<RegistryLock> lock_registry(std::chrono::steady_clock::duration timeout);
  Result<RegistryLock> lock_registry() { return lock_registry(lock_timeout_); }

  // For a forked child: drop this process's view (unmap, close) without touching
  // the file, the parent's slot or the parent's locks.
  void abandon();

 private:
  Region(std::string path, int fd, SharedRegion* r, std::chrono::milliseconds lock_timeout);
  // One attempt of open(); *gone when the file was removed under us.
  static Result<Region> open_once(const std::string& path, const OpenOptions& options, bool* gone);
  void release();
  // Looks at slots [0, end): all of them for an explicit sweep, the ones in
  // use (below proc_num) when a process registers.
  SweepReport sweep_locked(const SweepOptions& options, int end = kMaxProcesses);
  bool slot_owner_dead(int index, const ProcSlot& s, const SweepOptions& options) const;
  uint64_t clear_slot(int index);
  // Sets proc_num to one past the highest occupied slot; registry lock held.
  // proc_num becomes one past the highest slot in use below `end`.
  int trim_proc_num(int end = kMaxProcesses);

  std::string path_;
  int fd_ = -1;
  SharedRegion* r_ = nullptr;
  int own_slot_ = -1;
  std::chrono::milliseconds lock_timeout_{5000};
  std::unique_ptr<std::mutex> registry_mutex_;
};

}  // namespace hami::region
