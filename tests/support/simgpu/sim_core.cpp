#include "sim_core.hpp"

#include "sim_mig.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <string_view>

namespace simgpu {
namespace {

// Changes whenever State's layout does, so a state file an older build wrote
// is configured afresh instead of misread. Layout 2: Device's NUMA node and
// compute capability, Proc's busy time. Layout 3: MIG (State::mig,
// Proc::mig_used).
constexpr uint32_t kMagic = 0x5349474d + 2;  // "MGIS" + layout 3

uint64_t parse_size(const char* s) {
  char* end = nullptr;
  uint64_t v = std::strtoull(s, &end, 10);
  switch (end != nullptr ? *end : 0) {
    case 'k':
    case 'K':
      return v << 10;
    case 'm':
    case 'M':
      return v << 20;
    case 'g':
    case 'G':
      return v << 30;
    default:
      return v;
  }
}

void configure(State& st) {
  st.context_size = 300ull << 20;
  if (const char* c = std::getenv("SIMGPU_CONTEXT_SIZE")) st.context_size = parse_size(c);
  std::string spec =
      "GPU-5a3e0000-0000-4000-8000-000000000000:80g,"
      "GPU-5a3e0000-0000-4000-8000-000000000001:80g";
  if (const char* d = std::getenv("SIMGPU_DEVICES")) spec = d;
  st.device_count = 0;
  size_t pos = 0;
  while (pos < spec.size() && st.device_count < kMaxDevices) {
    size_t end = spec.find(',', pos);
    if (end == std::string::npos) end = spec.size();
    const std::string item = spec.substr(pos, end - pos);
    pos = end + 1;
    const size_t colon = item.rfind(':');
    Device& dev = st.devices[st.device_count];
    std::snprintf(dev.uuid, sizeof dev.uuid, "%s", item.substr(0, colon).c_str());
    std::snprintf(dev.name, sizeof dev.name, "Simulated GPU %u", st.device_count);
    dev.total = colon == std::string::npos ? (80ull << 30) : parse_size(item.c_str() + colon + 1);
    dev.numa_node = 0;
    dev.cc_major = 9;  // an H100
    dev.cc_minor = 0;
    ++st.device_count;
  }
  if (const char* names = std::getenv("SIMGPU_NAMES")) {
    const std::string list = names;
    size_t at = 0;
    for (uint32_t i = 0; i < st.device_count && at <= list.size(); ++i) {
      size_t end = list.find(',', at);
      if (end == std::string::npos) end = list.size();
      if (end > at)
        std::snprintf(st.devices[i].name, sizeof st.devices[i].name, "%s",
                      list.substr(at, end - at).c_str());
      at = end + 1;
    }
  }
  if (const char* numa = std::getenv("SIMGPU_NUMA")) {
    const char* p = numa;
    for (uint32_t i = 0; i < st.device_count && *p != '\0'; ++i) {
      char* end = nullptr;
      st.devices[i].numa_node = static_cast<int32_t>(std::strtol(p, &end, 10));
      p = *end == ',' ? end + 1 : end;
    }
  }
  st.next_address.store(0x7f0000000000ull);
  mig::configure(st);
}

State* map_state() {
  const char* path = std::getenv("SIMGPU_STATE");
  if (path == nullptr || *path == '\0') {
    void* mem =
        ::mmap(nullptr, sizeof(State), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    auto* st = new (mem) State();
    configure(*st);
    st->magic = kMagic;
    return st;
  }
  const int fd = ::open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) {
    std::fprintf(stderr, "simgpu: cannot open %s: %s\n", path, std::strerror(errno));
    std::abort();
  }
  ::flock(fd, LOCK_EX);
  if (::ftruncate(fd, sizeof(State)) != 0) std::abort();
  void* mem = ::mmap(nullptr, sizeof(State), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  auto* st = static_cast<State*>(mem);
  if (st->magic != kMagic) {
    configure(*st);
    st->magic = kMagic;
  }
  ::flock(fd, LOCK_UN);
  ::close(fd);
  return st;
}

// Forgets what a slot's previous owner used and ran.
void clear(Proc& p) {
  for (auto& u : p.used)
    u.store(0);
  for (auto& gpu : p.mig_used) {
    for (auto& u : gpu)
      u.store(0);
  }
  for (Busy& b : p.busy) {
    b.run_start.store(0);
    b.run_end.store(0);
    for (auto& bucket : b.buckets)
      bucket.store(0);
    b.seq.store(0);
  }
}

// A real GPU frees a process's memory when it dies; so does the simulator.
void reap_dead(State& st) {
  for (Proc& p : st.procs) {
    const int32_t pid = p.pid.load();
    if (pid == 0 || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    int32_t expected = pid;
    if (!p.pid.compare_exchange_strong(expected, -1)) continue;
    clear(p);
    p.pid.store(0);
  }
}

Proc& self(State& st) {
  static thread_local int32_t cached_pid = 0;
  static thread_local Proc* cached = nullptr;
  const int32_t me = ::getpid();
  if (cached != nullptr && cached_pid == me) return *cached;
  for (Proc& p : st.procs) {
    if (p.pid.load() == me) {
      cached = &p;
      cached_pid = me;
      return p;
    }
  }
  reap_dead(st);
  for (Proc& p : st.procs) {
    int32_t expected = 0;
    if (p.pid.compare_exchange_strong(expected, me)) {
      clear(p);
      cached = &p;
      cached_pid = me;
      return p;
    }
  }
  std::fprintf(stderr, "simgpu: more than %d processes\n", kMaxProcs);
  std::abort();
}

int64_t monotonic_ns() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// CLOCK_REALTIME - CLOCK_MONOTONIC, fixed per process so that work the engine
// queued back to back stays back to back once converted.
int64_t clock_offset() {
  static const int64_t offset = realtime_ns() - monotonic_ns();
  return offset;
}

constexpr int64_t kBucketNs = int64_t{1} << kBusyBucketShift;
constexpr int64_t kHistoryNs = kBucketNs * kBusyBuckets;
constexpr int kTagShift = kBusyBucketShift + 1;  // a bucket holds at most kBucketNs
constexpr uint64_t kBusyMask = (uint64_t{1} << kTagShift) - 1;

uint64_t overlap(int64_t a0, int64_t a1, int64_t b0, int64_t b1) {
  const int64_t lo = std::max(a0, b0);
  const int64_t hi = std::min(a1, b1);
  return hi > lo ? static_cast<uint64_t>(hi - lo) : 0;
}

// Adds a finished run [start, end) to the buckets (under b.seq). What lies
// outside the ring's reach around now is dropped: older buckets are gone
// anyway, and far-future ones would overwrite the recent past.
void spread(Busy& b, int64_t start, int64_t end) {
  const int64_t now = realtime_ns();
  const int64_t lo = std::max(start, now - kHistoryNs);
  const int64_t hi = std::min(end, now + kHistoryNs / 2);
  if (hi <= lo) return;
  for (int64_t k = lo >> kBusyBucketShift; k <= (hi - 1) >> kBusyBucketShift; ++k) {
    const uint64_t part = overlap(lo, hi, k << kBusyBucketShift, (k + 1) << kBusyBucketShift);
    std::atomic<uint64_t>& slot = b.buckets[k % kBusyBuckets];
    const uint64_t cur = slot.load();
    const uint64_t tag = cur >> kTagShift;
    const auto key = static_cast<uint64_t>(k);
    if (tag == key) {
      slot.store((key << kTagShift) | std::min(kBusyMask, (cur & kBusyMask) + part));
    } else if (tag < key) {
      slot.store((key << kTagShift) | part);
    }
  }
}

std::mutex g_fail_mu;
std::map<std::string, int> g_calls;

// Calls per function name, for tests (simgpu_calls). Never destroyed: exit-time
// code in other libraries may still call into the driver.
struct Counters {
  std::mutex mu;
  std::map<std::string, uint64_t, std::less<>> n;
};
Counters& counters() {
  static Counters* c = new Counters();
  return *c;
}

}  // namespace

State& state() {
  static State* st = map_state();
  return *st;
}

void uuid_bytes(const char* uuid, unsigned char out[16]) {
  std::memset(out, 0, 16);
  int n = 0;
  const char* dash = std::strchr(uuid, '-');
  for (const char* p = dash != nullptr ? dash + 1 : uuid; *p != '\0' && n < 32; ++p) {
    int v;
    if (*p >= '0' && *p <= '9')
      v = *p - '0';
    else if (*p >= 'a' && *p <= 'f')
      v = *p - 'a' + 10;
    else if (*p >= 'A' && *p <= 'F')
      v = *p - 'A' + 10;
    else
      continue;
    out[n / 2] = static_cast<unsigned char>(out[n / 2] | (n % 2 == 0 ? v << 4 : v));
    ++n;
  }
}

uint64_t granule(uint64_t bytes) {
  const uint64_t page = 2ull << 20;
  if (bytes >= page / 2) return (bytes + page - 1) / page * page;
  return (bytes + 511) / 512 * 512;
}

namespace {

// Slot of a MIG device id's compute instance, and of its GPU instance.
int ci_slot(int dev) {
  return dev - mig_device(gpu_of(dev), 0);
}

uint64_t gpu_used(int gpu) {
  uint64_t sum = 0;
  for (Proc& p : state().procs) {
    if (p.pid.load() > 0) sum += p.used[gpu].load();
  }
  return sum;
}

// What live processes use on GPU instance slot `gi` of `gpu`, over its CIs.
uint64_t gi_used(int gpu, int gi) {
  const Mig& m = state().mig[gpu];
  uint64_t sum = 0;
  for (Proc& p : state().procs) {
    if (p.pid.load() <= 0) continue;
    for (int c = 0; c < kMaxCis; ++c) {
      if (m.cis[c].id >= 0 && m.cis[c].gi == gi) sum += p.mig_used[gpu][c].load();
    }
  }
  return sum;
}

}  // namespace

uint64_t device_used(int dev) {
  if (!is_mig_device(dev)) return gpu_used(dev);
  return gi_used(gpu_of(dev), state().mig[gpu_of(dev)].cis[ci_slot(dev)].gi);
}

void reap_dead_processes() {
  reap_dead(state());
}

uint64_t device_total(int dev) {
  const int gpu = gpu_of(dev);
  if (!is_mig_device(dev)) return state().devices[gpu].total;
  const mig::GiProfile* p = mig::gi_profile_of(dev);
  return p != nullptr ? p->memory_mib << 20 : 0;
}

bool take(int dev, uint64_t bytes) {
  State& st = state();
  Proc& me = self(st);
  const int gpu = gpu_of(dev);
  auto fits = [&] {
    if (gpu_used(gpu) + bytes > st.devices[gpu].total) return false;
    return !is_mig_device(dev) ||
           (st.mig[gpu].cis[ci_slot(dev)].id >= 0 && device_used(dev) + bytes <= device_total(dev));
  };
  if (!fits()) {
    reap_dead(st);
    if (!fits()) return false;
  }
  me.used[gpu].fetch_add(bytes);
  if (is_mig_device(dev)) me.mig_used[gpu][ci_slot(dev)].fetch_add(bytes);
  return true;
}

void give(int dev, uint64_t bytes) {
  auto less = [bytes](std::atomic<uint64_t>& u) {
    uint64_t cur = u.load();
    while (!u.compare_exchange_weak(cur, cur > bytes ? cur - bytes : 0)) {
    }
  };
  Proc& me = self(state());
  less(me.used[gpu_of(dev)]);
  if (is_mig_device(dev)) less(me.mig_used[gpu_of(dev)][ci_slot(dev)]);
}

uint64_t next_address(uint64_t bytes) {
  const uint64_t span = (bytes + (2ull << 20) - 1) / (2ull << 20) * (2ull << 20);
  return state().next_address.fetch_add(span + (2ull << 20));
}

int64_t realtime_ns() {
  timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void record_busy(int dev, int64_t start_mono_ns, int64_t end_mono_ns) {
  dev = gpu_of(dev);  // a MIG device's time is its GPU's
  if (dev < 0 || dev >= kMaxDevices || end_mono_ns <= start_mono_ns) return;
  const int64_t start = start_mono_ns + clock_offset();
  const int64_t end = end_mono_ns + clock_offset();
  Busy& b = self(state()).busy[dev];
  const int64_t run_start = b.run_start.load();
  const int64_t run_end = b.run_end.load();
  b.seq.fetch_add(1);
  if (run_end > run_start && start >= run_start && start <= run_end) {
    b.run_end.store(std::max(run_end, end));
  } else {
    if (run_end > run_start) spread(b, run_start, run_end);
    b.run_start.store(start);
    b.run_end.store(end);
  }
  b.seq.fetch_add(1);
}

uint64_t busy_ns(const Proc& p, int dev, int64_t from, int64_t to) {
  if (dev < 0 || dev >= kMaxDevices || to <= from) return 0;
  const Busy& b = p.busy[dev];
  // A writer killed mid-update leaves seq odd: after enough tries, take what is there.
  for (int attempt = 0;; ++attempt) {
    const uint32_t seq = b.seq.load();
    const bool settled = attempt >= 1000;
    if ((seq & 1) != 0 && !settled) continue;
    uint64_t total = overlap(b.run_start.load(), b.run_end.load(), from, to);
    const int64_t first = std::max(from, to - kHistoryNs) >> kBusyBucketShift;
    for (int64_t k = first; k <= (to - 1) >> kBusyBucketShift; ++k) {
      const uint64_t v = b.buckets[k % kBusyBuckets].load();
      if (v >> kTagShift != static_cast<uint64_t>(k)) continue;
      // Within a bucket, busy time counts as evenly spread.
      const uint64_t part = overlap(k << kBusyBucketShift, (k + 1) << kBusyBucketShift, from, to);
      total += ((v & kBusyMask) * part) >> kBusyBucketShift;
    }
    if (settled || b.seq.load() == seq) return total;
  }
}

bool should_fail(const char* fn) {
  const char* spec = std::getenv("SIMGPU_FAIL");
  if (spec == nullptr) return false;
  const std::string s = spec;
  const std::string name = fn;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    const std::string item = s.substr(pos, end - pos);
    pos = end + 1;
    const size_t colon = item.find(':');
    if (item.substr(0, colon) != name) continue;
    const std::string when = colon == std::string::npos ? "always" : item.substr(colon + 1);
    if (when == "always") return true;
    std::lock_guard lock(g_fail_mu);
    return ++g_calls[name] == std::atoi(when.c_str());
  }
  return false;
}

void count(const char* name) {
  Counters& c = counters();
  std::lock_guard lock(c.mu);
  auto it = c.n.find(std::string_view(name));
  if (it == c.n.end()) it = c.n.emplace(name, 0).first;
  ++it->second;
}

uint64_t calls(const char* name) {
  Counters& c = counters();
  std::lock_guard lock(c.mu);
  auto it = c.n.find(std::string_view(name));
  return it == c.n.end() ? 0 : it->second;
}

namespace {
std::mutex g_mig_mu;
// This process's descriptor of the state file: flock() locks per open file,
// so a forked child opens its own.
int mig_lock_fd() {
  static int fd = -1;
  static pid_t owner = 0;
  const char* path = std::getenv("SIMGPU_STATE");
  if (path == nullptr || *path == '\0') return -1;
  if (owner != ::getpid()) {
    fd = ::open(path, O_RDWR | O_CLOEXEC);
    owner = ::getpid();
  }
  return fd;
}
}  // namespace

MigLock::MigLock() {
  g_mig_mu.lock();
  if (const int fd = mig_lock_fd(); fd >= 0) ::flock(fd, LOCK_EX);
}

MigLock::~MigLock() {
  if (const int fd = mig_lock_fd(); fd >= 0) ::flock(fd, LOCK_UN);
  g_mig_mu.unlock();
}

int nvml_pid_offset() {
  const char* s = std::getenv("SIMGPU_NVML_PID_OFFSET");
  return s != nullptr ? std::atoi(s) : 0;
}

}  // namespace simgpu

extern "C" __attribute__((visibility("default"))) uint64_t simgpu_calls(const char* name) {
  return name != nullptr ? simgpu::calls(name) : 0;
}
