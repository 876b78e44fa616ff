#include "region/snapshot.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/unique_fd.hpp"
#include "region/ofd_lock.hpp"

namespace hami::region {
namespace {

class Reader {
 public:
  explicit Reader(std::span<const std::byte> bytes) : bytes_(bytes) {}
  template <class T>
  T at(size_t off) const {
    T v{};
    if (off + sizeof v <= bytes_.size()) std::memcpy(&v, bytes_.data() + off, sizeof v);
    return v;
  }
  std::span<const std::byte> bytes(size_t off, size_t n) const {
    if (off + n > bytes_.size()) return {};
    return bytes_.subspan(off, n);
  }

 private:
  std::span<const std::byte> bytes_;
};

// UUIDs are NUL-terminated ASCII upstream; anything else is shown, not trusted.
std::string read_uuid(std::span<const std::byte> raw, bool& sanitized) {
  std::string out;
  for (std::byte b : raw) {
    const auto c = static_cast<unsigned char>(b);
    if (c == 0) break;
    if (c < 0x20 || c > 0x7e) {
      out.push_back('?');
      sanitized = true;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

SlotSnapshot read_slot(const Reader& r, const Layout& l, int index) {
  const SlotOffsets& so = l.slot;
  const size_t base = l.procs + so.size * static_cast<size_t>(index);
  SlotSnapshot s;
  s.index = index;
  s.pid = r.at<int32_t>(base + so.pid);
  s.host_pid = r.at<int32_t>(base + so.hostpid);
  s.status = r.at<int32_t>(base + so.status);
  if (so.owner_tag) s.owner_tagged = r.at<uint64_t>(base + *so.owner_tag) == kOwnerTag;
  if (s.owner_tagged && so.owner_start_time) {
    s.owner_start_time = r.at<uint64_t>(base + *so.owner_start_time);
  }
  for (int d = 0; d < kMaxDevices; ++d) {
    const size_t u = base + so.used + so.used_stride * static_cast<size_t>(d);
    s.used[d] = DeviceMemoryUsage{r.at<uint64_t>(u), r.at<uint64_t>(u + 8), r.at<uint64_t>(u + 16),
                                  r.at<uint64_t>(u + 24), r.at<uint64_t>(u + 32)};
    s.nvml_used[d] = r.at<uint64_t>(base + so.monitorused + 8 * static_cast<size_t>(d));
    if (so.device_util) {
      s.sm_util[d] =
          r.at<uint64_t>(base + *so.device_util + so.util_stride * static_cast<size_t>(d) + 16);
    }
  }
  return s;
}

bool slot_occupied(const SlotSnapshot& s) {
  if (s.pid != 0 || s.status != 0 || s.owner_tagged) return true;
  for (const auto& u : s.used) {
    if (u.total != 0 || u.context != 0 || u.data != 0) return true;
  }
  return false;
}

}  // namespace

int RegionSnapshot::device_rows() const {
  int rows = static_cast<int>(std::min<uint64_t>(device_num, kMaxDevices));
  for (const SlotSnapshot& s : slots) {
    for (int d = rows; d < kMaxDevices; ++d) {
      if (s.used[d].total != 0) rows = d + 1;
    }
  }
  return rows;
}

uint64_t RegionSnapshot::device_used(int dev) const {
  if (dev < 0 || dev >= kMaxDevices) return 0;
  uint64_t sum = 0;
  for (const SlotSnapshot& s : slots) {
    if (s.status == kSlotFree) continue;
    const uint64_t t = s.used[dev].total;
    sum = (sum > UINT64_MAX - t) ? UINT64_MAX : sum + t;
  }
  return sum;
}

Result<RegionSnapshot> parse_region(std::span<const std::byte> bytes, std::string_view name) {
  auto detected =
      detect_layout(bytes.first(std::min(bytes.size(), kHeaderProbeSize)), bytes.size(), name);
  if (!detected) return detected.error();
  const Layout& l = *detected->layout;
  const Reader r(bytes);

  RegionSnapshot snap;
  snap.source = std::string(name);
  snap.file_size = bytes.size();
  snap.layout = &l;
  snap.major = detected->major;
  snap.minor = detected->minor;
  snap.writable = detected->writable;
  snap.warnings = std::move(detected->warnings);

  snap.device_num = r.at<uint64_t>(l.device_num);
  if (snap.device_num > kMaxDevices) {
    snap.warnings.push_back("device_num is " + std::to_string(snap.device_num) +
                            ", more than the 16 the format holds; showing 16");
  }
  bool sanitized = false;
  for (int d = 0; d < kMaxDevices; ++d) {
    snap.uuids[d] =
        read_uuid(r.bytes(l.uuids + kUuidSize * static_cast<size_t>(d), kUuidSize), sanitized);
    snap.memory_limit[d] = r.at<uint64_t>(l.limit + 8 * static_cast<size_t>(d));
    snap.sm_limit[d] = r.at<uint64_t>(l.sm_limit + 8 * static_cast<size_t>(d));
  }
  if (sanitized) snap.warnings.push_back("device UUIDs hold non-printable bytes (shown as '?')");

  snap.proc_num_raw = r.at<int32_t>(l.proc_num);
  snap.proc_num = std::clamp<int32_t>(snap.proc_num_raw, 0, kMaxProcesses);
  if (snap.proc_num != snap.proc_num_raw) {
    snap.warnings.push_back("proc_num is " + std::to_string(snap.proc_num_raw) +
                            ", outside [0, 1024]; clamped to " + std::to_string(snap.proc_num));
  }
  snap.utilization_switch = r.at<int32_t>(l.utilization_switch);
  snap.recent_kernel = r.at<int32_t>(l.recent_kernel);
  snap.priority = r.at<int32_t>(l.priority);
  if (l.last_kernel_time) snap.last_kernel_time = r.at<uint64_t>(*l.last_kernel_time);

  for (int i = 0; i < snap.proc_num; ++i) {
    SlotSnapshot s = read_slot(r, l, i);
    if (slot_occupied(s)) snap.slots.push_back(s);
  }
  return snap;
}

void probe_liveness(int fd, RegionSnapshot& snapshot) {
  for (SlotSnapshot& s : snapshot.slots) {
    if (!s.owner_tagged) continue;
    auto held = range_locked_by_other(fd, slot_lock_offset(s.index), 1, LockMode::kExclusive);
    if (held) s.liveness = *held ? Liveness::kAlive : Liveness::kDead;
  }
}

Result<RegionSnapshot> read_snapshot(const std::string& path) {
  // O_NONBLOCK: a FIFO or device at this path must not hang the reader.
  UniqueFd owned{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)};
  const int fd = owned.get();
  if (fd < 0) return Error::from_errno(path + ": cannot open");

  struct stat st {};
  if (::fstat(fd, &st) != 0) return Error::from_errno(path + ": cannot stat");
  if (!S_ISREG(st.st_mode)) return Error{path + ": not a regular file"};
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > kMaxStateFileSize) {
    return Error{path + ": file is " + std::to_string(size) +
                 " bytes, larger than any known state-file layout"};
  }

  std::vector<std::byte> bytes(size);
  size_t got = 0;
  while (got < size) {
    ssize_t n = ::pread(fd, bytes.data() + got, size - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::from_errno(path + ": read failed");
    if (n == 0) break;  // truncated while we read: parse what is there
    got += static_cast<size_t>(n);
  }
  bytes.resize(got);

  auto snap = parse_region(bytes, path);
  if (!snap) return snap.error();
  probe_liveness(fd, *snap);
  return snap;
}

std::string_view status_name(int32_t status) {
  switch (status) {
    case kSlotFree:
      return "exited";
    case kSlotRunning:
      return "running";
    case kSlotSuspended:
      return "suspended";
    default:
      return "unknown";
  }
}

std::string_view liveness_name(Liveness l) {
  switch (l) {
    case Liveness::kAlive:
      return "alive";
    case Liveness::kDead:
      return "dead";
    case Liveness::kUnknown:
      break;
  }
  return "unknown";
}

}  // namespace hami::region
