#pragma once
// StateWriter: the node agent's only way to write into a container's state
// file, and only the fields the agent owns by contract (upstream's monitor
// writes the same ones): each slot's hostpid, the per-device NVML memory
// (monitorused) and SM utilisation, and the container's recent_kernel and
// utilization_switch. Writes go through pwrite on a descriptor opened for that
// file, never through a mapping: a tenant that truncates its own file must not
// SIGBUS the agent. Before writing, the writer checks that the path still names
// the file that was read (same inode) and that its size still matches the
// layout, so a file replaced, truncated or half-written meanwhile is left alone.
//
//   auto snap = hami::region::read_snapshot(path);
//   auto w = hami::monitor::StateWriter::open(*snap);
//   if (!w) { log(w.error().message); return; }
//   w->set_host_pid(slot.index, 31337);
//   w->update_recent_kernel(/*expected=*/2, /*value=*/1);

#include <cstdint>
#include <string>

#include "common/result.hpp"
#include "common/unique_fd.hpp"
#include "region/snapshot.hpp"

namespace hami::monitor {

class StateWriter {
 public:
  static Result<StateWriter> open(const region::RegionSnapshot& snapshot);

  Result<void> set_host_pid(int slot, int32_t pid);
  // NVML's per-process device memory and SM utilisation (percent) of one device.
  Result<void> set_slot_sample(int slot, int dev, uint64_t nvml_used, uint64_t sm_util);
  // Writes recent_kernel only while it still holds `expected`: the library sets
  // it on every launch, and a launch between our read and this write must win.
  // Returns whether it wrote. (pread then pwrite: the window is a few
  // microseconds, and losing it costs one observation period, as upstream.)
  Result<bool> update_recent_kernel(int32_t expected, int32_t value);
  Result<void> set_utilization_switch(int32_t value);

  const std::string& path() const { return path_; }

 private:
  StateWriter(UniqueFd fd, std::string path, const region::Layout* layout)
      : fd_(std::move(fd)), path_(std::move(path)), layout_(layout) {}
  Result<void> write_at(size_t offset, const void* data, size_t len);
  Result<void> check_slot(int slot, int dev) const;

  UniqueFd fd_;
  std::string path_;
  const region::Layout* layout_;
};

}  // namespace hami::monitor
