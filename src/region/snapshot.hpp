#pragma once
// A plain, self-contained copy of a state file's contents in any known layout,
// for readers that must never crash or write: `vgpu inspect`, the node agent's
// scans, tools. parse_region() is a pure function over bytes (the fuzz target
// drives it); read_snapshot() copies a file with pread (never mmap, so a file
// truncated under us cannot SIGBUS the reader) and then asks the kernel which
// slot owners are still alive.
//
//   auto snap = hami::region::read_snapshot("/usr/local/vgpu/x.cache");
//   if (!snap) { std::cerr << snap.error().message << "\n"; return 3; }
//   for (const auto& s : snap->slots) std::cout << s.pid << "\n";

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"
#include "region/layout_v1.hpp"
#include "region/layouts.hpp"

namespace hami::region {

struct DeviceMemoryUsage {
  uint64_t context = 0;
  uint64_t module = 0;
  uint64_t data = 0;
  uint64_t offset = 0;
  uint64_t total = 0;
  // Of data, the bytes in host memory (CUDA_OVERSUBSCRIBE); 0 where the layout has no room.
  uint64_t spilled = 0;
};

// What the file says about whether a slot's owner lives.
enum class Liveness {
  kUnknown,  // written by upstream HAMi-core (no liveness lock) or not probed
  kAlive,    // our owner tag, and its liveness lock is held
  kDead,     // our owner tag, lock free: the owner died without releasing the slot
};

struct SlotSnapshot {
  int index = 0;
  int32_t pid = 0;
  int32_t host_pid = 0;
  int32_t status = 0;
  bool owner_tagged = false;  // claimed through our lock protocol
  uint64_t owner_start_time = 0;
  std::array<DeviceMemoryUsage, kMaxDevices> used{};
  std::array<uint64_t, kMaxDevices> nvml_used{};
  std::array<uint64_t, kMaxDevices> sm_util{};
  // GPU time libvgpu charged the process per device (nullopt: none published).
  std::array<std::optional<uint64_t>, kMaxDevices> gpu_time_ns{};
  Liveness liveness = Liveness::kUnknown;
};

struct RegionSnapshot {
  std::string source;
  uint64_t file_size = 0;
  // The file read (read_snapshot only; 0 from parse_region), so a writer can
  // tell that the path still names the same file.
  uint64_t file_device = 0;
  uint64_t file_inode = 0;
  const Layout* layout = nullptr;
  uint32_t major = 0;  // 0.0 for unversioned eras
  uint32_t minor = 0;
  bool writable = false;
  uint64_t device_num = 0;
  std::array<std::string, kMaxDevices> uuids;  // printable ASCII only
  std::array<uint64_t, kMaxDevices> memory_limit{};
  std::array<uint64_t, kMaxDevices> sm_limit{};
  int32_t proc_num_raw = 0;
  int proc_num = 0;  // clamped to [0, kMaxProcesses]
  int32_t utilization_switch = 0;
  int32_t recent_kernel = 0;
  int32_t priority = 0;
  std::optional<uint64_t> last_kernel_time;
  // Slots in [0, proc_num) that hold anything: an owner, a status or usage.
  std::vector<SlotSnapshot> slots;
  std::vector<std::string> warnings;

  // Devices worth showing: [0, device_num) plus any other index with usage.
  int device_rows() const;
  // Sum of used[dev].total over occupied slots (status != 0), as HAMi's monitor sums.
  uint64_t device_used(int dev) const;
};

// `name` is used in error messages only.
Result<RegionSnapshot> parse_region(std::span<const std::byte> bytes, std::string_view name);

// Largest file read_snapshot will read; anything bigger matches no layout anyway.
inline constexpr uint64_t kMaxStateFileSize = 4ull << 20;

Result<RegionSnapshot> read_snapshot(const std::string& path);

// Fills SlotSnapshot::liveness for tagged slots from the locks on `fd`.
void probe_liveness(int fd, RegionSnapshot& snapshot);

std::string_view status_name(int32_t status);
std::string_view liveness_name(Liveness l);

}  // namespace hami::region
