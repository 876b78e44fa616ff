// The container contract: what a writer renders is what every reader reads,
// the MPS rule is one rule, and the resize rules for MPS clients.
#include "protocol/container_contract.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hami::protocol {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint64_t MiB = 1ull << 20;

ContainerSpec two_gpus() {
  ContainerSpec s;
  s.gpus = {{"GPU-a", 3000 * MiB, 30}, {"GPU-b", 5 * MiB + 1, 30}};
  s.priority = 1;
  s.policy = CorePolicy::kForce;
  s.state_file = "/usr/local/vgpu/x.cache";
  s.comment = "written by a test";
  return s;
}

TEST(ContainerContract, WhatIsRenderedIsWhatIsRead) {
  const Rendered r = render_contract(two_gpus());
  EXPECT_THAT(r.limits_text, HasSubstr("# written by a test\n"));
  EXPECT_THAT(r.limits_text, HasSubstr("CUDA_DEVICE_MEMORY_LIMIT_0=3000m\n"));
  EXPECT_THAT(r.limits_text, HasSubstr("CUDA_DEVICE_MEMORY_LIMIT_1=5242881\n"));
  const ContainerLimits l = parse_limits_file(r.limits_text, "/etc/vgpu/limits.d/limits");
  EXPECT_TRUE(l.errors.empty()) << l.errors[0];
  EXPECT_FALSE(l.corrupt);
  EXPECT_EQ(l.memory_limit[0], 3000 * MiB);
  EXPECT_EQ(l.memory_limit[1], 5 * MiB + 1);
  EXPECT_EQ(l.memory_limit[2], 0u);
  EXPECT_EQ(l.sm_limit[0], 30u);
  EXPECT_EQ(l.sm_limit[1], 30u);
  EXPECT_EQ(l.priority, 1);
  EXPECT_EQ(l.policy, CorePolicy::kForce);
  EXPECT_EQ(l.state_file, "/usr/local/vgpu/x.cache");
  EXPECT_EQ(l.device_uuids, (std::vector<std::string>{"GPU-a", "GPU-b"}));
  EXPECT_EQ(l.mode(), SharingMode::kTimeslice);
  // The environment carries the same limit pairs the file starts with.
  std::map<std::string, std::string> env(r.env.begin(), r.env.end());
  const ContainerLimits e = parse_limits_env(env, {});
  EXPECT_EQ(e.memory_limit, l.memory_limit);
  EXPECT_EQ(e.sm_limit, l.sm_limit);
  EXPECT_EQ(e.policy, l.policy);
}

// Settled on purpose: the device plugin and `vgpu run --sharing mps` both
// render this, so an MPS client is never paced by the library too.
TEST(ContainerContract, AnMpsClientIsNeverPacedByTheLibrary) {
  ContainerSpec s;
  s.gpus = {{"GPU-c", 4096 * MiB, 30}};
  s.mode = SharingMode::kMps;
  s.policy = CorePolicy::kForce;  // what the pod asked: MPS divides the SMs instead
  const Rendered r = render_contract(s);
  EXPECT_THAT(r.limits_text, HasSubstr("GPU_CORE_UTILIZATION_POLICY=disable\n"));
  EXPECT_THAT(r.limits_text, Not(HasSubstr("CUDA_DEVICE_SM_LIMIT")));
  EXPECT_THAT(r.limits_text, HasSubstr("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=30\n"));
  EXPECT_EQ(r.mps_threads, 30);
  const ContainerLimits l = parse_limits_file(r.limits_text, "f");
  EXPECT_EQ(l.mode(), SharingMode::kMps);
  EXPECT_EQ(l.policy, CorePolicy::kDisable);
  EXPECT_EQ(l.sm_limit[0], 100u);
  EXPECT_EQ(l.mps_threads, 30u);
  // A high-priority client is not capped; the record still says it is a client.
  s.priority = 0;
  const Rendered high = render_contract(s);
  EXPECT_FALSE(high.mps_threads);
  EXPECT_THAT(high.limits_text, HasSubstr("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=100\n"));
}

TEST(ContainerContract, UnreadableValuesDenyAndCorruptFilesSaySo) {
  ContainerLimits l =
      parse_limits_file("CUDA_DEVICE_MEMORY_LIMIT_1=lots\nCUDA_TASK_PRIORITY=7\n", "f");
  EXPECT_FALSE(l.corrupt);
  EXPECT_TRUE(l.memory_denied[1]);
  EXPECT_FALSE(l.memory_denied[0]);
  ASSERT_EQ(l.errors.size(), 2u);
  EXPECT_THAT(l.errors[0], HasSubstr("f: CUDA_DEVICE_MEMORY_LIMIT_1=lots"));
  EXPECT_THAT(l.errors[1], HasSubstr("CUDA_TASK_PRIORITY=7 is not 0 (high) or 1 (low)"));
  l = parse_limits_file("CUDA_DEVICE_MEMORY_LIMIT=1g\ngarbage\n", "f");
  EXPECT_TRUE(l.corrupt);
  l = parse_limits_file("CUDA_DEVICE_MEMORY_SHARED_CACHE=relative.cache\n", "f");
  EXPECT_TRUE(l.corrupt);
  l = parse_limits_file(std::string(kMaxLimitsFileSize + 1, '#'), "f");
  EXPECT_TRUE(l.corrupt);
  l = parse_limits_file("CUDA_DEVICE_SM_LIMIT_16=30\n", "f");
  ASSERT_EQ(l.errors.size(), 1u);
  EXPECT_THAT(l.errors[0], HasSubstr("device index 16 is out of range"));
}

TEST(ContainerContract, AnMpsClientResizesOnlyDownInMemory) {
  EXPECT_FALSE(mps_resize_refusal(8192 * MiB, 4096 * MiB, 30, 30));
  EXPECT_THAT(mps_resize_refusal(4096 * MiB, 8192 * MiB, 30, 30).value_or(""),
              HasSubstr("memory can only be lowered"));
  EXPECT_THAT(mps_resize_refusal(4096 * MiB, 0, 30, 30).value_or(""),
              HasSubstr("memory can only be lowered"));
  EXPECT_THAT(mps_resize_refusal(4096 * MiB, 4096 * MiB, 30, 60).value_or(""),
              HasSubstr("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"));
}

}  // namespace
}  // namespace hami::protocol
