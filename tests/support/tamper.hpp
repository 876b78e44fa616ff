#pragma once
// The attacker's side of the hostile-tenant tests: rewrites fields of a state
// file with pwrite at upstream's v1 offsets, as a process inside the container
// can (the file is mode 0666 in a directory the container writes), without
// going through region::Region and its rules.
//
//   test::poke(path, offsetof(region::SharedRegion, proc_num), int32_t{0});
//   test::poke(path, test::slot_field(slot, offsetof(region::ProcSlot, used)), zero_usage);

#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <string>

#include "region/layout_v1.hpp"

namespace hami::test {

// Writes `value` at byte `offset` of `path`; false if the write failed.
template <class T>
bool poke(const std::string& path, size_t offset, const T& value) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::pwrite(fd, &value, sizeof value, static_cast<off_t>(offset)) ==
                  static_cast<ssize_t>(sizeof value);
  ::close(fd);
  return ok;
}

// File offset of a field of process slot `slot`.
inline size_t slot_field(int slot, size_t field_offset) {
  return offsetof(region::SharedRegion, procs) +
         sizeof(region::ProcSlot) * static_cast<size_t>(slot) + field_offset;
}

// File offset of slot `slot`'s usage on device `dev`.
inline size_t slot_usage(int slot, int dev) {
  return slot_field(slot, offsetof(region::ProcSlot, used) +
                              sizeof(region::DeviceMemory) * static_cast<size_t>(dev));
}

}  // namespace hami::test
