// Threads of one process share an open file description and so its OFD locks;
// the registry's process mutex must keep them apart. Run under TSan in CI.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "region/region.hpp"
#include "support/temp_dir.hpp"

namespace hami::region {
namespace {

TEST(RegionThreads, RegistrationsNeverShareASlot) {
  constexpr int kThreads = 8;
  constexpr int kRounds = 100;
  test::TempDir dir;
  const std::string path = dir.file("t.cache");
  auto shared = Region::open(path);
  ASSERT_TRUE(shared);
  std::atomic<int> collisions{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto mine = Region::open(path, OpenOptions{.create = false});
      if (!mine) {
        ++failures;
        return;
      }
      const pid_t fake_pid = 100000 + t;
      for (int i = 0; i < kRounds; ++i) {
        auto slot = mine->register_process({fake_pid, 1});
        if (!slot) {
          ++failures;
          continue;
        }
        mine->slot(*slot).add_usage(t % kMaxDevices, UsageKind::kData, 4096);
        if (mine->slot(*slot).pid() != fake_pid) ++collisions;
        // The shared handle sweeps from several threads at once.
        if (!shared->sweep()) ++failures;
        if (mine->slot(*slot).pid() != fake_pid) ++collisions;
        mine->unregister_process();
      }
    });
  }
  for (auto& th : threads)
    th.join();
  EXPECT_EQ(collisions.load(), 0);
  EXPECT_EQ(failures.load(), 0);
  for (int d = 0; d < kMaxDevices; ++d)
    EXPECT_EQ(shared->device_usage(d), 0u);
  EXPECT_EQ(shared->proc_num(), 0);
}

}  // namespace
}  // namespace hami::region
