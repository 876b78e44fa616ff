#include "monitor/state_writer.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "region/layout_v1.hpp"

namespace hami::monitor {
namespace {

bool size_fits(const region::Layout& l, off_t size) {
  const auto s = static_cast<uint64_t>(size);
  return s == l.region_size || s == l.region_size + 1;
}

}  // namespace

Result<StateWriter> StateWriter::open(const region::RegionSnapshot& snap) {
  if (snap.layout == nullptr) return Error{snap.source + ": no layout detected; not writing"};
  // O_NOFOLLOW: a tenant may replace its file with a link to something of ours.
  UniqueFd fd{::open(snap.source.c_str(), O_RDWR | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW)};
  if (fd.get() < 0) return Error::from_errno(snap.source + ": cannot open for writing");
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Error::from_errno(snap.source + ": cannot stat");
  if (!S_ISREG(st.st_mode)) return Error{snap.source + ": not a regular file; not writing"};
  if (static_cast<uint64_t>(st.st_dev) != snap.file_device ||
      static_cast<uint64_t>(st.st_ino) != snap.file_inode) {
    return Error{snap.source + ": replaced since it was read; not writing"};
  }
  if (!size_fits(*snap.layout, st.st_size)) {
    return Error{snap.source + ": size changed to " + std::to_string(st.st_size) +
                 " bytes since it was read; not writing"};
  }
  return StateWriter(std::move(fd), snap.source, snap.layout);
}

Result<void> StateWriter::write_at(size_t offset, const void* data, size_t len) {
  // A write past the end would grow a truncated file back with a hole: check
  // the size right before each write.
  struct stat st {};
  if (::fstat(fd_.get(), &st) != 0) return Error::from_errno(path_ + ": cannot stat");
  if (!size_fits(*layout_, st.st_size)) {
    return Error{path_ + ": truncated to " + std::to_string(st.st_size) + " bytes; not writing"};
  }
  for (;;) {
    ssize_t n = ::pwrite(fd_.get(), data, len, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::from_errno(path_ + ": write failed");
    if (static_cast<size_t>(n) != len) return Error{path_ + ": short write"};
    return {};
  }
}

Result<void> StateWriter::check_slot(int slot, int dev) const {
  if (slot < 0 || slot >= region::kMaxProcesses || dev < 0 || dev >= region::kMaxDevices) {
    return Error{path_ + ": slot " + std::to_string(slot) + " device " + std::to_string(dev) +
                 " out of range"};
  }
  return {};
}

Result<void> StateWriter::set_host_pid(int slot, int32_t pid) {
  if (auto ok = check_slot(slot, 0); !ok) return ok;
  const size_t base = layout_->procs + layout_->slot.size * static_cast<size_t>(slot);
  return write_at(base + layout_->slot.hostpid, &pid, sizeof pid);
}

Result<void> StateWriter::set_slot_sample(int slot, int dev, uint64_t nvml_used, uint64_t sm_util) {
  if (auto ok = check_slot(slot, dev); !ok) return ok;
  const region::SlotOffsets& so = layout_->slot;
  const size_t base = layout_->procs + so.size * static_cast<size_t>(slot);
  if (auto ok = write_at(base + so.monitorused + 8 * static_cast<size_t>(dev), &nvml_used, 8); !ok)
    return ok;
  // The oldest layout has no utilisation array.
  if (!so.device_util) return {};
  return write_at(base + *so.device_util + so.util_stride * static_cast<size_t>(dev) + 16, &sm_util,
                  8);
}

Result<bool> StateWriter::update_recent_kernel(int32_t expected, int32_t value) {
  int32_t now = 0;
  for (;;) {
    ssize_t n = ::pread(fd_.get(), &now, sizeof now, static_cast<off_t>(layout_->recent_kernel));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::from_errno(path_ + ": read failed");
    if (n != static_cast<ssize_t>(sizeof now)) return Error{path_ + ": truncated; not writing"};
    break;
  }
  if (now != expected) return false;
  if (auto ok = write_at(layout_->recent_kernel, &value, sizeof value); !ok) return ok.error();
  return true;
}

Result<void> StateWriter::set_utilization_switch(int32_t value) {
  return write_at(layout_->utilization_switch, &value, sizeof value);
}

}  // namespace hami::monitor
