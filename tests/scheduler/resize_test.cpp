// A resize as the scheduler checks it, on plain data: the annotation, the fit
// on the pod's own GPUs with its charges taken off, MPS, quotas.
#include "scheduler/resize.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hami::scheduler {
namespace {

using ::testing::HasSubstr;

fit::GpuDevice gpu(const std::string& uuid, int32_t mem, int32_t used_mem, int32_t used_cores,
                   int32_t tenants, const char* mode = fit::kModeHamiCore) {
  fit::GpuDevice g;
  g.uuid = uuid;
  g.type = "NVIDIA H100";
  g.mode = mode;
  g.total_mem_mib = mem;
  g.used_mem_mib = used_mem;
  g.used_cores = used_cores;
  g.used_tenants = tenants;
  return g;
}

struct Case {
  fit::NodeDevices node;
  fit::PodDevices allocation;
  std::vector<std::string> names;
  ResizeDecision run(const std::string& annotation, ResizeQuota quota = {}) const {
    auto targets = parse_resize(annotation);
    EXPECT_TRUE(targets) << targets.error().message;
    if (!targets) return {};
    return decide_resize({node, allocation, names, *targets, {}}, quota);
  }
};

// GPU-a (80 GiB): our pod holds 4000 MiB / 30 %, another 60000 MiB / 50 %.
Case one_gpu(const char* mode = fit::kModeHamiCore) {
  Case c;
  c.node.name = "node-1";
  c.node.devices = {gpu("GPU-a", 81920, 64000, 80, 2, mode)};
  c.allocation = {{{"GPU-a", "NVIDIA", 4000, 30}}};
  c.names = {"main"};
  return c;
}

TEST(ResizeAnnotation, ReadsOneOrManyContainers) {
  auto one = parse_resize("gpumem=8000,gpucores=60");
  ASSERT_TRUE(one);
  EXPECT_EQ(*one, (std::vector<ResizeTarget>{{"", 8000, 60}}));
  auto many = parse_resize("main:gpumem=8000; side:gpucores=20");
  ASSERT_TRUE(many);
  EXPECT_EQ(*many,
            (std::vector<ResizeTarget>{{"main", 8000, std::nullopt}, {"side", std::nullopt, 20}}));
  for (const char* bad :
       {"", "gpumem=0", "gpucores=101", "gpumem=8g", "memory=1", "gpumem=1,gpumem=2",
        "a:gpumem=1;a:gpumem=2", "gpumem=1;b:gpumem=2", ":gpumem=1", "gpumem"}) {
    EXPECT_FALSE(parse_resize(bad)) << bad;
  }
}

TEST(Resize, GrowsWithinTheGpuAsANewPodWould) {
  const Case c = one_gpu();
  const ResizeDecision d = c.run("gpumem=8000,gpucores=50");
  ASSERT_EQ(d.refusal, "");
  EXPECT_TRUE(d.changed);
  EXPECT_EQ(d.devices[0][0], (fit::ContainerDevice{"GPU-a", "NVIDIA", 8000, 50}));
}

TEST(Resize, RefusesWhatTheGpuCannotHold) {
  const Case c = one_gpu();
  // 60000 MiB are the other pod's: 30000 more do not fit in 81920.
  ResizeDecision d = c.run("gpumem=30000");
  EXPECT_THAT(d.refusal, HasSubstr("ResizeRefused: does not fit GPU-a"));
  EXPECT_EQ(d.devices, c.allocation);
  EXPECT_FALSE(d.changed);
  // 50 % are the other pod's: 60 % more do not fit.
  d = c.run("gpucores=60");
  EXPECT_THAT(d.refusal, HasSubstr("does not fit GPU-a"));
  // Its own 4000 MiB are not counted twice: exactly what is free fits.
  d = c.run("gpumem=21920");
  EXPECT_EQ(d.refusal, "");
}

TEST(Resize, ShrinkingAlwaysFitsAndNamesTheContainer) {
  Case c = one_gpu();
  c.node.devices[0].used_mem_mib = 90000;  // over-committed by others meanwhile
  c.node.devices[0].used_cores = 30;
  EXPECT_EQ(c.run("main:gpumem=2000").refusal, "") << "nothing grows";
  EXPECT_THAT(c.run("side:gpumem=2000").refusal, HasSubstr("the pod has no container side"));
}

TEST(Resize, AnMpsClientOnlyShrinksInMemory) {
  const Case c = one_gpu(fit::kModeMps);
  EXPECT_EQ(c.run("gpumem=2000").refusal, "");
  EXPECT_THAT(c.run("gpumem=8000").refusal, HasSubstr("memory can only be lowered"));
  EXPECT_THAT(c.run("gpucores=40").refusal, HasSubstr("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"));
}

TEST(Resize, GrowthMustFitTheNamespaceQuota) {
  const Case c = one_gpu();
  int64_t asked_mem = -1;
  int64_t asked_cores = -1;
  ResizeQuota quota;
  quota.ns = "team-a";
  quota.used = {4000, 30};
  quota.check = [&](const std::string& ns, const NamespaceUsage& used, int64_t mem,
                    int64_t cores) -> std::string {
    asked_mem = mem;
    asked_cores = cores;
    EXPECT_EQ(ns, "team-a");
    return used.mem_mib + mem > 6000 ? "ResourceQuotaNotFit: limits.nvidia.com/gpumem" : "";
  };
  ResizeDecision d = c.run("gpumem=8000,gpucores=40", quota);
  EXPECT_EQ(asked_mem, 4000) << "only the growth is asked for";
  EXPECT_EQ(asked_cores, 10);
  EXPECT_THAT(d.refusal, HasSubstr("ResizeRefused: ResourceQuotaNotFit"));
  d = c.run("gpumem=6000", quota);
  EXPECT_EQ(d.refusal, "");
  asked_mem = -1;
  EXPECT_EQ(c.run("gpumem=1000", quota).refusal, "");
  EXPECT_EQ(asked_mem, -1) << "a shrink asks no quota";
}

TEST(Resize, TwoContainersOnTwoGpus) {
  Case c;
  c.node.name = "node-1";
  c.node.devices = {gpu("GPU-a", 10000, 6000, 20, 1), gpu("GPU-b", 10000, 3000, 20, 1)};
  c.allocation = {{{"GPU-a", "NVIDIA", 6000, 20}}, {}, {{"GPU-b", "NVIDIA", 3000, 20}}};
  c.names = {"main", "init-less", "side"};
  EXPECT_THAT(c.run("gpumem=1000").refusal, HasSubstr("the pod has 2 GPU containers"));
  EXPECT_THAT(c.run("init-less:gpumem=1000").refusal, HasSubstr("has no GPU"));
  const ResizeDecision d = c.run("main:gpumem=9000;side:gpucores=100");
  ASSERT_EQ(d.refusal, "");
  EXPECT_EQ(d.devices[0][0].mem_mib, 9000);
  EXPECT_EQ(d.devices[2][0].cores, 100);
  EXPECT_EQ(d.devices[2][0].mem_mib, 3000);
}

}  // namespace
}  // namespace hami::scheduler
