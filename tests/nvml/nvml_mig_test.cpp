// src/nvml's read-only MIG queries against the simulated NVML
// (tests/support/simgpu/sim_mig.cpp): MIG mode, the maximum MIG device count,
// every MIG device of a partitioned GPU with its UUID, profile, memory, GPU
// and compute instance IDs and SMs, the parent of a MIG device, and the
// answers for a GPU with MIG on but empty, one with MIG off and one without
// MIG. The node: GPU 0 an H100 80GB partitioned 3g.40gb, 2g.20gb, 1g.10gb;
// GPU 1 an H200 with MIG on and no instance; GPU 2 an H100 with MIG off;
// GPU 3 a T4 (no MIG). Also the node agent's NVML sampler over that node.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "monitor/nvml_sampler.hpp"
#include "nvml/nvml.hpp"
#include "support/temp_dir.hpp"

namespace hami::nvml {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr uint64_t kMiB = 1ull << 20;

struct SimEnv {
  test::TempDir dir;
  SimEnv() {
    ::setenv("SIMGPU_STATE", dir.file("gpu.state").c_str(), 1);
    ::setenv("SIMGPU_DEVICES",
             "GPU-6b3e0000-0000-4000-8000-0000000000a0:80g,GPU-6b3e0000-0000-4000-8000-"
             "0000000000a1:141g,GPU-6b3e0000-0000-4000-8000-0000000000a2:80g,GPU-6b3e0000-0000-"
             "4000-8000-0000000000a3:16g",
             1);
    ::setenv("SIMGPU_NAMES", "NVIDIA H100 80GB HBM3,NVIDIA H200,NVIDIA H100 80GB HBM3,Tesla T4", 1);
    ::setenv("SIMGPU_MIG", "0:3g.40gb,2g.20gb,1g.10gb;1:on", 1);
    // Empty until a test writes Xid lines (events need a script).
    std::ofstream(dir.file("nvml.script")) << "";
    ::setenv("SIMGPU_NVML_SCRIPT", dir.file("nvml.script").c_str(), 1);
    for (const char* v : {"SIMGPU_FAIL", "CUDA_VISIBLE_DEVICES"})
      ::unsetenv(v);
  }
};

SimEnv& sim() {
  static SimEnv env;
  return env;
}

class NvmlMigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sim();
    auto lib = Library::open(SIMNVML);
    ASSERT_TRUE(lib) << lib.error().message;
    lib_ = std::move(*lib);
  }
  std::unique_ptr<Library> lib_;
};

TEST(MigProfileName, FromTheDriversName) {
  EXPECT_EQ(mig_profile_from_name("NVIDIA H200 MIG 3g.71gb"), "3g.71gb");
  EXPECT_EQ(mig_profile_from_name("NVIDIA A100-SXM4-40GB MIG 1c.3g.20gb"), "1c.3g.20gb");
  EXPECT_EQ(mig_profile_from_name("NVIDIA H100 80GB HBM3 MIG 1g.10gb+me"), "1g.10gb+me");
  EXPECT_EQ(mig_profile_from_name("NVIDIA H200"), "");
  EXPECT_EQ(mig_profile_from_name("NVIDIA H200 MIG "), "");
  EXPECT_EQ(mig_profile_from_name(""), "");
}

TEST_F(NvmlMigTest, ModePerGpu) {
  auto m0 = lib_->mig_mode(0);
  ASSERT_TRUE(m0) << m0.error().message;
  EXPECT_EQ(*m0, (MigMode{true, true}));
  EXPECT_EQ(*lib_->mig_mode(1), (MigMode{true, true}));
  EXPECT_EQ(*lib_->mig_mode(2), (MigMode{false, false}));
  // A GPU without MIG answers NOT_SUPPORTED: MIG off, not an error.
  auto t4 = lib_->mig_mode(3);
  ASSERT_TRUE(t4) << t4.error().message;
  EXPECT_EQ(*t4, (MigMode{false, false}));
  EXPECT_FALSE(lib_->mig_mode(9));
}

TEST_F(NvmlMigTest, MaxDeviceCount) {
  EXPECT_EQ(*lib_->max_mig_devices(0), 7);
  EXPECT_EQ(*lib_->max_mig_devices(1), 7);
  EXPECT_EQ(*lib_->max_mig_devices(2), 0);
  EXPECT_EQ(*lib_->max_mig_devices(3), 0);
}

TEST_F(NvmlMigTest, DevicesOfAPartitionedGpu) {
  auto migs = lib_->mig_devices(0);
  ASSERT_TRUE(migs) << migs.error().message;
  ASSERT_EQ(migs->size(), 3u);
  const MigDevice& a = (*migs)[0];
  EXPECT_THAT(a.uuid, StartsWith("MIG-"));
  EXPECT_EQ(a.name, "NVIDIA H100 80GB HBM3 MIG 3g.40gb");
  EXPECT_EQ(a.profile, "3g.40gb");
  EXPECT_EQ(a.parent_index, 0);
  EXPECT_EQ(a.mig_index, 0);
  EXPECT_EQ(a.memory_total, 40192 * kMiB);
  EXPECT_EQ(a.sm_count, 60u);
  EXPECT_EQ(a.gpu_instance_slices, 3u);
  EXPECT_EQ(a.compute_instance_slices, 3u);
  EXPECT_EQ(a.compute_instance_id, 0u);
  EXPECT_EQ((*migs)[1].profile, "2g.20gb");
  EXPECT_EQ((*migs)[1].sm_count, 32u);
  EXPECT_EQ((*migs)[2].profile, "1g.10gb");
  EXPECT_EQ((*migs)[2].memory_total, 9984 * kMiB);
  // Three GPU instances: three GI IDs, three UUIDs.
  EXPECT_NE(a.gpu_instance_id, (*migs)[1].gpu_instance_id);
  EXPECT_NE((*migs)[1].gpu_instance_id, (*migs)[2].gpu_instance_id);
  EXPECT_NE(a.uuid, (*migs)[2].uuid);
}

TEST_F(NvmlMigTest, EmptyOffAndAbsent) {
  for (int gpu : {1, 2, 3}) {
    auto migs = lib_->mig_devices(gpu);
    ASSERT_TRUE(migs) << gpu << ": " << migs.error().message;
    EXPECT_TRUE(migs->empty()) << gpu;
  }
  // MIG on, nothing at index 0: no device, not an error.
  auto none = lib_->mig_device(1, 0);
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_FALSE(*none);
  // MIG off: asking for a MIG device is an error naming the call.
  auto off = lib_->mig_device(2, 0);
  ASSERT_FALSE(off);
  EXPECT_THAT(off.error().message, HasSubstr("nvmlDeviceGetMigDeviceHandleByIndex(device 2)"));
  EXPECT_THAT(off.error().message, HasSubstr("NVML_ERROR_NOT_SUPPORTED"));
  EXPECT_FALSE(lib_->mig_device(0, -1));
}

TEST_F(NvmlMigTest, ParentOfAMigDevice) {
  auto migs = lib_->mig_devices(0);
  ASSERT_TRUE(migs && !migs->empty());
  auto parent = lib_->mig_parent((*migs)[1].uuid);
  ASSERT_TRUE(parent) << parent.error().message;
  EXPECT_EQ(*parent, 0);
  auto unknown = lib_->mig_parent("MIG-00000000-0000-0000-0000-000000000000");
  ASSERT_FALSE(unknown);
  EXPECT_THAT(unknown.error().message, HasSubstr("NVML_ERROR_NOT_FOUND"));
  // A GPU's UUID is no MIG device.
  EXPECT_FALSE(lib_->mig_parent("GPU-6b3e0000-0000-4000-8000-0000000000a0"));
}

TEST_F(NvmlMigTest, TheGpusThemselvesStillDescribeThemselves) {
  auto info = lib_->device(0);
  ASSERT_TRUE(info) << info.error().message;
  EXPECT_EQ(info->name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(*lib_->device_count(), 4);
}

// An Xid in a MIG device's GPU and compute instance carries their IDs
// (nvmlEventSetWait_v2); one on the whole GPU carries none.
TEST_F(NvmlMigTest, XidEventsSayTheirMigInstance) {
  auto watched = lib_->watch_xid_events();
  ASSERT_TRUE(watched) << watched.error().message;
  const std::string script = sim().dir.file("nvml.script");
  std::ofstream(script + ".tmp") << "xid 0 79 2 0\nxid 0 48\n";
  ASSERT_EQ(std::rename((script + ".tmp").c_str(), script.c_str()), 0);
  auto a = lib_->wait_xid(std::chrono::milliseconds(2000));
  ASSERT_TRUE(a && *a) << (a ? "no event" : a.error().message);
  EXPECT_EQ((*a)->index, 0);
  EXPECT_EQ((*a)->xid, 79u);
  EXPECT_EQ((*a)->gpu_instance_id, std::optional<unsigned>(2));
  EXPECT_EQ((*a)->compute_instance_id, std::optional<unsigned>(0));
  auto b = lib_->wait_xid(std::chrono::milliseconds(2000));
  ASSERT_TRUE(b && *b);
  EXPECT_EQ((*b)->xid, 48u);
  EXPECT_FALSE((*b)->gpu_instance_id);
  EXPECT_FALSE((*b)->compute_instance_id);
  std::ofstream(script + ".tmp") << "";
  ASSERT_EQ(std::rename((script + ".tmp").c_str(), script.c_str()), 0);
}

// The node agent's sampler: each MIG-enabled GPU, without an error for the
// utilisation NVML cannot give it, followed by its MIG devices.
TEST_F(NvmlMigTest, TheAgentSamplesMigDevicesAfterTheirGpu) {
  auto sampler = monitor::NvmlSampler::open(SIMNVML);
  ASSERT_TRUE(sampler) << sampler.error().message;
  const std::vector<monitor::GpuSample> s = (*sampler)->sample();
  // GPU 0 and its three MIG devices, GPU 1 (MIG on, empty), GPU 2, GPU 3.
  ASSERT_EQ(s.size(), 7u);
  EXPECT_EQ(s[0].uuid, "GPU-6b3e0000-0000-4000-8000-0000000000a0");
  EXPECT_EQ(s[0].error, "");
  EXPECT_FALSE(s[0].mig);
  for (size_t i = 1; i <= 3; ++i) {
    ASSERT_TRUE(s[i].mig) << i;
    EXPECT_EQ(s[i].index, 0);
    EXPECT_THAT(s[i].uuid, StartsWith("MIG-"));
    EXPECT_EQ(s[i].mig->parent_uuid, s[0].uuid);
    EXPECT_EQ(s[i].error, "") << i;
  }
  EXPECT_EQ(s[1].mig->profile, "3g.40gb");
  EXPECT_EQ(s[1].memory_total, 40192 * kMiB);
  EXPECT_EQ(s[3].name, "NVIDIA H100 80GB HBM3 MIG 1g.10gb");
  EXPECT_EQ(s[4].index, 1);
  EXPECT_FALSE(s[4].mig);
  EXPECT_EQ(s[6].index, 3);
}

}  // namespace
}  // namespace hami::nvml
