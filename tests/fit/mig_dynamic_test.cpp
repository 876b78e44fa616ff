// Dynamic MIG in the fit (docs/mig.md): a GPU in MIG operating mode that
// registered its allowed profiles takes each container as a new MIG device,
// of the smallest allowed profile that holds it, at a placement free of
// existing instances, reservations and the pod's own earlier picks;
// CardMigTopologyInfeasible when none is free. The node: an H100 80GB in
// dynamic MIG mode beside a time-sliced GPU.
#include <gtest/gtest.h>

#include "fit/usage.hpp"
#include "fit_helpers.hpp"

namespace hami::fit {
namespace {

using protocol::MigAllocation;
using protocol::MigPlacement;
using testing::ctr;
using testing::gpu;
using testing::node;
using testing::prepare;
using testing::run;

std::vector<MigPlacement> every(unsigned size, std::vector<unsigned> starts) {
  std::vector<MigPlacement> out;
  for (unsigned s : starts)
    out.push_back({s, size});
  return out;
}

GpuDevice dynamic_mig(std::vector<MigPlacement> taken = {}) {
  GpuDevice d = gpu("GPU-mig", 0, 81920);
  d.type = "NVIDIA H100 80GB HBM3";
  d.mode = kModeMig;
  d.split_count = 7;
  d.mig_profiles = {{"1g.10gb", 9984, 1, every(1, {0, 1, 2, 3, 4, 5, 6})},
                    {"2g.20gb", 20096, 2, every(2, {0, 2, 4})},
                    {"3g.40gb", 40192, 3, every(4, {0, 4})},
                    {"7g.80gb", 80896, 7, every(8, {0})}};
  d.mig_taken = std::move(taken);
  return d;
}

PodOptions mig_mode() {
  PodOptions o;
  o.vgpu_mode = kModeMig;
  return o;
}

// The allocations the scheduler would write for the pod on `n`.
std::vector<MigAllocation> allocations(const NodeDevices& n, const PreparedPod& pod) {
  FitScratch scratch;
  Placement placement;
  const NodeFit f = fit_pod(n, pod, scratch, &placement);
  EXPECT_TRUE(f.fits) << describe(f.failure);
  return to_mig_allocations(n, placement);
}

TEST(DynamicMigFit, SmallestAllowedProfileAtTheFirstFreePlacement) {
  const NodeDevices n = node("n", {dynamic_mig(), gpu("GPU-t", 1)});
  auto a = allocations(n, prepare({ctr(1, 15000)}, mig_mode()));
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].gpu_uuid, "GPU-mig");
  EXPECT_EQ(a[0].profile, "2g.20gb");
  EXPECT_EQ(a[0].placement, (MigPlacement{0, 2}));
  EXPECT_EQ(a[0].container_index, 0);
  EXPECT_EQ(a[0].device_index, 0);
  EXPECT_FALSE(a[0].realised());
  // The container's limit is what it asked; without a size, the MIG device's.
  FitScratch scratch;
  Placement placement;
  const PreparedPod whole = prepare({ctr(1, 0)}, mig_mode());
  ASSERT_TRUE(fit_pod(n, whole, scratch, &placement).fits);
  EXPECT_EQ(to_pod_devices(n, whole, placement)[0][0].mem_mib, 9984);
  // A time-sliced pod gets no MIG allocation.
  PodOptions ts;
  ts.vgpu_mode = kModeHamiCore;
  EXPECT_TRUE(allocations(n, prepare({ctr(1, 1000)}, ts)).empty());
}

TEST(DynamicMigFit, ContainersOfOnePodTakeDisjointPlacements) {
  const NodeDevices n = node("n", {dynamic_mig()});
  // Two containers of 30 GB, each a whole-GPU-cores request (gpu: 1 alone):
  // on a MIG GPU each gets its own MIG device, so cores do not collide.
  auto a = allocations(n, prepare({ctr(1, 30000, 100), ctr(1, 30000, 100)}, mig_mode()));
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].profile, "3g.40gb");
  EXPECT_EQ(a[0].placement, (MigPlacement{0, 4}));
  EXPECT_EQ(a[1].container_index, 1);
  EXPECT_EQ(a[1].placement, (MigPlacement{4, 4}));
}

TEST(DynamicMigFit, ReservationsAndInstancesBlockTheirPlacements) {
  // A 3g exists at 0..3: a 30 GB request goes to 4..7, and an 80 GB one
  // has no free 7g placement.
  NodeDevices n = node("n", {dynamic_mig({{0, 4}})});
  auto a = allocations(n, prepare({ctr(1, 30000)}, mig_mode()));
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].placement, (MigPlacement{4, 4}));
  auto out = run(n, prepare({ctr(1, 40000)}, mig_mode()));
  ASSERT_TRUE(out.fits) << out.reason;
  out = run(n, prepare({ctr(1, 70000)}, mig_mode()));
  ASSERT_FALSE(out.fits);
  EXPECT_EQ(out.reason, "1/1 CardMigTopologyInfeasible");
  // Every slice held: nothing fits, whatever the size.
  n = node("n", {dynamic_mig({{0, 4}, {4, 4}})});
  out = run(n, prepare({ctr(1, 1000)}, mig_mode()));
  ASSERT_FALSE(out.fits);
  EXPECT_EQ(out.reason, "1/1 CardMigTopologyInfeasible");
  // The second container finds the first's pick taken.
  n = node("n", {dynamic_mig({{0, 4}})});
  out = run(n, prepare({ctr(1, 30000), ctr(1, 30000)}, mig_mode()));
  ASSERT_FALSE(out.fits);
  EXPECT_EQ(out.failed_container, 1);
}

// What the scheduler's cache does with a placed pod's entries: they hold
// their placements until removed, so the next pod is placed beside them; an
// entry for a GPU the node lacks is counted, and a placement two pods hold
// is free only once both are gone.
TEST(DynamicMigFit, PlacedPodsHoldTheirPlacementsUntilRemoved) {
  NodeDevices n = node("n", {dynamic_mig()});
  const PreparedPod pod = prepare({ctr(1, 15000)}, mig_mode());
  const auto first = allocations(n, pod);
  EXPECT_EQ(apply_mig(n, first), 0u);
  const auto second = allocations(n, pod);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].placement, (MigPlacement{2, 2}));
  EXPECT_EQ(apply_mig(n, second), 0u);
  EXPECT_EQ(apply_mig(n, first), 0u);  // a second holder of 0..1
  EXPECT_EQ(n.devices[0].mig_taken, (std::vector<MigPlacement>{{0, 2}, {2, 2}, {0, 2}}));
  EXPECT_EQ(remove_mig(n, first), 0u);
  EXPECT_EQ(allocations(n, pod)[0].placement, (MigPlacement{4, 2}));
  EXPECT_EQ(remove_mig(n, first), 0u);
  EXPECT_EQ(allocations(n, pod)[0].placement, (MigPlacement{0, 2}));
  EXPECT_EQ(remove_mig(n, first), 0u) << "removing what is not held changes nothing";
  EXPECT_EQ(n.devices[0].mig_taken, (std::vector<MigPlacement>{{2, 2}}));
  MigAllocation elsewhere = first[0];
  elsewhere.gpu_uuid = "GPU-gone";
  EXPECT_EQ(apply_mig(n, std::vector<MigAllocation>{elsewhere}), 1u);
  EXPECT_EQ(remove_mig(n, std::vector<MigAllocation>{elsewhere}), 1u);
  EXPECT_EQ(n.devices[0].mig_taken, (std::vector<MigPlacement>{{2, 2}}));
}

}  // namespace
}  // namespace hami::fit
