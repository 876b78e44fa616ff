// A child that holds the registry lock (or is half-way through claiming or
// releasing a slot) is SIGKILLed at a random moment, 1000 times. Every time the
// parent must get the lock within 100 ms, and the registry must stay sound.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>

#include "region/ofd_lock.hpp"
#include "region/region.hpp"
#include "support/temp_dir.hpp"

namespace hami::region {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void child_loop(const std::string& path, int ready_fd, unsigned seed) {
  auto region = Region::open(path, OpenOptions{.create = false});
  if (!region) _exit(2);
  std::minstd_rand rng(seed);
  bool told = false;
  for (;;) {
    auto slot = region->register_process({static_cast<pid_t>(::getpid()), 42});
    if (slot) region->slot(*slot).add_usage(0, UsageKind::kData, 1 << 20);
    {
      auto lock = region->lock_registry();
      if (!lock) _exit(3);
      if (!told) {
        char c = 1;
        (void)!::write(ready_fd, &c, 1);
        told = true;
      }
      // Hold the lock most of the time, writing to the region while we do.
      const auto until = Clock::now() + std::chrono::microseconds(50 + rng() % 200);
      while (Clock::now() < until)
        region->set_recent_kernel(static_cast<int32_t>(rng() % 3));
    }
    region->unregister_process();
  }
}

TEST(RegionKill, LockNeverOutlivesItsHolder) {
  constexpr int kIterations = 1000;
  test::TempDir dir;
  const std::string path = dir.file("kill.cache");
  auto parent = Region::open(path);
  ASSERT_TRUE(parent) << parent.error().message;
  auto mine = parent->register_process({::getpid(), 1});
  ASSERT_TRUE(mine);
  parent->slot(*mine).add_usage(0, UsageKind::kData, 7);

  std::mt19937 rng(20261121);
  int held_at_kill = 0;
  Clock::duration worst{};
  for (int i = 0; i < kIterations; ++i) {
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    const unsigned seed = static_cast<unsigned>(rng());
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      parent->abandon();  // never touch the parent's description
      ::close(ready[0]);
      child_loop(path, ready[1], seed);
    }
    ::close(ready[1]);
    char c = 0;
    ASSERT_EQ(::read(ready[0], &c, 1), 1) << "child failed to start, iteration " << i;
    ::close(ready[0]);
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 1000));
    auto held = range_locked_by_other(parent->fd(), kRegistryLockOffset, 1, LockMode::kExclusive);
    if (held && *held) ++held_at_kill;
    ::kill(pid, SIGKILL);
    const auto start = Clock::now();
    auto lock = parent->lock_registry(std::chrono::milliseconds(100));
    const auto waited = Clock::now() - start;
    ASSERT_TRUE(lock) << "iteration " << i << ": " << lock.error().message;
    worst = std::max(worst, waited);
    ASSERT_LE(waited, std::chrono::milliseconds(100)) << "iteration " << i;
    { auto released = std::move(lock).value(); }
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child exited by itself: " << WEXITSTATUS(status);
  }

  // The dead children's slots are all reclaimable, ours untouched.
  auto report = parent->sweep();
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_EQ(parent->proc_num(), *mine + 1);
  EXPECT_EQ(parent->device_usage(0), 7u);
  EXPECT_EQ(parent->slot(*mine).pid(), ::getpid());
  for (int s = 0; s < kMaxProcesses; ++s) {
    if (s == *mine) continue;
    EXPECT_FALSE(parent->slot(s).owner_tagged()) << "slot " << s;
  }
  // The scenario must really have been exercised: most kills hit a held lock.
  EXPECT_GE(held_at_kill, kIterations / 2);
  std::printf("kills with the lock held: %d/%d; longest wait for the lock: %.3f ms\n", held_at_kill,
              kIterations, std::chrono::duration<double, std::milli>(worst).count());
}

}  // namespace
}  // namespace hami::region
