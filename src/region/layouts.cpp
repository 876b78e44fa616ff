#include "region/layouts.hpp"

#include <array>
#include <cstdio>
#include <cstring>

#include "region/layout_v1.hpp"

namespace hami::region {
namespace {

// The two pre-version eras share a header: flag@0, sm_init_flag@4, owner_pid@8,
// sem@16 (32 bytes), device_num@48, uuids@56, limit@1592, sm_limit@1720,
// procs@1848; the tail after the slots is proc_num, utilization_switch,
// recent_kernel, priority (i32 each); tests/region/layout_test.cpp pins the sizes.
constexpr Layout make_unversioned(LayoutId id, std::string_view name, std::string_view desc,
                                  size_t slot_size, std::optional<size_t> util) {
  const size_t procs = 1848;
  const size_t tail = procs + slot_size * kMaxProcesses;
  return Layout{
      .id = id,
      .name = name,
      .description = desc,
      .region_size = tail + 16,
      .versioned = false,
      .owner_pid = 8,
      .device_num = 48,
      .uuids = 56,
      .limit = 1592,
      .sm_limit = 1720,
      .procs = procs,
      .proc_num = tail,
      .utilization_switch = tail + 4,
      .recent_kernel = tail + 8,
      .priority = tail + 12,
      .last_kernel_time = std::nullopt,
      .slot =
          SlotOffsets{
              .size = slot_size,
              .pid = 0,
              .hostpid = 4,
              .used = 8,
              .used_stride = 40,
              .monitorused = 8 + 40 * kMaxDevices,
              .device_util = util,
              .util_stride = 24,
              .status = slot_size - 8,
              .owner_start_time = std::nullopt,
              .owner_tag = std::nullopt,
          },
  };
}

// v1 is derived from the structs themselves so descriptor and struct cannot drift.
constexpr Layout make_v1() {
  return Layout{
      .id = LayoutId::kV1,
      .name = "v1",
      .description = "HAMi-core 1.1/1.2 (Aug 2024 onwards, current)",
      .region_size = sizeof(SharedRegion),
      .versioned = true,
      .owner_pid = offsetof(SharedRegion, owner_pid),
      .device_num = offsetof(SharedRegion, device_num),
      .uuids = offsetof(SharedRegion, uuids),
      .limit = offsetof(SharedRegion, limit),
      .sm_limit = offsetof(SharedRegion, sm_limit),
      .procs = offsetof(SharedRegion, procs),
      .proc_num = offsetof(SharedRegion, proc_num),
      .utilization_switch = offsetof(SharedRegion, utilization_switch),
      .recent_kernel = offsetof(SharedRegion, recent_kernel),
      .priority = offsetof(SharedRegion, priority),
      .last_kernel_time = offsetof(SharedRegion, last_kernel_time),
      .slot =
          SlotOffsets{
              .size = sizeof(ProcSlot),
              .pid = offsetof(ProcSlot, pid),
              .hostpid = offsetof(ProcSlot, hostpid),
              .used = offsetof(ProcSlot, used),
              .used_stride = sizeof(DeviceMemory),
              .monitorused = offsetof(ProcSlot, monitorused),
              .device_util = offsetof(ProcSlot, device_util),
              .util_stride = sizeof(DeviceUtil),
              .status = offsetof(ProcSlot, status),
              .owner_start_time = offsetof(ProcSlot, owner_start_time),
              .owner_tag = offsetof(ProcSlot, owner_tag),
          },
  };
}

// 1.1 as merged 2026-03-24: sem_postinit (32 bytes) inserted after sem, so the
// header moves by 32; seqlock (8) inserted after hostpid, so slot fields move by 8
// and the slot's padding shrinks to unused[2]. Read-only: no writer of ours
// should ever add slots to a file an incompatible upstream build also writes.
// (Spelled out rather than edited from make_v1(): clang 14 cannot copy a
// disengaged std::optional in a constant expression.)
constexpr Layout make_v1_atomics() {
  constexpr size_t procs = 1888;
  constexpr size_t tail = procs + sizeof(ProcSlot) * kMaxProcesses;
  return Layout{
      .id = LayoutId::kV1Atomics,
      .name = "v1.1-atomics",
      .description =
          "HAMi-core 1.1 with atomics (Mar-Apr 2026, layout changed without a version bump)",
      .region_size = 2008984,
      .versioned = true,
      .owner_pid = 16,
      .device_num = 88,
      .uuids = 96,
      .limit = 1632,
      .sm_limit = 1760,
      .procs = procs,
      .proc_num = tail,
      .utilization_switch = tail + 4,
      .recent_kernel = tail + 8,
      .priority = tail + 12,
      .last_kernel_time = tail + 16,
      .slot =
          SlotOffsets{
              .size = sizeof(ProcSlot),
              .pid = 0,
              .hostpid = 4,
              .used = 16,
              .used_stride = sizeof(DeviceMemory),
              .monitorused = 16 + 64 * kMaxDevices,
              .device_util = size_t{16 + 64 * kMaxDevices + 8 * kMaxDevices},
              .util_stride = sizeof(DeviceUtil),
              .status = 1936,
              .owner_start_time = std::nullopt,
              .owner_tag = std::nullopt,
          },
  };
}

constexpr std::array<Layout, 4> kLayouts = {
    make_unversioned(LayoutId::kInitial2024, "initial-2024",
                     "HAMi-core initial import (Jan 2024, no version fields)", 784, std::nullopt),
    make_unversioned(LayoutId::kV0, "v0", "HAMi-core Apr-Aug 2024 (no version fields)", 1168,
                     size_t{8 + 40 * kMaxDevices + 8 * kMaxDevices}),
    make_v1(),
    make_v1_atomics(),
};

static_assert(kLayouts[0].region_size == 804680);
static_assert(kLayouts[1].region_size == 1197896);
static_assert(kLayouts[2].region_size == 2008952);
static_assert(kLayouts[3].region_size == 2008984);

template <class T>
T load(std::span<const std::byte> bytes, size_t off) {
  T v{};
  std::memcpy(&v, bytes.data() + off, sizeof v);
  return v;
}

bool size_matches(const Layout& l, uint64_t size) {
  return size == l.region_size || size == l.region_size + 1;
}

std::string known_sizes() {
  std::string s;
  for (const Layout& l : kLayouts) {
    if (!s.empty()) s += ", ";
    s += std::to_string(l.region_size) + " (" + std::string(l.name) + ")";
  }
  return s + "; upstream files are one byte longer";
}

Error fail(std::string_view name, const std::string& what) {
  return Error{std::string(name) + ": " + what};
}

}  // namespace

std::span<const Layout> known_layouts() {
  return kLayouts;
}

const Layout& layout(LayoutId id) {
  for (const Layout& l : kLayouts) {
    if (l.id == id) return l;
  }
  return kLayouts[2];  // unreachable: every LayoutId has an entry
}

Result<DetectedLayout> detect_layout(std::span<const std::byte> head, uint64_t file_size,
                                     std::string_view name) {
  const uint64_t smallest = kLayouts.front().region_size;
  if (file_size < smallest || head.size() < kHeaderProbeSize) {
    return fail(name, "file is " + std::to_string(file_size) +
                          " bytes, too short for a HAMi state file (the smallest known layout is " +
                          std::to_string(smallest) + " bytes)");
  }
  const auto magic = load<int32_t>(head, 0);
  if (magic == 0) {
    return fail(name,
                "file is not initialised (magic is 0): its creator died before finishing or "
                "it is not a HAMi state file");
  }
  if (magic != kMagic) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%08X", static_cast<uint32_t>(magic));
    return fail(name, std::string("wrong magic ") + hex + " (expected " + std::to_string(kMagic) +
                          "): not a HAMi state file");
  }

  DetectedLayout d;
  for (const Layout& l : kLayouts) {
    if (!l.versioned && size_matches(l, file_size)) {
      d.layout = &l;
      return d;
    }
  }

  d.major = load<uint32_t>(head, 4);
  d.minor = load<uint32_t>(head, 8);
  const std::string version = std::to_string(d.major) + "." + std::to_string(d.minor);
  if (d.major > kMajorVersion) {
    return fail(name, "format version " + version +
                          " is newer than this build understands (major " +
                          std::to_string(kMajorVersion) + "); upgrade vgpu to read it");
  }
  if (d.major == kMajorVersion && size_matches(layout(LayoutId::kV1), file_size)) {
    d.layout = &layout(LayoutId::kV1);
    d.writable = d.minor == 1 || d.minor == 2;
    if (d.minor > kMinorVersion) {
      d.warnings.push_back("format version " + version +
                           " is newer than this build (1.2); read with the 1.2 layout, which "
                           "may misread fields added since");
    } else if (d.minor == 0) {
      d.warnings.push_back(
          "format version 1.0 was never released upstream; read with the 1.2 "
          "layout");
    }
    return d;
  }
  if (d.major == kMajorVersion && d.minor == 1 &&
      size_matches(layout(LayoutId::kV1Atomics), file_size)) {
    d.layout = &layout(LayoutId::kV1Atomics);
    return d;
  }
  return fail(name, "size " + std::to_string(file_size) + " bytes with format version " + version +
                        " matches no known layout (known sizes: " + known_sizes() + ")");
}

}  // namespace hami::region
