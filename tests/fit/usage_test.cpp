// Usage bookkeeping: init-container collapse, apply/remove, and agreement
// between what fit_pod placed and what the node holds afterwards.
#include <gtest/gtest.h>

#include <ostream>

#include "fit/usage.hpp"
#include "fit_helpers.hpp"

namespace hami::fit {
namespace {

using testing::ctr;
using testing::gpu;
using testing::node;
using K = ContainerKind;

TEST(Usage, AppContainersAddUp) {
  const PodDevices pd = {{{"GPU-0", "NVIDIA", 1000, 10}},
                         {{"GPU-0", "NVIDIA", 2000, 20}, {"GPU-1", "NVIDIA", 500, 5}}};
  EXPECT_EQ(pod_charges(pd, {}),
            (std::vector<DeviceCharge>{{"GPU-0", 2, 3000, 30}, {"GPU-1", 1, 500, 5}}));
}

struct CollapseCase {
  const char* name;
  PodDevices devices;
  std::vector<ContainerKind> kinds;
  bool init_finished;
  std::vector<DeviceCharge> want;
};

// Names the row in test output instead of dumping its bytes.
void PrintTo(const CollapseCase& c, std::ostream* os) {
  *os << c.name;
}

class Collapse : public ::testing::TestWithParam<CollapseCase> {};

TEST_P(Collapse, AsUpstream) {
  const auto& c = GetParam();
  EXPECT_EQ(pod_charges(c.devices, c.kinds, c.init_finished), c.want);
}

INSTANTIATE_TEST_SUITE_P(
    Fit, Collapse,
    ::testing::Values(
        CollapseCase{"init_bigger_than_apps",
                     {{{"GPU-0", "NVIDIA", 8000, 50}}, {{"GPU-0", "NVIDIA", 3000, 20}}},
                     {K::kInit, K::kApp},
                     false,
                     {{"GPU-0", 1, 8000, 50}}},
        CollapseCase{"apps_bigger_than_init",
                     {{{"GPU-0", "NVIDIA", 1000, 10}},
                      {{"GPU-0", "NVIDIA", 3000, 20}},
                      {{"GPU-0", "NVIDIA", 3000, 20}}},
                     {K::kInit, K::kApp, K::kApp},
                     false,
                     {{"GPU-0", 2, 6000, 40}}},
        CollapseCase{"each_dimension_separately",
                     {{{"GPU-0", "NVIDIA", 8000, 5}}, {{"GPU-0", "NVIDIA", 3000, 20}}},
                     {K::kInit, K::kApp},
                     false,
                     {{"GPU-0", 1, 8000, 20}}},
        CollapseCase{"init_only_gpu_keeps_one_slot",
                     {{{"GPU-1", "NVIDIA", 4000, 0}}, {{"GPU-0", "NVIDIA", 3000, 20}}},
                     {K::kInit, K::kApp},
                     false,
                     {{"GPU-1", 1, 4000, 0}, {"GPU-0", 1, 3000, 20}}},
        CollapseCase{"inits_take_the_largest_not_the_sum",
                     {{{"GPU-0", "NVIDIA", 4000, 10}}, {{"GPU-0", "NVIDIA", 6000, 5}}, {}},
                     {K::kInit, K::kInit, K::kApp},
                     false,
                     {{"GPU-0", 1, 6000, 10}}},
        CollapseCase{"sidecar_runs_beside_a_later_init",
                     {{{"GPU-0", "NVIDIA", 3000, 10}},
                      {{"GPU-0", "NVIDIA", 6000, 10}},
                      {{"GPU-0", "NVIDIA", 1000, 10}}},
                     {K::kSidecar, K::kInit, K::kApp},
                     false,
                     {{"GPU-0", 2, 9000, 20}}},
        CollapseCase{"finished_inits_drop_out",
                     {{{"GPU-0", "NVIDIA", 8000, 50}},
                      {{"GPU-1", "NVIDIA", 9000, 0}},
                      {{"GPU-0", "NVIDIA", 3000, 20}}},
                     {K::kInit, K::kInit, K::kApp},
                     true,
                     {{"GPU-0", 1, 3000, 20}}}),
    [](const auto& tp) { return std::string(tp.param.name); });

TEST(Usage, ApplyAndRemove) {
  auto n = node("n", {gpu("GPU-0", 0), gpu("GPU-1", 1)});
  const std::vector<DeviceCharge> charges = {{"GPU-1", 2, 3000, 30}, {"GPU-9", 1, 1, 1}};
  EXPECT_EQ(apply_charges(n, charges), 1u);  // GPU-9 is not on this node
  EXPECT_EQ(n.devices[1].used_tenants, 2);
  EXPECT_EQ(n.devices[1].used_mem_mib, 3000);
  EXPECT_EQ(n.devices[1].used_cores, 30);
  EXPECT_EQ(n.devices[0].used_tenants, 0);
  EXPECT_EQ(apply_charges(n, charges), 1u);
  EXPECT_EQ(n.devices[1].used_mem_mib, 6000);
  EXPECT_EQ(remove_charges(n, charges), 1u);
  EXPECT_EQ(n.devices[1].used_mem_mib, 3000);
  EXPECT_EQ(remove_charges(n, charges), 1u);
  EXPECT_EQ(n.devices[1].used_tenants, 0);
  EXPECT_EQ(n.devices[1].used_mem_mib, 0);
  // Removing what was never there stops at zero.
  EXPECT_EQ(remove_charges(n, charges), 1u);
  EXPECT_EQ(n.devices[1].used_cores, 0);
}

TEST(Usage, FittedPodAppliedLeavesWhatTheNextFitSees) {
  // Fit a pod with an init container and two app containers, apply it, and
  // check the node's usage; then a second identical pod must see it.
  auto n = node("n", {gpu("GPU-0", 0, 10000), gpu("GPU-1", 1, 10000)});
  const auto pod = testing::prepare({ctr(1, 7000, 0, K::kInit), ctr(1, 3000, 30), ctr(1, 3000, 30)},
                                    testing::gpu_policy("binpack"));
  FitScratch scratch;
  Placement placement;
  ASSERT_TRUE(fit_pod(n, pod, scratch, &placement).fits);
  const PodDevices pd = to_pod_devices(n, pod, placement);
  EXPECT_EQ(pd, (PodDevices{{{"GPU-0", "NVIDIA", 7000, 0}},
                            {{"GPU-0", "NVIDIA", 3000, 30}},
                            {{"GPU-0", "NVIDIA", 3000, 30}}}));
  const std::vector<K> kinds = {K::kInit, K::kApp, K::kApp};
  EXPECT_EQ(apply_charges(n, pod_charges(pd, kinds)), 0u);
  EXPECT_EQ(n.devices[0].used_tenants, 2);
  EXPECT_EQ(n.devices[0].used_mem_mib, 7000);  // the init peak, above the apps' 6000
  EXPECT_EQ(n.devices[0].used_cores, 60);
  // The same pod again: GPU-0 has 3000 MiB left, so the init container goes
  // to GPU-1 and the app containers stack on the busier GPU-0 (binpack).
  Placement second;
  ASSERT_TRUE(fit_pod(n, pod, scratch, &second).fits);
  EXPECT_EQ(to_pod_devices(n, pod, second), (PodDevices{{{"GPU-1", "NVIDIA", 7000, 0}},
                                                        {{"GPU-0", "NVIDIA", 3000, 30}},
                                                        {{"GPU-1", "NVIDIA", 3000, 30}}}));
}

}  // namespace
}  // namespace hami::fit
