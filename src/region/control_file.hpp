#pragma once
// The container's control file: what the node agent decides for a container
// (is its SM share enforced now under the default policy, is it held for a
// higher-priority container) on a channel the container can only read. The
// device plugin creates it on the host at <hook>/vgpu/control/<podUID>_<name>
// and mounts it read-only at /etc/vgpu/control; the node agent rewrites its
// fields in place (pwrite, never a new file, so the container's mapping sees
// every change); libvgpu.so maps it read-only and reads a field per launch.
//
// Upstream's state file carries the same two facts (utilization_switch,
// recent_kernel = -1), but every process of the container can write it, so a
// tenant could switch its own share off. The state file's fields are still
// written for upstream's library and used where no control file exists
// (standalone, or a container started by another device plugin).
//
//   Layout (64 bytes, little-endian):
//     0  u64 magic "HAMICTL1"     8 u32 version (1)   12 u32 size (64)
//    16  i32 utilization_switch  20 i32 blocked       24 u64 updated (unix s)
//    32  reserved (32 bytes, zero)
//
//   auto view = hami::region::ControlView::open("/etc/vgpu/control");
//   if (view) enforce = view->utilization_switch() != 0;
//   hami::region::write_control(host_path, {.utilization_switch = 1, .blocked = 0});

#include <atomic>
#include <cstdint>
#include <string>

#include "common/result.hpp"

namespace hami::region {

inline constexpr uint64_t kControlMagic = 0x314C5443494D4148ull;  // "HAMICTL1"
inline constexpr uint32_t kControlVersion = 1;

struct ControlLayout {
  uint64_t magic;
  uint32_t version;
  uint32_t size;
  int32_t utilization_switch;  // 1: enforce the SM share under the default policy
  int32_t blocked;             // 1: a higher-priority container is busy on one of its GPUs
  uint64_t updated;            // unix seconds of the agent's last write (0: the plugin's)
  uint64_t reserved[4];
};
inline constexpr size_t kControlFileSize = 64;
static_assert(sizeof(ControlLayout) == kControlFileSize);

struct ControlState {
  int32_t utilization_switch = 1;  // enforce until the agent says otherwise, as upstream
  int32_t blocked = 0;
};

// The bytes of a fresh control file (the device plugin writes these).
std::string control_file_bytes(const ControlState& state = {});

// Parses and checks 64 bytes of a control file.
Result<ControlState> parse_control(const void* data, size_t size, const std::string& path);

// A control file mapped read-only (libvgpu.so). Fields are read with atomic
// loads: the agent rewrites them while the container runs.
class ControlView {
 public:
  // Opens without following a symbolic link; refuses anything but a regular
  // file of 64 bytes with our magic and version.
  static Result<ControlView> open(const std::string& path);
  // A view whose fields never change: the fail-safe answer when a control file
  // exists but cannot be used (the share stays enforced).
  static ControlView fixed(const ControlState& state);

  ControlView(ControlView&& other) noexcept;
  ControlView& operator=(ControlView&& other) noexcept;
  ControlView(const ControlView&) = delete;
  ControlView& operator=(const ControlView&) = delete;
  ~ControlView();

  int32_t utilization_switch() const noexcept {
    return std::atomic_ref<int32_t>(layout_->utilization_switch).load(std::memory_order_relaxed);
  }
  bool blocked() const noexcept {
    return std::atomic_ref<int32_t>(layout_->blocked).load(std::memory_order_relaxed) != 0;
  }
  const std::string& path() const noexcept { return path_; }

 private:
  ControlView(std::string path, ControlLayout* layout, bool mapped)
      : path_(std::move(path)), layout_(layout), mapped_(mapped) {}
  std::string path_;
  ControlLayout* layout_ = nullptr;
  bool mapped_ = false;
};

// The node agent's write: both fields in place, if the file at `path` is a
// regular file (not a link) owned by root or by us, not writable by others,
// and well-formed. An error leaves the file as it was.
Result<void> write_control(const std::string& path, const ControlState& state);
// The same, writing only when a field differs from `state`; true if it wrote.
Result<bool> update_control(const std::string& path, const ControlState& state);

}  // namespace hami::region
