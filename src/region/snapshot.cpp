#include "region/snapshot.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <optional>

#include "common/unique_fd.hpp"
#include "region/ofd_lock.hpp"

namespace hami::region {
namespace {

// A file's bytes as read: one piece from offset 0 (parse_region), or the few
// pieces read_snapshot needs. Reads outside every piece give zeros.
class Reader {
 public:
  struct Piece {
    size_t offset = 0;
    std::span<const std::byte> bytes;
  };
  explicit Reader(std::span<const std::byte> bytes) : pieces_{{Piece{0, bytes}}}, count_(1) {}
  Reader(std::span<const Piece> pieces) : count_(std::min(pieces.size(), pieces_.size())) {
    std::copy_n(pieces.begin(), count_, pieces_.begin());
  }
  template <class T>
  T at(size_t off) const {
    T v{};
    auto b = bytes(off, sizeof v);
    if (!b.empty()) std::memcpy(&v, b.data(), sizeof v);
    return v;
  }
  std::span<const std::byte> bytes(size_t off, size_t n) const {
    for (size_t i = 0; i < count_; ++i) {
      const Piece& p = pieces_[i];
      if (off >= p.offset && off - p.offset + n <= p.bytes.size()) {
        return p.bytes.subspan(off - p.offset, n);
      }
    }
    return {};
  }

 private:
  std::array<Piece, 3> pieces_{};
  size_t count_;
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
    if (so.used_stride >= 48) s.used[d].spilled = r.at<uint64_t>(u + 40);
    s.nvml_used[d] = r.at<uint64_t>(base + so.monitorused + 8 * static_cast<size_t>(d));
    if (so.device_util) {
      const size_t util = base + *so.device_util + so.util_stride * static_cast<size_t>(d);
      s.sm_util[d] = r.at<uint64_t>(util + 16);
      // Our GPU time counter, in what upstream leaves unused (tagged: ours).
      if (so.util_stride >= 40 && r.at<uint64_t>(util + 32) == kGpuTimeTag)
        s.gpu_time_ns[d] = r.at<uint64_t>(util + 24);
    }
  }
  return s;
}

// Bytes read, fewer only at end of file; nullopt on an I/O error (errno set).
std::optional<size_t> pread_full(int fd, void* buf, size_t len, size_t offset) {
  auto* out = static_cast<std::byte*>(buf);
  size_t got = 0;
  while (got < len) {
    ssize_t n = ::pread(fd, out + got, len - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  return got;
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

namespace {

RegionSnapshot parse_detected(const Reader& r, DetectedLayout detected, uint64_t file_size,
                              std::string_view name) {
  const Layout& l = *detected.layout;
  RegionSnapshot snap;
  snap.source = std::string(name);
  snap.file_size = file_size;
  snap.layout = &l;
  snap.major = detected.major;
  snap.minor = detected.minor;
  snap.writable = detected.writable;
  snap.warnings = std::move(detected.warnings);

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

}  // namespace

Result<RegionSnapshot> parse_region(std::span<const std::byte> bytes, std::string_view name) {
  auto detected =
      detect_layout(bytes.first(std::min(bytes.size(), kHeaderProbeSize)), bytes.size(), name);
  if (!detected) return detected.error();
  return parse_detected(Reader(bytes), std::move(*detected), bytes.size(), name);
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

  // Read the header, the tail and only the slots in use: a file is ~2 MB, nearly
  // all of it empty slots, and the node agent reads a thousand of them a pass.
  std::array<std::byte, kHeaderProbeSize> head{};
  const size_t head_len = std::min<uint64_t>(size, head.size());
  if (!pread_full(fd, head.data(), head_len, 0)) return Error::from_errno(path + ": read failed");
  auto detected = detect_layout(std::span<const std::byte>(head.data(), head_len), size, path);
  if (!detected) return detected.error();
  const Layout& l = *detected->layout;

  std::vector<std::byte> header(l.procs);
  std::vector<std::byte> tail(size - l.proc_num);
  bool short_read = false;
  auto read_piece = [&](std::vector<std::byte>& buf, size_t offset) -> bool {
    auto n = pread_full(fd, buf.data(), buf.size(), offset);
    if (!n) return false;
    short_read |= *n < buf.size();
    buf.resize(*n);
    return true;
  };
  if (!read_piece(header, 0) || !read_piece(tail, l.proc_num)) {
    return Error::from_errno(path + ": read failed");
  }
  int32_t proc_num = 0;
  if (tail.size() >= sizeof proc_num) std::memcpy(&proc_num, tail.data(), sizeof proc_num);
  const auto used_slots = static_cast<size_t>(std::clamp<int32_t>(proc_num, 0, kMaxProcesses));
  std::vector<std::byte> slots(used_slots * l.slot.size);
  if (!read_piece(slots, l.procs)) return Error::from_errno(path + ": read failed");
  if (short_read) return Error{path + ": file was truncated while being read"};

  const std::array<Reader::Piece, 3> pieces{Reader::Piece{0, header}, Reader::Piece{l.procs, slots},
                                            Reader::Piece{l.proc_num, tail}};
  RegionSnapshot snap = parse_detected(Reader(pieces), std::move(*detected), size, path);
  snap.file_device = static_cast<uint64_t>(st.st_dev);
  snap.file_inode = static_cast<uint64_t>(st.st_ino);
  probe_liveness(fd, snap);
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
