// Dynamic MIG on the node (src/deviceplugin/mig_manager) against the
// simulated NVML: a container's reserved MIG devices made and recorded all
// or none (each step failed in turn, recording too), the apply lock, and the
// cleanup of instances no pod names. The node: two H100 80GB with MIG on.
#include "deviceplugin/mig_manager.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/temp_dir.hpp"

namespace hami::deviceplugin {
namespace {

using protocol::MigAllocation;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

const char* const kGpu0 = "GPU-7d000000-0000-4000-8000-0000000000c0";
const char* const kGpu1 = "GPU-7d000000-0000-4000-8000-0000000000c1";

struct SimEnv {
  test::TempDir dir;
  SimEnv() {
    ::setenv("SIMGPU_STATE", dir.file("gpu.state").c_str(), 1);
    ::setenv("SIMGPU_DEVICES", (std::string(kGpu0) + ":80g," + kGpu1 + ":80g").c_str(), 1);
    ::setenv("SIMGPU_NAMES", "NVIDIA H100 80GB HBM3,NVIDIA H100 80GB HBM3", 1);
    ::setenv("SIMGPU_MIG", "0:on;1:on", 1);
    ::setenv("SIMGPU_NVML_SCRIPT", dir.file("nvml.script").c_str(), 1);
    fail("");
    for (const char* v : {"SIMGPU_FAIL", "CUDA_VISIBLE_DEVICES"})
      ::unsetenv(v);
  }
  // `lines`: the simulator's script, e.g. "fail nvmlDeviceGetUUID 1".
  void fail(const std::string& lines) const {
    std::ofstream out(dir.file("nvml.script"), std::ios::trunc);
    out << "# " << lines.size() << "\n" << lines << "\n";
  }
};

SimEnv& sim() {
  static SimEnv env;
  return env;
}

MigAllocation alloc(int device, const char* gpu, const char* profile, unsigned start,
                    unsigned size) {
  MigAllocation a;
  a.device_index = device;
  a.gpu_uuid = gpu;
  a.profile = profile;
  a.placement = {start, size};
  return a;
}

class MigManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sim().fail("");
    auto c = nvml::MigControl::open(SIMNVML);
    ASSERT_TRUE(c) << c.error().message;
    control_ = std::move(*c);
    for (int gpu : {0, 1}) {
      auto l = control_->instances(gpu);
      ASSERT_TRUE(l) << l.error().message;
      for (const nvml::GpuInstance& gi : *l)
        ASSERT_TRUE(control_->destroy(gpu, gi.id));
    }
    lock_ = dir_.file("hami/hami-mig-apply.lock");
  }
  void TearDown() override { sim().fail(""); }

  size_t live(int gpu) {
    auto l = control_->instances(gpu);
    EXPECT_TRUE(l) << l.error().message;
    return l ? l->size() : 0;
  }
  // A commit that records what it was given, or fails.
  auto recorder(std::vector<MigAllocation>* out, bool ok = true) {
    return [out, ok, this](const std::vector<MigAllocation>& all) -> Result<void> {
      // The lock is held while applying.
      EXPECT_TRUE(MigApplyLock::held(lock_));
      if (!ok) return Error{"patch refused"};
      *out = all;
      return {};
    };
  }

  test::TempDir dir_;
  std::string lock_;
  std::unique_ptr<nvml::MigControl> control_;
  const MigGpus gpus_{{kGpu0, 0}, {kGpu1, 1}};
};

TEST_F(MigManagerTest, MakesAndRecordsAContainersDevices) {
  MigManager mgr(*control_, lock_);
  std::vector<MigAllocation> recorded;
  auto done = mgr.realise({alloc(0, kGpu0, "3g.40gb", 4, 4), alloc(1, kGpu1, "1g.10gb", 0, 1)},
                          gpus_, recorder(&recorded));
  ASSERT_TRUE(done) << done.error().message;
  ASSERT_EQ(done->size(), 2u);
  for (const MigAllocation& a : *done) {
    EXPECT_TRUE(a.realised());
    EXPECT_THAT(a.mig_uuid, StartsWith("MIG-"));
  }
  EXPECT_EQ(recorded, *done);
  EXPECT_EQ(live(0), 1u);
  EXPECT_EQ(live(1), 1u);
  auto l0 = control_->instances(0);
  ASSERT_TRUE(l0 && l0->size() == 1);
  EXPECT_EQ((*l0)[0].placement, (nvml::GiPlacement{4, 4}));
  EXPECT_FALSE(MigApplyLock::held(lock_));

  // Allocate again (kubelet restarted): the instances are kept as they are.
  auto again = mgr.realise(*done, gpus_, recorder(&recorded));
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(*again, *done);
  EXPECT_EQ(live(0), 1u);
}

// A failure at any step leaves both GPUs as they were: the device already
// made on GPU 0 is destroyed when GPU 1's fails, or when recording fails.
TEST_F(MigManagerTest, AFailedStepLeavesNoInstance) {
  MigManager mgr(*control_, lock_);
  const std::vector<MigAllocation> want = {alloc(0, kGpu0, "2g.20gb", 2, 2),
                                           alloc(1, kGpu1, "3g.40gb", 0, 4)};
  for (const char* step : {"nvmlDeviceCreateGpuInstanceWithPlacement", "nvmlGpuInstanceGetInfo",
                           "nvmlGpuInstanceCreateComputeInstance", "nvmlComputeInstanceGetInfo_v2",
                           "nvmlDeviceGetMigDeviceHandleByIndex", "nvmlDeviceGetUUID",
                           "nvmlDeviceGetGpuInstanceProfileInfoV"}) {
    SCOPED_TRACE(step);
    sim().fail(std::string("fail ") + step + " 1");  // on GPU 1 only
    std::vector<MigAllocation> recorded;
    auto done = mgr.realise(want, gpus_, recorder(&recorded));
    ASSERT_FALSE(done);
    EXPECT_THAT(done.error().message, HasSubstr(step));
    EXPECT_THAT(recorded, IsEmpty());
    sim().fail("");
    EXPECT_EQ(live(0), 0u);
    EXPECT_EQ(live(1), 0u);
    EXPECT_FALSE(MigApplyLock::held(lock_));
  }
  // Recording fails.
  std::vector<MigAllocation> recorded;
  auto done = mgr.realise(want, gpus_, recorder(&recorded, false));
  ASSERT_FALSE(done);
  EXPECT_THAT(done.error().message, HasSubstr("patch refused"));
  EXPECT_EQ(live(0) + live(1), 0u);
  // Two reservations that overlap on one GPU, and a GPU not in MIG mode.
  done = mgr.realise({alloc(0, kGpu0, "3g.40gb", 0, 4), alloc(1, kGpu0, "1g.10gb", 3, 1)}, gpus_,
                     recorder(&recorded));
  ASSERT_FALSE(done);
  EXPECT_THAT(done.error().message, HasSubstr("INSUFFICIENT_RESOURCES"));
  EXPECT_EQ(live(0), 0u);
  done = mgr.realise({alloc(0, "GPU-other", "1g.10gb", 0, 1)}, gpus_, recorder(&recorded));
  ASSERT_FALSE(done);
  EXPECT_THAT(done.error().message, HasSubstr("not a GPU in MIG mode"));
  // And with nothing failing, the same request succeeds.
  EXPECT_TRUE(mgr.realise(want, gpus_, recorder(&recorded)));
}

TEST_F(MigManagerTest, TheApplyLockExcludesAndIsTakenOverWhenStale) {
  MigManager mgr(*control_, lock_);
  std::vector<MigAllocation> recorded;
  {
    auto held = MigApplyLock::take(lock_);
    ASSERT_TRUE(held) << held.error().message;
    EXPECT_TRUE(MigApplyLock::held(lock_));
    auto done = mgr.realise({alloc(0, kGpu0, "1g.10gb", 0, 1)}, gpus_, recorder(&recorded));
    ASSERT_FALSE(done);
    EXPECT_THAT(done.error().message, HasSubstr("another MIG change is in progress"));
    EXPECT_FALSE(mgr.cleanup({}, gpus_));
    EXPECT_EQ(live(0), 0u);
  }
  EXPECT_FALSE(MigApplyLock::held(lock_));
  // A holder that died mid-apply: its lock is stale.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);
  std::ofstream(lock_) << child << "\n";
  EXPECT_FALSE(MigApplyLock::held(lock_));
  EXPECT_TRUE(mgr.realise({alloc(0, kGpu0, "1g.10gb", 0, 1)}, gpus_, recorder(&recorded)));
  EXPECT_FALSE(MigApplyLock::held(lock_));
  // A file without a PID: held while fresh (being written), stale when old,
  // so a file another plugin left cannot stop this node for good.
  std::ofstream(lock_).close();
  EXPECT_TRUE(MigApplyLock::held(lock_));
  EXPECT_FALSE(MigApplyLock::take(lock_));
  std::filesystem::last_write_time(
      lock_, std::filesystem::file_time_type::clock::now() - std::chrono::minutes(1));
  EXPECT_FALSE(MigApplyLock::held(lock_));
  EXPECT_TRUE(MigApplyLock::take(lock_));
  EXPECT_FALSE(MigApplyLock::held(lock_));
}

TEST_F(MigManagerTest, CleanupRemovesWhatNoPodNames) {
  MigManager mgr(*control_, lock_, std::chrono::hours(1));
  std::vector<MigAllocation> a, b;
  ASSERT_TRUE(mgr.realise({alloc(0, kGpu0, "3g.40gb", 0, 4)}, gpus_, recorder(&a)));
  ASSERT_TRUE(mgr.realise({alloc(0, kGpu1, "3g.40gb", 0, 4)}, gpus_, recorder(&b)));
  // One no pod made: a leftover of a crashed plugin.
  auto stray = control_->create(0, 9, {4, 4});  // profile ID 9: 3g.40gb on an H100
  ASSERT_TRUE(stray) << stray.error().message;

  // `a`'s pod runs; `b`'s pod is not listed yet but was just made: kept.
  auto r = mgr.cleanup(a, gpus_);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_THAT(r->errors, IsEmpty());
  EXPECT_EQ(r->removed, (std::vector<RemovedInstance>{{kGpu0, stray->gpu_instance_id}}));
  EXPECT_EQ(live(0), 1u);
  EXPECT_EQ(live(1), 1u);

  // Past the grace period, `b`'s instance with no pod goes too; `a`'s stays.
  MigManager later(*control_, lock_, std::chrono::seconds(0));
  r = later.cleanup(a, gpus_);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->removed, (std::vector<RemovedInstance>{{kGpu1, *b[0].gpu_instance_id}}));
  EXPECT_EQ(live(0), 1u);
  EXPECT_EQ(live(1), 0u);
  // No pod left: the node is whole again.
  r = later.cleanup({}, gpus_);
  ASSERT_TRUE(r);
  EXPECT_EQ(live(0), 0u);
  // An instance it cannot remove is reported, the rest still done.
  ASSERT_TRUE(later.realise({alloc(0, kGpu0, "1g.10gb", 0, 1)}, gpus_, recorder(&a)));
  ASSERT_TRUE(later.realise({alloc(0, kGpu1, "1g.10gb", 0, 1)}, gpus_, recorder(&b)));
  sim().fail("fail nvmlGpuInstanceDestroy 0");
  r = later.cleanup({}, gpus_);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->errors.size(), 1u);
  EXPECT_THAT(r->errors[0].message, HasSubstr(kGpu0));
  EXPECT_EQ(r->removed.size(), 1u);
  EXPECT_EQ(live(1), 0u);
}

TEST_F(MigManagerTest, RegistersTheAllowedProfiles) {
  auto profiles = control_->profiles(0);
  ASSERT_TRUE(profiles) << profiles.error().message;
  const std::vector<fit::MigAllowEntry> allow = {
      {{"A100-SXM4-40GB"}, {"1g.5gb"}},
      {{"H100-PCIE-80GB", "H100-SXM5-80GB"}, {"1g.10gb", "3g.40gb", "7g.80gb"}}};
  MigRegistration reg = mig_registration("NVIDIA H100 80GB HBM3", *profiles, allow);
  ASSERT_EQ(reg.profiles.size(), 3u);
  EXPECT_EQ(reg.profiles[0].name, "1g.10gb");
  EXPECT_EQ(reg.profiles[0].memory, 9984);
  EXPECT_EQ(reg.profiles[0].core, 14);  // 1 of 7 slices
  EXPECT_EQ(reg.profiles[0].placements.size(), 7u);
  EXPECT_EQ(reg.profiles[1].name, "3g.40gb");
  EXPECT_EQ(reg.profiles[1].core, 42);
  EXPECT_EQ(reg.profiles[1].slice_count, 3);
  EXPECT_EQ(reg.profiles[1].placements, (std::vector<protocol::MigPlacement>{{0, 4}, {4, 4}}));
  EXPECT_EQ(reg.profiles[2].core, 100);
  EXPECT_EQ(reg.count, 7);  // seven 1g.10gb
  // Without 1g profiles allowed, at most two instances (3g.40gb).
  reg = mig_registration("NVIDIA H100 80GB HBM3", *profiles,
                         {{{"H100-SXM5-80GB"}, {"3g.40gb", "7g.80gb"}}});
  EXPECT_EQ(reg.count, 2);
  // A model the allowlist does not name: every profile the GPU has.
  reg = mig_registration("NVIDIA H100 80GB HBM3", *profiles, {{{"B200"}, {"1g.23gb"}}});
  EXPECT_EQ(reg.profiles.size(), profiles->size());
}

}  // namespace
}  // namespace hami::deviceplugin
