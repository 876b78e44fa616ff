// Every size and offset of upstream HAMi-core's v1.2 layout (x86-64),
// checked on the struct we map and on the descriptor readers use.
#include <gtest/gtest.h>

#include <cstddef>

#include "region/layout_v1.hpp"
#include "region/layouts.hpp"

namespace hami::region {
namespace {

TEST(LayoutV12, TypeSizes) {
  EXPECT_EQ(sizeof(DeviceMemory), 64u);
  EXPECT_EQ(sizeof(DeviceUtil), 48u);
  EXPECT_EQ(sizeof(ProcSlot), 1960u);
  EXPECT_EQ(sizeof(SharedRegion), 2008952u);
  EXPECT_EQ(kFileSize, 2008953u);
  EXPECT_EQ(sizeof(SemaphoreStorage), 32u);
  EXPECT_EQ(kMagic, 19920718);
  EXPECT_EQ(kMaxDevices, 16);
  EXPECT_EQ(kMaxProcesses, 1024);
  EXPECT_EQ(kUuidSize, 96u);
}

TEST(LayoutV12, DeviceMemoryOffsets) {
  EXPECT_EQ(offsetof(DeviceMemory, context_size), 0u);
  EXPECT_EQ(offsetof(DeviceMemory, module_size), 8u);
  EXPECT_EQ(offsetof(DeviceMemory, data_size), 16u);
  EXPECT_EQ(offsetof(DeviceMemory, offset), 24u);
  EXPECT_EQ(offsetof(DeviceMemory, total), 32u);
  // Upstream's unused[3]: our spilled bytes, two left.
  EXPECT_EQ(offsetof(DeviceMemory, spilled_size), 40u);
  EXPECT_EQ(offsetof(DeviceMemory, unused), 48u);
}

TEST(LayoutV12, DeviceUtilOffsets) {
  EXPECT_EQ(offsetof(DeviceUtil, dec_util), 0u);
  EXPECT_EQ(offsetof(DeviceUtil, enc_util), 8u);
  EXPECT_EQ(offsetof(DeviceUtil, sm_util), 16u);
  // Upstream's unused[3]: our GPU time counter and its tag, one left.
  EXPECT_EQ(offsetof(DeviceUtil, gpu_time_ns), 24u);
  EXPECT_EQ(offsetof(DeviceUtil, gpu_time_tag), 32u);
  EXPECT_EQ(offsetof(DeviceUtil, unused), 40u);
}

TEST(LayoutV12, SlotOffsets) {
  EXPECT_EQ(offsetof(ProcSlot, pid), 0u);
  EXPECT_EQ(offsetof(ProcSlot, hostpid), 4u);
  EXPECT_EQ(offsetof(ProcSlot, used), 8u);
  for (size_t d = 0; d < 16; ++d) {
    EXPECT_EQ(offsetof(ProcSlot, used) + sizeof(DeviceMemory) * d, 8 + 64 * d);
    EXPECT_EQ(offsetof(ProcSlot, used) + sizeof(DeviceMemory) * d + offsetof(DeviceMemory, total),
              40 + 64 * d);
    EXPECT_EQ(offsetof(ProcSlot, monitorused) + 8 * d, 1032 + 8 * d);
    EXPECT_EQ(
        offsetof(ProcSlot, device_util) + sizeof(DeviceUtil) * d + offsetof(DeviceUtil, sm_util),
        1176 + 48 * d);
  }
  EXPECT_EQ(offsetof(ProcSlot, monitorused), 1032u);
  EXPECT_EQ(offsetof(ProcSlot, device_util), 1160u);
  EXPECT_EQ(offsetof(ProcSlot, status), 1928u);
  EXPECT_EQ(offsetof(ProcSlot, seqlock), 1936u);
  // Upstream's unused[2] at 1944: our owner fields live exactly there.
  EXPECT_EQ(offsetof(ProcSlot, owner_start_time), 1944u);
  EXPECT_EQ(offsetof(ProcSlot, owner_tag), 1952u);
}

TEST(LayoutV12, RegionOffsets) {
  EXPECT_EQ(offsetof(SharedRegion, initialized_flag), 0u);
  EXPECT_EQ(offsetof(SharedRegion, major_version), 4u);
  EXPECT_EQ(offsetof(SharedRegion, minor_version), 8u);
  EXPECT_EQ(offsetof(SharedRegion, sm_init_flag), 12u);
  EXPECT_EQ(offsetof(SharedRegion, owner_pid), 16u);
  EXPECT_EQ(offsetof(SharedRegion, sem), 24u);
  EXPECT_EQ(offsetof(SharedRegion, device_num), 56u);
  EXPECT_EQ(offsetof(SharedRegion, uuids), 64u);
  EXPECT_EQ(offsetof(SharedRegion, limit), 1600u);
  EXPECT_EQ(offsetof(SharedRegion, sm_limit), 1728u);
  EXPECT_EQ(offsetof(SharedRegion, procs), 1856u);
  for (size_t i : {size_t{0}, size_t{1}, size_t{511}, size_t{1023}}) {
    EXPECT_EQ(offsetof(SharedRegion, procs) + sizeof(ProcSlot) * i, 1856 + 1960 * i);
  }
  EXPECT_EQ(offsetof(SharedRegion, proc_num), 2008896u);
  EXPECT_EQ(offsetof(SharedRegion, utilization_switch), 2008900u);
  EXPECT_EQ(offsetof(SharedRegion, recent_kernel), 2008904u);
  EXPECT_EQ(offsetof(SharedRegion, priority), 2008908u);
  EXPECT_EQ(offsetof(SharedRegion, last_kernel_time), 2008912u);
  EXPECT_EQ(offsetof(SharedRegion, sem_postinit), 2008920u);
}

TEST(LayoutDescriptors, V1MatchesStruct) {
  const Layout& l = layout(LayoutId::kV1);
  EXPECT_EQ(l.region_size, 2008952u);
  EXPECT_EQ(l.device_num, 56u);
  EXPECT_EQ(l.uuids, 64u);
  EXPECT_EQ(l.limit, 1600u);
  EXPECT_EQ(l.sm_limit, 1728u);
  EXPECT_EQ(l.procs, 1856u);
  EXPECT_EQ(l.proc_num, 2008896u);
  EXPECT_EQ(l.utilization_switch, 2008900u);
  EXPECT_EQ(l.recent_kernel, 2008904u);
  EXPECT_EQ(l.priority, 2008908u);
  EXPECT_EQ(l.last_kernel_time, 2008912u);
  EXPECT_EQ(l.slot.size, 1960u);
  EXPECT_EQ(l.slot.used, 8u);
  EXPECT_EQ(l.slot.monitorused, 1032u);
  EXPECT_EQ(l.slot.device_util, 1160u);
  EXPECT_EQ(l.slot.status, 1928u);
}

// Older eras of upstream's layout: sizes and the offsets that move.
TEST(LayoutDescriptors, OlderEras) {
  const Layout& initial = layout(LayoutId::kInitial2024);
  EXPECT_EQ(initial.region_size, 804680u);
  EXPECT_EQ(initial.slot.size, 784u);
  EXPECT_EQ(initial.slot.used_stride, 40u);
  EXPECT_FALSE(initial.slot.device_util.has_value());
  EXPECT_EQ(initial.slot.status, 776u);
  EXPECT_FALSE(initial.versioned);

  const Layout& v0 = layout(LayoutId::kV0);
  EXPECT_EQ(v0.region_size, 1197896u);
  EXPECT_EQ(v0.slot.size, 1168u);
  EXPECT_EQ(v0.slot.device_util, 776u);
  EXPECT_EQ(v0.slot.util_stride, 24u);
  EXPECT_EQ(v0.slot.status, 1160u);
  EXPECT_EQ(v0.procs, 1848u);
  EXPECT_FALSE(v0.last_kernel_time.has_value());

  const Layout& atomics = layout(LayoutId::kV1Atomics);
  EXPECT_EQ(atomics.region_size, 2008984u);
  EXPECT_EQ(atomics.device_num, 88u);
  EXPECT_EQ(atomics.limit, 1632u);
  EXPECT_EQ(atomics.procs, 1888u);
  EXPECT_EQ(atomics.slot.used, 16u);
  EXPECT_EQ(atomics.slot.status, 1936u);
}

}  // namespace
}  // namespace hami::region
