// The slot registry: ownership by (pid, start time) plus a kernel-held liveness
// lock, reclaim of dead owners, no compaction, and the typed accessors.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <optional>
#include <vector>

#include "region/region.hpp"
#include "support/temp_dir.hpp"

namespace hami::region {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

class RegistryTest : public ::testing::Test {
 protected:
  Region open() {
    auto r = Region::open(dir_.file("r.cache"));
    EXPECT_TRUE(r) << r.error().message;
    return std::move(r).value();
  }
  test::TempDir dir_;
};

// A child that registers, charges `bytes` on device 0 and dies without
// unregistering (as SIGKILL or a crash would leave it). Returns its pid.
pid_t register_and_die(const std::string& path, uint64_t bytes, int& slot_out) {
  int p[2];
  if (::pipe(p) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    auto r = Region::open(path, OpenOptions{.create = false});
    auto me = self_identity();
    int slot = -1;
    if (r && me) {
      auto s = r->register_process(*me);
      if (s) {
        slot = *s;
        r->slot(slot).add_usage(0, UsageKind::kData, bytes);
      }
    }
    (void)!::write(p[1], &slot, sizeof slot);
    _exit(0);  // no destructors: the slot stays claimed, its lock dies with us
  }
  ::close(p[1]);
  slot_out = -1;
  (void)!::read(p[0], &slot_out, sizeof slot_out);
  ::close(p[0]);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

TEST_F(RegistryTest, RegisterFillsOwnerFields) {
  Region a = open();
  auto me = self_identity();
  ASSERT_TRUE(me);
  auto slot = a.register_process(*me);
  ASSERT_TRUE(slot) << slot.error().message;
  EXPECT_EQ(*slot, 0);
  EXPECT_EQ(a.own_slot(), 0);
  SlotRef s = a.slot(0);
  EXPECT_EQ(s.pid(), me->pid);
  EXPECT_EQ(s.owner_start_time(), me->start_time);
  EXPECT_TRUE(s.owner_tagged());
  EXPECT_EQ(s.status(), kSlotRunning);
  EXPECT_EQ(s.host_pid(), 0);
  EXPECT_EQ(a.proc_num(), 1);

  Region observer = open();
  EXPECT_EQ(observer.slot_liveness(0), Liveness::kAlive);
  auto again = a.register_process(*me);
  EXPECT_FALSE(again);  // one slot per handle
}

TEST_F(RegistryTest, UnregisterReturnsUsageAndTrims) {
  Region a = open();
  Region b = open();
  ASSERT_EQ(*a.register_process({100, 1}), 0);
  ASSERT_EQ(*b.register_process({101, 1}), 1);
  b.slot(1).add_usage(0, UsageKind::kData, 64 * kMiB);
  b.slot(1).add_usage(0, UsageKind::kContext, 8 * kMiB);
  EXPECT_EQ(a.device_usage(0), 72 * kMiB);
  EXPECT_EQ(a.proc_num(), 2);
  b.unregister_process();
  EXPECT_EQ(a.device_usage(0), 0u);
  EXPECT_EQ(a.proc_num(), 1);
  EXPECT_EQ(a.slot(1).pid(), 0);
  EXPECT_FALSE(a.slot(1).owner_tagged());
}

TEST_F(RegistryTest, SlotsNeverMove) {
  Region a = open(), b = open(), c = open();
  ASSERT_EQ(*a.register_process({200, 1}), 0);
  ASSERT_EQ(*b.register_process({201, 1}), 1);
  ASSERT_EQ(*c.register_process({202, 1}), 2);
  b.unregister_process();
  auto swept = a.sweep();
  ASSERT_TRUE(swept);
  EXPECT_EQ(a.slot(0).pid(), 200);
  EXPECT_EQ(a.slot(2).pid(), 202);  // no swap-with-last: the hole stays a hole
  EXPECT_EQ(a.proc_num(), 3);
  EXPECT_EQ(c.own_slot(), 2);
  // A new registrant fills the hole.
  Region d = open();
  EXPECT_EQ(*d.register_process({203, 1}), 1);
}

TEST_F(RegistryTest, DeadOwnerIsReclaimedBySweep) {
  Region a = open();
  ASSERT_TRUE(a.register_process({300, 1}));
  int slot = -1;
  const pid_t child = register_and_die(a.path(), 100 * kMiB, slot);
  ASSERT_EQ(slot, 1);
  EXPECT_EQ(a.slot(1).pid(), child);
  EXPECT_EQ(a.slot_liveness(1), Liveness::kDead);
  EXPECT_EQ(a.device_usage(0), 100 * kMiB);  // counted until reclaimed: never looser

  auto snap = read_snapshot(a.path());
  ASSERT_TRUE(snap);
  ASSERT_EQ(snap->slots.size(), 2u);
  EXPECT_EQ(snap->slots[1].liveness, Liveness::kDead);

  auto report = a.sweep();
  ASSERT_TRUE(report);
  ASSERT_EQ(report->reclaimed.size(), 1u);
  EXPECT_EQ(report->reclaimed[0].index, 1);
  EXPECT_EQ(report->reclaimed[0].pid, child);
  EXPECT_EQ(report->reclaimed[0].bytes, 100 * kMiB);
  EXPECT_EQ(report->proc_num_before, 2);
  EXPECT_EQ(report->proc_num_after, 1);
  EXPECT_EQ(a.device_usage(0), 0u);
  EXPECT_EQ(a.slot(0).pid(), 300);  // the live owner is untouched
}

TEST_F(RegistryTest, NextRegistrationReclaimsDeadOwner) {
  const std::string path = dir_.file("r.cache");
  { Region init = open(); }
  int slot = -1;
  register_and_die(path, 50 * kMiB, slot);
  ASSERT_EQ(slot, 0);
  Region b = open();
  EXPECT_EQ(b.device_usage(0), 50 * kMiB);
  auto mine = b.register_process({400, 7});
  ASSERT_TRUE(mine);
  EXPECT_EQ(*mine, 0);
  EXPECT_EQ(b.device_usage(0), 0u);
  EXPECT_EQ(b.slot(0).pid(), 400);
  EXPECT_EQ(b.slot(0).owner_start_time(), 7u);
}

// A slot whose recorded PID now belongs to a live process (PID reuse) but whose
// owner lock is free is dead: the PID number alone never keeps a slot.
TEST_F(RegistryTest, ReusedPidIsNotMistakenForOwner) {
  Region a = open();
  ProcSlot& raw = a.raw().procs[5];
  raw.owner_tag = kOwnerTag;
  raw.pid = ::getpid();  // alive, but not the owner that claimed the slot
  raw.owner_start_time = 1;
  raw.status = kSlotRunning;
  raw.used[0].total = raw.used[0].data_size = 10 * kMiB;
  a.raw().proc_num = 6;
  EXPECT_EQ(a.slot_liveness(5), Liveness::kDead);
  auto report = a.sweep();
  ASSERT_TRUE(report);
  ASSERT_EQ(report->reclaimed.size(), 1u);
  EXPECT_EQ(report->reclaimed[0].index, 5);
  EXPECT_EQ(report->reclaimed[0].bytes, 10 * kMiB);
  EXPECT_EQ(a.proc_num(), 0);
}

// Slots written by upstream HAMi-core carry no liveness lock.
TEST_F(RegistryTest, UpstreamSlots) {
  Region a = open();
  // Exited upstream process: marked free, usage left behind for a sweep.
  ProcSlot& exited = a.raw().procs[0];
  exited.used[1].total = exited.used[1].data_size = 4 * kMiB;
  // Live upstream process (pid 1 always exists).
  ProcSlot& live = a.raw().procs[1];
  live.pid = 1;
  live.status = kSlotRunning;
  // Upstream process that died: its pid is a reaped child of ours.
  pid_t gone = ::fork();
  if (gone == 0) _exit(0);
  ::waitpid(gone, nullptr, 0);
  ProcSlot& dead = a.raw().procs[2];
  dead.pid = gone;
  dead.status = kSlotRunning;
  dead.used[0].total = 2 * kMiB;
  a.raw().proc_num = 3;

  auto plain = a.sweep();
  ASSERT_TRUE(plain);
  ASSERT_EQ(plain->reclaimed.size(), 1u);  // only the exited one: the others might live elsewhere
  EXPECT_EQ(plain->reclaimed[0].index, 0);
  EXPECT_EQ(plain->reclaimed[0].bytes, 4 * kMiB);
  EXPECT_EQ(a.slot_liveness(1), Liveness::kUnknown);

  auto same_ns = a.sweep(SweepOptions{.check_untagged_pids = true});
  ASSERT_TRUE(same_ns);
  ASSERT_EQ(same_ns->reclaimed.size(), 1u);
  EXPECT_EQ(same_ns->reclaimed[0].index, 2);
  EXPECT_EQ(a.slot(1).pid(), 1);
  EXPECT_EQ(a.proc_num(), 2);
}

TEST_F(RegistryTest, AllSlotsTaken) {
  struct rlimit lim {};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_max < kMaxProcesses + 64) GTEST_SKIP() << "needs 1088 file descriptors";
  lim.rlim_cur = lim.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &lim);
  std::vector<Region> handles;
  for (int i = 0; i < kMaxProcesses; ++i) {
    handles.push_back(open());
    auto s = handles.back().register_process({1000 + i, 1});
    ASSERT_TRUE(s) << s.error().message;
    ASSERT_EQ(*s, i);
  }
  Region extra = open();
  auto full = extra.register_process({5000, 1});
  ASSERT_FALSE(full);
  EXPECT_NE(full.error().message.find("all 1024 process slots"), std::string::npos);
  handles[700].abandon();  // dies: its slot becomes claimable
  auto s = extra.register_process({5000, 1});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(*s, 700);
}

TEST_F(RegistryTest, UsageAccessors) {
  Region a = open();
  ASSERT_TRUE(a.register_process({600, 1}));
  SlotRef s = a.slot(0);
  EXPECT_TRUE(s.add_usage(3, UsageKind::kContext, 10));
  EXPECT_TRUE(s.add_usage(3, UsageKind::kData, 5));
  EXPECT_EQ(s.usage(3).context, 10u);
  EXPECT_EQ(s.usage(3).data, 5u);
  EXPECT_EQ(s.usage(3).total, 15u);
  EXPECT_TRUE(s.sub_usage(3, UsageKind::kData, 100));  // more than charged: saturates
  EXPECT_EQ(s.usage(3).data, 0u);
  EXPECT_EQ(s.usage(3).total, 0u);
  EXPECT_EQ(s.usage(3).context, 10u);
  EXPECT_FALSE(s.add_usage(16, UsageKind::kData, 1));
  EXPECT_FALSE(s.add_usage(-1, UsageKind::kData, 1));
  EXPECT_EQ(s.usage(16).total, 0u);
  EXPECT_TRUE(s.set_nvml_used(2, 123));
  EXPECT_EQ(s.nvml_used(2), 123u);
  EXPECT_TRUE(s.set_sm_util(2, 45));
  EXPECT_EQ(s.sm_util(2), 45u);
  s.set_host_pid(98765);
  EXPECT_EQ(s.host_pid(), 98765);
  EXPECT_FALSE(s.set_sm_util(99, 1));
}

TEST_F(RegistryTest, RegionAccessors) {
  Region a = open();
  EXPECT_TRUE(a.set_memory_limit(15, 7));
  EXPECT_EQ(a.memory_limit(15), 7u);
  EXPECT_FALSE(a.set_memory_limit(16, 7));
  EXPECT_EQ(a.memory_limit(16), 0u);
  EXPECT_TRUE(a.set_sm_limit(2, 45));
  EXPECT_EQ(a.sm_limit(2), 45u);
  a.set_device_count(2);
  EXPECT_EQ(a.device_count(), 2u);
  ASSERT_TRUE(a.set_device_uuid(1, "GPU-abc"));
  EXPECT_EQ(a.device_uuid(1), "GPU-abc");
  ASSERT_TRUE(a.set_device_uuid(1, "GPU-x"));  // shorter: no leftovers
  EXPECT_EQ(a.device_uuid(1), "GPU-x");
  EXPECT_FALSE(a.set_device_uuid(1, std::string(96, 'u')));
  EXPECT_TRUE(a.set_device_uuid(1, std::string(95, 'u')));
  EXPECT_FALSE(a.set_device_uuid(16, "GPU-y"));
  a.set_utilization_switch(0);
  a.set_recent_kernel(-1);
  a.set_priority(0);
  a.set_last_kernel_time(1234);
  auto snap = read_snapshot(a.path());
  ASSERT_TRUE(snap);
  EXPECT_EQ(snap->utilization_switch, 0);
  EXPECT_EQ(snap->recent_kernel, -1);
  EXPECT_EQ(snap->priority, 0);
  EXPECT_EQ(snap->last_kernel_time, 1234u);
  EXPECT_EQ(snap->memory_limit[15], 7u);
  EXPECT_EQ(snap->uuids[1], std::string(95, 'u'));
}

}  // namespace
}  // namespace hami::region
