#pragma once
// Every state-file layout upstream HAMi-core has shipped, described as field
// offsets, and the rule that tells them apart from a file's size and header
// (docs/state-file.md). Readers (vgpu inspect, the node agent) use the
// descriptors to read any era; only the v1 layout (1.1 and 1.2 share it) is ever
// written. Detection never guesses: a size/version pair that two eras could
// share is refused with a reason.
//
//   auto d = hami::region::detect_layout(header_bytes, file_size, path);
//   if (!d) std::cerr << d.error().message << "\n";
//   else if (d->writable) ...

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace hami::region {

enum class LayoutId {
  kInitial2024,  // 8b7cd78, Jan 2024: no version fields, no utilisation
  kV0,           // 7a9c88b, Apr 2024: adds per-device utilisation (HAMi Go "v0")
  kV1,           // 1.1 (9b46404) and 1.2 (b69b1ea, HEAD): the layout of layout_v1.hpp
  kV1Atomics,    // 1.1 as shipped Mar-Apr 2026: seqlock and sem_postinit inserted
};

// Offsets inside one process slot. DeviceMemory entries are context, module,
// data, offset, total (u64 each) in every era; sm_util is the third u64 of a
// utilisation entry.
struct SlotOffsets {
  size_t size;
  size_t pid;
  size_t hostpid;
  size_t used;
  size_t used_stride;
  size_t monitorused;
  std::optional<size_t> device_util;
  size_t util_stride;
  size_t status;
  std::optional<size_t> owner_start_time;  // ours, v1 only
  std::optional<size_t> owner_tag;         // ours, v1 only
};

struct Layout {
  LayoutId id;
  std::string_view name;         // short, for output: "v1", "v0", ...
  std::string_view description;  // which upstream era wrote it
  size_t region_size;            // sizeof(shared_region_t); files are this or one byte more
  bool versioned;                // has major/minor at offsets 4/8
  size_t owner_pid;
  size_t device_num;
  size_t uuids;
  size_t limit;
  size_t sm_limit;
  size_t procs;
  size_t proc_num;
  size_t utilization_switch;
  size_t recent_kernel;
  size_t priority;
  std::optional<size_t> last_kernel_time;
  SlotOffsets slot;
};

// All known layouts, smallest first.
std::span<const Layout> known_layouts();
const Layout& layout(LayoutId id);

struct DetectedLayout {
  const Layout* layout = nullptr;
  uint32_t major = 0;  // 0 for unversioned eras
  uint32_t minor = 0;
  bool writable = false;  // we may attach it read-write (v1 layout, minor 1 or 2)
  std::vector<std::string> warnings;
};

// Bytes needed by detect_layout from the start of the file.
inline constexpr size_t kHeaderProbeSize = 12;

// `head` holds at least the first kHeaderProbeSize bytes when the file is that
// long (fewer is fine for short files). `name` prefixes every error message.
Result<DetectedLayout> detect_layout(std::span<const std::byte> head, uint64_t file_size,
                                     std::string_view name);

}  // namespace hami::region
