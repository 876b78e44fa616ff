// src/nvml/mig_control against the simulated NVML (tests/support/simgpu):
// the profiles and placements of an H100 80GB, making a MIG device at a
// placement and removing it, and that a failure at each step of making one
// leaves the GPU as it was (the simulator's `fail <function>` script lines).
// The node: GPU 0 and 1 H100 80GB with MIG on and no instance, GPU 2 a T4.
#include "nvml/mig_control.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "nvml/nvml.hpp"
#include "support/temp_dir.hpp"

namespace hami::nvml {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

struct SimEnv {
  test::TempDir dir;
  SimEnv() {
    ::setenv("SIMGPU_STATE", dir.file("gpu.state").c_str(), 1);
    ::setenv("SIMGPU_DEVICES",
             "GPU-7c000000-0000-4000-8000-0000000000b0:80g,GPU-7c000000-0000-4000-8000-"
             "0000000000b1:80g,GPU-7c000000-0000-4000-8000-0000000000b2:16g",
             1);
    ::setenv("SIMGPU_NAMES", "NVIDIA H100 80GB HBM3,NVIDIA H100 80GB HBM3,Tesla T4", 1);
    ::setenv("SIMGPU_MIG", "0:on;1:on", 1);
    ::setenv("SIMGPU_NVML_SCRIPT", script().c_str(), 1);
    fail({});
    for (const char* v : {"SIMGPU_FAIL", "CUDA_VISIBLE_DEVICES"})
      ::unsetenv(v);
  }
  std::string script() const { return dir.file("nvml.script"); }
  // Makes each of `functions` fail with NVML_ERROR_UNKNOWN from now on.
  void fail(const std::vector<std::string>& functions) const {
    std::ofstream out(script(), std::ios::trunc);
    out << "# failures " << functions.size() << "\n";
    for (const std::string& f : functions)
      out << "fail " << f << "\n";
  }
};

SimEnv& sim() {
  static SimEnv env;
  return env;
}

class MigControlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sim().fail({});
    auto mig = MigControl::open(SIMNVML);
    ASSERT_TRUE(mig) << mig.error().message;
    mig_ = std::move(*mig);
    // Every test starts from empty GPUs.
    for (int gpu : {0, 1}) {
      auto live = mig_->instances(gpu);
      ASSERT_TRUE(live) << live.error().message;
      for (const GpuInstance& gi : *live)
        ASSERT_TRUE(mig_->destroy(gpu, gi.id));
    }
  }
  void TearDown() override { sim().fail({}); }

  unsigned profile_id(const std::string& name) {
    auto ps = mig_->profiles(0);
    EXPECT_TRUE(ps);
    for (const GiProfile& p : *ps)
      if (p.name == name) return p.id;
    ADD_FAILURE() << "no profile " << name;
    return 0;
  }
  std::vector<GpuInstance> live(int gpu) {
    auto l = mig_->instances(gpu);
    EXPECT_TRUE(l) << l.error().message;
    return l ? *l : std::vector<GpuInstance>{};
  }

  std::unique_ptr<MigControl> mig_;
};

TEST_F(MigControlTest, ProfilesWithTheirPlacements) {
  auto ps = mig_->profiles(0);
  ASSERT_TRUE(ps) << ps.error().message;
  std::vector<std::string> names;
  for (const GiProfile& p : *ps)
    names.push_back(p.name);
  EXPECT_THAT(names, ::testing::IsSupersetOf({"1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"}));
  for (const GiProfile& p : *ps) {
    if (p.name == "3g.40gb") {
      EXPECT_EQ(p.slices, 3u);
      EXPECT_EQ(p.memory_mib, 40192u);
      EXPECT_EQ(p.placements, (std::vector<GiPlacement>{{0, 4}, {4, 4}}));
    }
    if (p.name == "1g.10gb") {
      EXPECT_EQ(p.instances, 7u);
      EXPECT_EQ(p.placements.size(), 7u);
    }
  }
  // A GPU without MIG has no profiles; a GPU NVML does not have is an error.
  auto t4 = mig_->profiles(2);
  ASSERT_TRUE(t4) << t4.error().message;
  EXPECT_THAT(*t4, IsEmpty());
  EXPECT_FALSE(mig_->profiles(7));
}

TEST_F(MigControlTest, MakesAMigDeviceAtAPlacementAndRemovesIt) {
  auto made = mig_->create(0, profile_id("3g.40gb"), {4, 4});
  ASSERT_TRUE(made) << made.error().message;
  EXPECT_THAT(made->mig_uuid, StartsWith("MIG-"));
  auto l = live(0);
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].id, made->gpu_instance_id);
  EXPECT_EQ(l[0].placement, (GiPlacement{4, 4}));
  EXPECT_EQ(l[0].compute_instances, (std::vector<unsigned>{made->compute_instance_id}));
  EXPECT_THAT(live(1), IsEmpty());

  // The read-only loader sees the same MIG device, of all the GI's slices.
  auto lib = Library::open(SIMNVML);
  ASSERT_TRUE(lib) << lib.error().message;
  auto migs = (*lib)->mig_devices(0);
  ASSERT_TRUE(migs) << migs.error().message;
  ASSERT_EQ(migs->size(), 1u);
  EXPECT_EQ((*migs)[0].uuid, made->mig_uuid);
  EXPECT_EQ((*migs)[0].profile, "3g.40gb");
  EXPECT_EQ((*migs)[0].compute_instance_slices, 3u);

  // A placement that overlaps it is refused, and leaves nothing behind.
  auto clash = mig_->create(0, profile_id("2g.20gb"), {4, 2});
  ASSERT_FALSE(clash);
  EXPECT_THAT(clash.error().message, HasSubstr("INSUFFICIENT_RESOURCES"));
  EXPECT_EQ(live(0).size(), 1u);
  // One beside it fits.
  auto beside = mig_->create(0, profile_id("2g.20gb"), {0, 2});
  ASSERT_TRUE(beside) << beside.error().message;
  EXPECT_NE(beside->mig_uuid, made->mig_uuid);

  ASSERT_TRUE(mig_->destroy(0, made->gpu_instance_id));
  ASSERT_TRUE(mig_->destroy(0, beside->gpu_instance_id));
  EXPECT_THAT(live(0), IsEmpty());
  // Destroying one already gone is not an error: cleanup may run twice.
  EXPECT_TRUE(mig_->destroy(0, made->gpu_instance_id));
}

// Each step of making a MIG device failing in turn: the GPU holds no
// instance afterwards, and the error says what failed and that it was undone.
TEST_F(MigControlTest, AFailedStepLeavesTheGpuAsItWas) {
  const unsigned id = profile_id("3g.40gb");
  for (const char* step :
       {"nvmlDeviceCreateGpuInstanceWithPlacement", "nvmlGpuInstanceGetInfo",
        "nvmlGpuInstanceCreateComputeInstance", "nvmlComputeInstanceGetInfo_v2",
        "nvmlDeviceGetMaxMigDeviceCount", "nvmlDeviceGetMigDeviceHandleByIndex",
        "nvmlDeviceGetGpuInstanceId", "nvmlDeviceGetComputeInstanceId", "nvmlDeviceGetUUID"}) {
    SCOPED_TRACE(step);
    sim().fail({step});
    auto made = mig_->create(0, id, {0, 4});
    ASSERT_FALSE(made);
    EXPECT_THAT(made.error().message, HasSubstr(step));
    if (std::string(step) != "nvmlDeviceCreateGpuInstanceWithPlacement") {
      EXPECT_THAT(made.error().message, HasSubstr("was destroyed"));
    }
    sim().fail({});
    EXPECT_THAT(live(0), IsEmpty());
  }
  // With the failure gone the same request succeeds.
  EXPECT_TRUE(mig_->create(0, id, {0, 4}));
}

// When undoing fails too, the error names the GPU instance left, and a later
// destroy (the cleanup) removes it with its compute instance.
TEST_F(MigControlTest, AFailedUndoNamesWhatIsLeft) {
  sim().fail({"nvmlDeviceGetUUID", "nvmlGpuInstanceDestroy"});
  auto made = mig_->create(0, profile_id("1g.10gb"), {6, 1});
  ASSERT_FALSE(made);
  EXPECT_THAT(made.error().message, HasSubstr("is left on device 0"));
  sim().fail({});
  auto l = live(0);
  ASSERT_EQ(l.size(), 1u);
  // The compute instance was undone; the GPU instance is what remains.
  EXPECT_THAT(l[0].compute_instances, IsEmpty());
  EXPECT_THAT(made.error().message, HasSubstr("GPU instance " + std::to_string(l[0].id)));
  ASSERT_TRUE(mig_->destroy(0, l[0].id));
  EXPECT_THAT(live(0), IsEmpty());
}

TEST_F(MigControlTest, DestroyTakesTheComputeInstancesFirst) {
  auto made = mig_->create(1, profile_id("7g.80gb"), {0, 8});
  ASSERT_TRUE(made) << made.error().message;
  sim().fail({"nvmlComputeInstanceDestroy"});
  auto r = mig_->destroy(1, made->gpu_instance_id);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message, HasSubstr("nvmlComputeInstanceDestroy"));
  EXPECT_EQ(live(1).size(), 1u);
  sim().fail({});
  ASSERT_TRUE(mig_->destroy(1, made->gpu_instance_id));
  EXPECT_THAT(live(1), IsEmpty());
}

}  // namespace
}  // namespace hami::nvml
