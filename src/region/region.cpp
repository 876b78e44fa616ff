#include "region/region.hpp"

#include <fcntl.h>
#include <semaphore.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <ctime>
#include <thread>

#include "common/unique_fd.hpp"
#include "region/layouts.hpp"
#include "region/ofd_lock.hpp"

namespace hami::region {
namespace {

static_assert(sizeof(sem_t) == sizeof(SemaphoreStorage) && alignof(sem_t) <= 8,
              "upstream's layout assumes glibc's 32-byte sem_t");

template <class T>
T load(const T& field) {
  return std::atomic_ref<T>(const_cast<T&>(field)).load();
}
template <class T>
void store(T& field, T value) {
  std::atomic_ref<T>(field).store(value);
}

bool valid_device(int dev) {
  return dev >= 0 && dev < kMaxDevices;
}

uint64_t& usage_field(DeviceMemory& m, UsageKind kind) {
  return kind == UsageKind::kContext ? m.context_size : m.data_size;
}

// fetch_sub that stops at zero.
void saturating_sub(uint64_t& field, uint64_t bytes) {
  std::atomic_ref<uint64_t> a(field);
  uint64_t cur = a.load();
  while (!a.compare_exchange_weak(cur, cur > bytes ? cur - bytes : 0)) {
  }
}

// Zeroes a slot's counters and returns the usage it held, all devices.
uint64_t clear_usage(ProcSlot& s) {
  uint64_t bytes = 0;
  for (DeviceMemory& m : s.used) {
    const uint64_t t = std::atomic_ref<uint64_t>(m.total).exchange(0);
    bytes = (bytes > UINT64_MAX - t) ? UINT64_MAX : bytes + t;
    store(m.context_size, uint64_t{0});
    store(m.module_size, uint64_t{0});
    store(m.data_size, uint64_t{0});
    store(m.offset, uint64_t{0});
    store(m.spilled_size, uint64_t{0});
  }
  for (int d = 0; d < kMaxDevices; ++d) {
    store(s.monitorused[d], uint64_t{0});
    store(s.device_util[d].sm_util, uint64_t{0});
    store(s.device_util[d].gpu_time_ns, uint64_t{0});
    store(s.device_util[d].gpu_time_tag, uint64_t{0});
  }
  return bytes;
}

Error path_error(const std::string& path, const std::string& what, int err) {
  return Error::from_errno(path + ": " + what, err);
}

// Reserve the blocks now so that a full disk is an error here rather than a
// SIGBUS later, when a page of the mapping is first written.
Result<void> reserve_blocks(int fd, const std::string& path) {
  int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(kFileSize));
  if (rc == 0) return {};
  if (rc == EOPNOTSUPP || rc == EINVAL) {  // filesystem without fallocate: size it sparse
    if (::ftruncate(fd, static_cast<off_t>(kFileSize)) == 0) return {};
    rc = errno;
  }
  return path_error(path, "cannot allocate " + std::to_string(kFileSize) + " bytes", rc);
}

// Puts the pages a new file's first process touches (the header with slot 0,
// and the tail from proc_num on) into the page cache through write(). A
// page fault on a file page that is not cached makes the kernel read around
// it, up to the disk's read_ahead_kb (8 MiB on the build machine): for a new
// file, allocating and zeroing all 2 MiB of it, 0.55 ms per container there,
// where writing the three pages it uses costs 10 us. The zeros written are
// what the file already holds; the other pages stay out of memory until a
// process (another slot's) touches them.
void prefill_used_pages(int fd) {
  const long page = ::sysconf(_SC_PAGESIZE);
  if (page <= 0 || page > 65536) return;
  auto down = [&](size_t x) { return x / static_cast<size_t>(page) * static_cast<size_t>(page); };
  const size_t head_end = down(offsetof(SharedRegion, procs) + sizeof(ProcSlot) + page - 1);
  const size_t tail_begin = down(offsetof(SharedRegion, proc_num));
  static const std::array<std::byte, 65536> zeros{};
  auto write_zeros = [&](size_t begin, size_t end) {
    for (size_t off = begin; off < end;) {
      const size_t n = std::min(end - off, zeros.size());
      const ssize_t w = ::pwrite(fd, zeros.data(), n, static_cast<off_t>(off));
      if (w <= 0) return;  // only a speed-up: the mapping works without it
      off += static_cast<size_t>(w);
    }
  };
  write_zeros(0, std::min(head_end, tail_begin));
  write_zeros(std::max(head_end, tail_begin), kFileSize);
}

// `zeroed`: the file was empty until we sized it, so it reads as zeros
// already. Zeroing it again would write, and so dirty, every one of its
// pages (2 MiB per container, each a page fault now and a disk write later),
// where only the header's few pages need writing.
void initialise(SharedRegion* r, const InitialValues& init, bool zeroed) {
  // A file with no magic was never finished by its creator; all of it is ours.
  if (!zeroed) std::memset(static_cast<void*>(r), 0, sizeof(SharedRegion));
  r->major_version = kMajorVersion;
  r->minor_version = kMinorVersion;
  // Initialised unlocked so an upstream process that attaches does not block on
  // them; we never use either semaphore.
  ::sem_init(reinterpret_cast<sem_t*>(&r->sem), 1, 1);
  ::sem_init(reinterpret_cast<sem_t*>(&r->sem_postinit), 1, 1);
  for (int d = 0; d < kMaxDevices; ++d) {
    r->limit[d] = init.memory_limit[d];
    r->sm_limit[d] = init.sm_limit[d];
  }
  r->utilization_switch = 1;  // upstream: enforce until the node agent says otherwise
  r->recent_kernel = 2;
  r->priority = init.priority;
  r->last_kernel_time = static_cast<uint64_t>(std::time(nullptr));
  std::atomic_ref<int32_t>(r->initialized_flag).store(kMagic, std::memory_order_release);
}

}  // namespace

// ---------------------------------------------------------------- SlotRef

int32_t SlotRef::pid() const {
  return load(s_->pid);
}
int32_t SlotRef::host_pid() const {
  return load(s_->hostpid);
}
void SlotRef::set_host_pid(int32_t pid) {
  store(s_->hostpid, pid);
}
int32_t SlotRef::status() const {
  return load(s_->status);
}
void SlotRef::set_status(int32_t status) {
  store(s_->status, status);
}
uint64_t SlotRef::owner_start_time() const {
  return load(s_->owner_start_time);
}
bool SlotRef::owner_tagged() const {
  return load(s_->owner_tag) == kOwnerTag;
}

MemoryUsage SlotRef::usage(int dev) const {
  if (!valid_device(dev)) return {};
  const DeviceMemory& m = s_->used[dev];
  return MemoryUsage{load(m.context_size), load(m.data_size), load(m.total)};
}

bool SlotRef::add_usage(int dev, UsageKind kind, uint64_t bytes) {
  if (!valid_device(dev)) return false;
  DeviceMemory& m = s_->used[dev];
  std::atomic_ref<uint64_t>(usage_field(m, kind)).fetch_add(bytes);
  std::atomic_ref<uint64_t>(m.total).fetch_add(bytes);
  return true;
}

bool SlotRef::sub_usage(int dev, UsageKind kind, uint64_t bytes) {
  if (!valid_device(dev)) return false;
  DeviceMemory& m = s_->used[dev];
  saturating_sub(usage_field(m, kind), bytes);
  saturating_sub(m.total, bytes);
  return true;
}

bool SlotRef::set_usage(int dev, uint64_t context, uint64_t data) {
  if (!valid_device(dev)) return false;
  DeviceMemory& m = s_->used[dev];
  // The split is for readers; `total` is what limits add up, and its store is
  // sequentially consistent so that a reservation is visible before its owner
  // reads the others' (two racing processes never both fit).
  std::atomic_ref<uint64_t>(m.context_size).store(context, std::memory_order_relaxed);
  std::atomic_ref<uint64_t>(m.data_size).store(data, std::memory_order_relaxed);
  store(m.total, context > UINT64_MAX - data ? UINT64_MAX : context + data);
  return true;
}

uint64_t SlotRef::spilled(int dev) const {
  return valid_device(dev) ? load(s_->used[dev].spilled_size) : 0;
}
bool SlotRef::set_spilled(int dev, uint64_t bytes) {
  if (!valid_device(dev)) return false;
  store(s_->used[dev].spilled_size, bytes);
  return true;
}

uint64_t SlotRef::nvml_used(int dev) const {
  return valid_device(dev) ? load(s_->monitorused[dev]) : 0;
}
bool SlotRef::set_nvml_used(int dev, uint64_t bytes) {
  if (!valid_device(dev)) return false;
  store(s_->monitorused[dev], bytes);
  return true;
}
uint64_t SlotRef::sm_util(int dev) const {
  return valid_device(dev) ? load(s_->device_util[dev].sm_util) : 0;
}
bool SlotRef::set_sm_util(int dev, uint64_t percent) {
  if (!valid_device(dev)) return false;
  store(s_->device_util[dev].sm_util, percent);
  return true;
}
std::optional<uint64_t> SlotRef::gpu_time_ns(int dev) const {
  if (!valid_device(dev) || load(s_->device_util[dev].gpu_time_tag) != kGpuTimeTag)
    return std::nullopt;
  return load(s_->device_util[dev].gpu_time_ns);
}
uint64_t* SlotRef::publish_gpu_time(int dev) {
  if (!valid_device(dev)) return nullptr;
  store(s_->device_util[dev].gpu_time_tag, kGpuTimeTag);
  return &s_->device_util[dev].gpu_time_ns;
}

// ----------------------------------------------------------- RegistryLock

RegistryLock::RegistryLock(std::unique_lock<std::mutex> guard, int fd)
    : guard_(std::move(guard)), fd_(fd) {}

RegistryLock::RegistryLock(RegistryLock&& other) noexcept
    : guard_(std::move(other.guard_)), fd_(std::exchange(other.fd_, -1)) {}

RegistryLock::~RegistryLock() {
  if (fd_ >= 0) unlock_range(fd_, kRegistryLockOffset, 1);
}

// ----------------------------------------------------------------- Region

Region::Region(std::string path, int fd, SharedRegion* r, std::chrono::milliseconds lock_timeout)
    : path_(std::move(path)),
      fd_(fd),
      r_(r),
      lock_timeout_(lock_timeout),
      registry_mutex_(std::make_unique<std::mutex>()) {}

Region::Region(Region&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      r_(std::exchange(other.r_, nullptr)),
      own_slot_(std::exchange(other.own_slot_, -1)),
      lock_timeout_(other.lock_timeout_),
      registry_mutex_(std::move(other.registry_mutex_)) {}

Region& Region::operator=(Region&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    r_ = std::exchange(other.r_, nullptr);
    own_slot_ = std::exchange(other.own_slot_, -1);
    lock_timeout_ = other.lock_timeout_;
    registry_mutex_ = std::move(other.registry_mutex_);
  }
  return *this;
}

Region::~Region() {
  release();
}

void Region::release() {
  if (r_ != nullptr && own_slot_ >= 0) unregister_process();
  abandon();
}

void Region::abandon() {
  if (r_ != nullptr) ::munmap(r_, sizeof(SharedRegion));
  if (fd_ >= 0) ::close(fd_);
  r_ = nullptr;
  fd_ = -1;
  own_slot_ = -1;
}

namespace {

// Removes a file this process created but could not make a state file of
// (a full disk), so that the next process does not find an empty file where
// a state file should be. Only while the path still names that very file.
void remove_if_ours(const std::string& path, int fd) {
  struct stat ours {
  }, now{};
  if (::fstat(fd, &ours) != 0 || ::lstat(path.c_str(), &now) != 0) return;
  if (ours.st_dev == now.st_dev && ours.st_ino == now.st_ino) ::unlink(path.c_str());
}

}  // namespace

Result<Region> Region::open(const std::string& path, const OpenOptions& options) {
  // A file removed by its failed creator while we waited for its
  // initialisation lock is not the state file any more: open the path again.
  for (int attempt = 0;; ++attempt) {
    bool gone = false;
    auto r = open_once(path, options, &gone);
    if (!gone || attempt == 3) return r;
  }
}

Result<Region> Region::open_once(const std::string& path, const OpenOptions& options, bool* gone) {
  const int flags = O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY;
  UniqueFd fd;
  bool created = false;
  if (options.create) {
    fd.reset(::open(path.c_str(), flags | O_CREAT | O_EXCL, options.file_mode));
    if (fd.get() >= 0) {
      created = true;
      // The umask trimmed the mode given to open(); set it exactly, without
      // touching the process umask (upstream calls umask(0) and never restores it).
      if (::fchmod(fd.get(), options.file_mode) != 0) {
        const int err = errno;
        remove_if_ours(path, fd.get());
        return path_error(path, "cannot set mode on the new file", err);
      }
    } else if (errno != EEXIST) {
      return path_error(path, "cannot create", errno);
    }
  }
  if (fd.get() < 0) {
    fd.reset(::open(path.c_str(), flags | O_NONBLOCK));
    if (fd.get() < 0) {
      if (errno == ELOOP) return Error{path + ": is a symbolic link; refusing to follow it", ELOOP};
      return path_error(path, "cannot open", errno);
    }
  }
  // From here on, a file we created and could not finish is removed again.
  struct RemoveUnfinished {
    const std::string& path;
    int fd;
    bool armed;
    ~RemoveUnfinished() {
      if (armed) remove_if_ours(path, fd);
    }
  } unfinished{path, fd.get(), created};

  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return path_error(path, "cannot stat", errno);
  if (!S_ISREG(st.st_mode)) return Error{path + ": not a regular file"};

  if (auto locked = lock_range(fd.get(), kInitLockOffset, kInitLockLength, LockMode::kExclusive,
                               options.lock_timeout);
      !locked) {
    return Error{path + ": initialisation lock: " + locked.error().message,
                 locked.error().sys_errno};
  }
  struct InitUnlock {
    int fd;
    ~InitUnlock() { unlock_range(fd, kInitLockOffset, kInitLockLength); }
  } init_unlock{fd.get()};

  if (::fstat(fd.get(), &st) != 0) return path_error(path, "cannot stat", errno);
  if (st.st_nlink == 0) {
    *gone = true;
    return Error{path + ": removed while it was being created"};
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  std::array<std::byte, kHeaderProbeSize> head{};
  if (size >= head.size() &&
      ::pread(fd.get(), head.data(), head.size(), 0) != static_cast<ssize_t>(head.size())) {
    return path_error(path, "cannot read the header", errno);
  }
  int32_t magic = 0;
  std::memcpy(&magic, head.data(), sizeof magic);

  // Uninitialised: just created, or left by a creator that died before writing
  // the magic. Any other size or a foreign magic is refused untouched.
  const bool fresh = size == 0 || (magic == 0 && (size == kRegionSize || size == kFileSize));
  if (!fresh) {
    auto detected = detect_layout(head, size, path);
    if (!detected) return detected.error();
    if (!detected->writable) {
      return Error{path + ": layout " + std::string(detected->layout->name) + " (version " +
                   std::to_string(detected->major) + "." + std::to_string(detected->minor) +
                   ") is read-only here; only 1.1 and 1.2 files are attached for writing. "
                   "Stop the processes using it and delete it to start afresh"};
    }
  }
  if (auto reserved = reserve_blocks(fd.get(), path); !reserved) {
    // An empty file nobody finished is removed, whoever created it: left
    // behind it would make every later process fail the same way.
    if (size == 0) unfinished.armed = true;
    return reserved.error();
  }
  if (fresh && size == 0) prefill_used_pages(fd.get());

  void* mem =
      ::mmap(nullptr, sizeof(SharedRegion), PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (mem == MAP_FAILED) return path_error(path, "cannot map", errno);
  auto* r = static_cast<SharedRegion*>(mem);
  if (fresh) initialise(r, options.initial, /*zeroed=*/size == 0);
  unfinished.armed = false;

  return Region(path, fd.release(), r, options.lock_timeout);
}

Result<Region> Region::create_private(const InitialValues& initial) {
  // Anonymous memory, not a sized file: nothing a file-size limit or a full
  // disk can refuse (a tenant's `ulimit -f` must not leave a process without
  // any limit). The memfd is only there to carry the OFD locks, which need no
  // bytes behind them.
  UniqueFd fd{::memfd_create("vgpu-private-state", MFD_CLOEXEC)};
  if (fd.get() < 0) return Error::from_errno("cannot create a private state region");
  void* mem = ::mmap(nullptr, sizeof(SharedRegion), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return Error::from_errno("cannot map the private state region");
  auto* r = static_cast<SharedRegion*>(mem);
  initialise(r, initial, /*zeroed=*/true);  // a new memfd reads as zeros
  return Region(kPrivatePath, fd.release(), r, std::chrono::milliseconds(5000));
}

uint32_t Region::minor_version() const {
  return load(r_->minor_version);
}

uint64_t Region::memory_limit(int dev) const {
  return valid_device(dev) ? load(r_->limit[dev]) : 0;
}
bool Region::set_memory_limit(int dev, uint64_t bytes) {
  if (!valid_device(dev)) return false;
  store(r_->limit[dev], bytes);
  return true;
}
uint64_t Region::sm_limit(int dev) const {
  return valid_device(dev) ? load(r_->sm_limit[dev]) : 0;
}
bool Region::set_sm_limit(int dev, uint64_t percent) {
  if (!valid_device(dev)) return false;
  store(r_->sm_limit[dev], percent);
  return true;
}
uint64_t Region::device_count() const {
  return load(r_->device_num);
}
void Region::set_device_count(uint64_t n) {
  store(r_->device_num, n);
}

std::string Region::device_uuid(int dev) const {
  if (!valid_device(dev)) return {};
  const char* s = r_->uuids[dev];
  return std::string(s, strnlen(s, kUuidSize));
}

Result<void> Region::set_device_uuid(int dev, std::string_view uuid) {
  if (!valid_device(dev)) {
    return Error{path_ + ": device index " + std::to_string(dev) + " out of range [0, 16)"};
  }
  if (uuid.size() >= kUuidSize) {
    return Error{path_ + ": UUID of " + std::to_string(uuid.size()) +
                 " characters does not fit (95 at most)"};
  }
  char buf[kUuidSize] = {};
  std::memcpy(buf, uuid.data(), uuid.size());
  std::memcpy(r_->uuids[dev], buf, kUuidSize);
  return {};
}

void Region::set_utilization_switch(int32_t v) {
  store(r_->utilization_switch, v);
}
void Region::set_recent_kernel(int32_t v) {
  store(r_->recent_kernel, v);
}
bool Region::exchange_recent_kernel(int32_t expected, int32_t desired) {
  return std::atomic_ref<int32_t>(r_->recent_kernel).compare_exchange_strong(expected, desired);
}
int32_t Region::priority() const {
  return load(r_->priority);
}
void Region::set_priority(int32_t v) {
  store(r_->priority, v);
}
uint64_t Region::last_kernel_time() const {
  return load(r_->last_kernel_time);
}
void Region::set_last_kernel_time(uint64_t t) {
  store(r_->last_kernel_time, t);
}
int32_t Region::proc_num() const {
  return load(r_->proc_num);
}

uint64_t Region::device_usage(int dev) const {
  return device_usage_excluding(dev, -1);
}

uint64_t Region::device_usage_excluding(int dev, int skip) const {
  if (!valid_device(dev)) return 0;
  const int n = std::clamp<int32_t>(proc_num(), 0, kMaxProcesses);
  uint64_t sum = 0;
  for (int i = 0; i < n; ++i) {
    if (i == skip) continue;
    const uint64_t t = load(r_->procs[i].used[dev].total);
    sum = (sum > UINT64_MAX - t) ? UINT64_MAX : sum + t;
  }
  return sum;
}

SlotRef Region::slot(int index) {
  return SlotRef(r_->procs[std::clamp(index, 0, kMaxProcesses - 1)]);
}

Liveness Region::slot_liveness(int index) const {
  if (index < 0 || index >= kMaxProcesses) return Liveness::kUnknown;
  if (index == own_slot_) return Liveness::kAlive;
  if (load(r_->procs[index].owner_tag) != kOwnerTag) return Liveness::kUnknown;
  auto held = range_locked_by_other(fd_, slot_lock_offset(index), 1, LockMode::kExclusive);
  if (!held) return Liveness::kUnknown;
  return *held ? Liveness::kAlive : Liveness::kDead;
}

Result<RegistryLock> Region::lock_registry(std::chrono::steady_clock::duration timeout) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + timeout;
  // try_lock polling rather than a timed mutex: holders keep it for
  // microseconds, and TSan cannot follow pthread_mutex_clocklock.
  auto pause = std::chrono::microseconds(20);
  for (;;) {
    std::unique_lock guard(*registry_mutex_, std::try_to_lock);
    const auto now = clock::now();
    if (guard.owns_lock()) {
      const auto left = std::max<clock::duration>(deadline - now, clock::duration::zero());
      if (auto r = lock_range(fd_, kRegistryLockOffset, 1, LockMode::kExclusive, left); !r) {
        return Error{path_ + ": registry lock: " + r.error().message, r.error().sys_errno};
      }
      return RegistryLock(std::move(guard), fd_);
    }
    if (now >= deadline) {
      return Error{path_ + ": registry lock: another thread of this process held it too long",
                   ETIMEDOUT};
    }
    std::this_thread::sleep_for(std::min<clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

uint64_t Region::clear_slot(int index) {
  ProcSlot& s = r_->procs[index];
  // Usage first, identity last: a reader never sees a free slot still charged.
  const uint64_t bytes = clear_usage(s);
  store(s.status, int32_t{kSlotFree});
  store(s.hostpid, int32_t{0});
  store(s.pid, int32_t{0});
  store(s.owner_start_time, uint64_t{0});
  store(s.owner_tag, uint64_t{0});
  return bytes;
}

bool Region::slot_owner_dead(int index, const ProcSlot& s, const SweepOptions& options) const {
  if (load(s.owner_tag) == kOwnerTag) {
    auto held = range_locked_by_other(fd_, slot_lock_offset(index), 1, LockMode::kExclusive);
    return held && !*held;  // a failed probe counts as alive
  }
  const int32_t pid = load(s.pid);
  if (pid == 0 && load(s.status) == kSlotFree) {
    // Upstream marks an exited slot free but leaves its usage for a later sweep.
    for (const DeviceMemory& m : s.used) {
      if (load(m.total) != 0) return true;
    }
    return false;
  }
  if (!options.check_untagged_pids) return false;
  // In the writers' namespace a live PID is unique, so an upstream slot bearing
  // our own PID belongs to a dead predecessor that PID reuse made look alive.
  return pid == ::getpid() || !process_alive(pid, options.proc_root);
}

SweepReport Region::sweep_locked(const SweepOptions& options, int end) {
  SweepReport report;
  report.proc_num_before = proc_num();
  for (int i = 0; i < end; ++i) {
    ProcSlot& s = r_->procs[i];
    if (i != own_slot_ && slot_owner_dead(i, s, options)) {
      const int32_t pid = load(s.pid);
      report.reclaimed.push_back(ReclaimedSlot{i, pid, clear_slot(i)});
    }
  }
  report.proc_num_after = trim_proc_num(end);
  return report;
}

Result<SweepReport> Region::sweep(const SweepOptions& options) {
  auto lock = lock_registry();
  if (!lock) return lock.error();
  return sweep_locked(options);
}

Result<int> Region::register_process(const ProcessIdentity& who,
                                     const SweepOptions& sweep_options) {
  if (own_slot_ >= 0) {
    return Error{path_ + ": this handle already owns slot " + std::to_string(own_slot_)};
  }
  auto lock = lock_registry();
  if (!lock) return lock.error();
  // Slots from proc_num on are free (a registration raises proc_num before it
  // tags its slot), so only those below it can hold a dead owner. Scanning
  // all 1024 would read every page of a new file, where a new container's
  // first process touches the header and one slot.
  sweep_locked(sweep_options, std::clamp(proc_num(), 0, kMaxProcesses));

  for (int i = 0; i < kMaxProcesses; ++i) {
    ProcSlot& s = r_->procs[i];
    if (load(s.pid) != 0 || load(s.status) != kSlotFree || load(s.owner_tag) != 0) continue;
    auto got = try_lock_range(fd_, slot_lock_offset(i), 1, LockMode::kExclusive);
    if (!got) return Error{path_ + ": slot " + std::to_string(i) + ": " + got.error().message};
    if (!*got) continue;  // its owner is still releasing it

    // proc_num first, so that the slot is below it from the moment it is
    // tagged; then the tag: if we die from here on, the tag plus the free
    // lock marks the slot dead and the next sweep reclaims it.
    if (proc_num() <= i) store(r_->proc_num, int32_t{i + 1});
    store(s.owner_tag, kOwnerTag);
    store(s.owner_start_time, who.start_time);
    clear_usage(s);
    store(s.hostpid, int32_t{0});
    store(s.pid, static_cast<int32_t>(who.pid));
    store(s.status, int32_t{kSlotRunning});
    own_slot_ = i;
    return i;
  }
  return Error{path_ + ": all " + std::to_string(kMaxProcesses) +
               " process slots are held by live processes"};
}

void Region::unregister_process() {
  if (own_slot_ < 0 || r_ == nullptr) return;
  clear_slot(own_slot_);
  unlock_range(fd_, slot_lock_offset(own_slot_), 1);
  own_slot_ = -1;
  // Trim proc_num only if nobody holds the registry: an exiting process must
  // never wait, and the next sweep trims anyway.
  std::unique_lock guard(*registry_mutex_, std::try_to_lock);
  if (!guard.owns_lock()) return;
  auto got = try_lock_range(fd_, kRegistryLockOffset, 1, LockMode::kExclusive);
  if (!got || !*got) return;
  RegistryLock lock(std::move(guard), fd_);
  trim_proc_num(std::clamp(proc_num(), 0, kMaxProcesses));
}

int Region::trim_proc_num(int end) {
  int highest = -1;
  for (int i = end - 1; i >= 0 && highest < 0; --i) {
    const ProcSlot& s = r_->procs[i];
    if (load(s.pid) != 0 || load(s.status) != kSlotFree || load(s.owner_tag) != 0) highest = i;
  }
  store(r_->proc_num, int32_t{highest + 1});
  return highest + 1;
}

}  // namespace hami::region
