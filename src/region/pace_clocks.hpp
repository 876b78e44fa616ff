#pragma once
// PaceClocks: the SM pacer clocks a container's processes share. A share
// (`nvidia.com/gpucores: 30`) belongs to the container, so every process of it
// charges its launches against one clock per device: the theoretical arrival
// time of libvgpu's SharePacer, in CLOCK_MONOTONIC nanoseconds. The clocks live in a small file of
// ours beside the state file
// (`<state file>.pace`), not in the state file, whose layout is upstream's and
// has no room; the node agent and the monitor only read `*.cache` files and
// never see it.
//
// The file records the boot its clocks count from (the monotonic clock starts
// again at each boot), and clocks of another boot are cleared when it is
// opened.
//
// The directory is the tenant's, so the file is too: a tenant can break it or
// put another in its place, to split its processes onto clocks of their own
// (each then taking the whole share). So a file of the wrong size, another
// format, a link or a directory is replaced, atomically, by a fresh one; and
// refresh(), called once a second, maps whatever file now has the name in
// place of the old one (at the same address, so a clock pointer stays
// valid): within a second every process of the container paces on one clock
// again. Only when no file can be made at all is open() an error.
//
//   auto clocks = hami::region::PaceClocks::open(state_path + ".pace");
//   if (!clocks) log(clocks.error().message);  // each process then paces itself
//   else opt.shared_clock = clocks->clock(dev);

#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "common/result.hpp"
#include "region/layout_v1.hpp"

namespace hami::region {

// "HAMIPACE" little-endian.
inline constexpr uint64_t kPaceMagic = 0x45434150494D4148ull;
inline constexpr uint32_t kPaceVersion = 1;
inline constexpr size_t kBootIdSize = 40;

// Each clock on its own cache line: processes pacing different GPUs of one
// container do not slow each other's compare-and-swap.
struct alignas(64) PaceClock {
  int64_t tat_ns;
  int64_t reserved_ns;  // kept 0 (an earlier library kept a claim here)
  // libvgpu's DutyGate: the collectives launched on this GPU (kernels whose
  // ranks on the container's other GPUs wait for each other), counted from
  // when a process began pacing it after a second with none.
  int64_t collectives;
  int64_t reserved_gate[3];  // kept 0
  unsigned char pad[16];
};

// How far ahead of now a clock may run before launches wait: libvgpu's
// default burst (LimiterOptions::burst_ns), for readers of the file.
inline constexpr int64_t kPaceBurstNs = 20'000'000;

struct PaceClockFile {
  uint64_t magic;             // kPaceMagic once initialised (written last)
  uint32_t version;           // kPaceVersion
  uint32_t devices;           // kMaxDevices
  char boot_id[kBootIdSize];  // /proc/sys/kernel/random/boot_id of the clocks' boot
  uint64_t reserved;
  PaceClock clocks[kMaxDevices];
};
inline constexpr size_t kPaceFileSize = 1088;
static_assert(sizeof(PaceClockFile) == kPaceFileSize);

// What an existing file's header says, judged without touching it.
enum class PaceHeader {
  kFresh,      // empty, or never finished by its creator: initialise it
  kOtherBoot,  // ours, written in another boot: clear its clocks
  kCurrent,    // ours, this boot: use it as it is
};
// `head` is the file's first bytes (at least the header when the size is
// right), `file_size` its size. An error says what is wrong with the file.
Result<PaceHeader> judge_pace_header(std::span<const std::byte> head, uint64_t file_size,
                                     std::string_view boot_id, const std::string& path);

// This boot's id (36 characters), or "" when the kernel does not say.
std::string current_boot_id();
// Now on the clock the pace clocks count (CLOCK_MONOTONIC, ns).
int64_t pace_clock_now_ns();

// What a .pace file holds, read without changing it (for `vgpu inspect`).
struct PaceSnapshot {
  bool this_boot = false;  // false: its clocks count another boot, and mean nothing now
  std::array<int64_t, kMaxDevices> tat_ns{};
};
// std::nullopt when there is no such file (no process has paced yet);
// an error when it cannot be read or is not a well-formed pace clock file.
Result<std::optional<PaceSnapshot>> read_pace_clocks(const std::string& path);

class PaceClocks {
 public:
  // Opens or creates the file (created with `mode` exactly, whatever the
  // umask), replacing one that is not a well-formed pace clock file.
  static Result<PaceClocks> open(const std::string& path, mode_t mode = 0666,
                                 std::chrono::milliseconds lock_timeout = std::chrono::seconds(5));

  // When the name no longer refers to the mapped file (replaced, removed,
  // truncated, broken), maps the file it names now (repaired or made afresh)
  // over the old one; true if it did. An error keeps the old mapping.
  Result<bool> refresh();

  PaceClocks(PaceClocks&& other) noexcept;
  PaceClocks& operator=(PaceClocks&& other) noexcept;
  PaceClocks(const PaceClocks&) = delete;
  PaceClocks& operator=(const PaceClocks&) = delete;
  ~PaceClocks();

  // Device `dev`'s clock, for std::atomic_ref; valid while this object lives.
  int64_t* clock(int dev) noexcept { return &file_->clocks[dev].tat_ns; }
  // Its four DutyGate window counts, the same way.
  int64_t* collectives(int dev) noexcept { return &file_->clocks[dev].collectives; }
  const std::string& path() const noexcept { return path_; }

 private:
  struct Opened;
  static Result<Opened> open_file(const std::string& path, mode_t mode,
                                  std::chrono::milliseconds lock_timeout, void* at);
  // open_file, and when what has the name is not a pace clock file, a fresh
  // one put in its place and opened.
  static Result<Opened> open_or_replace(const std::string& path, mode_t mode,
                                        std::chrono::milliseconds lock_timeout, void* at);
  PaceClocks(std::string path, PaceClockFile* file, dev_t dev, ino_t ino, mode_t mode)
      : path_(std::move(path)), file_(file), dev_(dev), ino_(ino), mode_(mode) {}
  std::string path_;
  PaceClockFile* file_ = nullptr;
  dev_t dev_ = 0;  // the mapped file
  ino_t ino_ = 0;
  mode_t mode_ = 0666;
};

}  // namespace hami::region
