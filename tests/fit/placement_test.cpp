// Which GPUs a pod gets: GPU policies, weights, filters, NUMA binding,
// several containers, init containers and sidecars.
#include <gtest/gtest.h>

#include <ostream>

#include "fit/usage.hpp"
#include "fit_helpers.hpp"

namespace hami::fit {
namespace {

using testing::ctr;
using testing::gpu;
using testing::node;
using testing::used;
using Uuids = std::vector<std::vector<std::string>>;

// A node whose GPUs are, by usage: GPU-1 idle, GPU-0 light, GPU-2 heavy.
NodeDevices mixed_node() {
  return node("n", {used(gpu("GPU-0", 0), 1, 10000, 10), gpu("GPU-1", 1),
                    used(gpu("GPU-2", 2), 3, 60000, 60)});
}

struct PolicyCase {
  const char* policy;
  NodeDevices n;
  int32_t nums;
  Uuids want;
};

// Names the row in test output instead of dumping its bytes.
void PrintTo(const PolicyCase& c, std::ostream* os) {
  *os << c.policy << " x" << c.nums;
}

class GpuPolicyChoice : public ::testing::TestWithParam<PolicyCase> {};

TEST_P(GpuPolicyChoice, PicksTheExpectedGpus) {
  const auto& c = GetParam();
  const auto out =
      testing::run(c.n, testing::prepare({ctr(c.nums)}, testing::gpu_policy(c.policy)));
  ASSERT_TRUE(out.fits) << out.reason;
  EXPECT_EQ(out.uuids, c.want);
}

NodeDevices two_numa_node() {
  // NUMA 0: GPU-0 (light), GPU-1 (idle); NUMA 1: GPU-2 (idle), GPU-3 (heavy).
  return node("n", {used(gpu("GPU-0", 0, 80000, 0), 1, 8000, 10), gpu("GPU-1", 1, 80000, 0),
                    gpu("GPU-2", 2, 80000, 1), used(gpu("GPU-3", 3, 80000, 1), 4, 40000, 50)});
}

INSTANTIATE_TEST_SUITE_P(
    Fit, GpuPolicyChoice,
    ::testing::Values(
        PolicyCase{"spread", mixed_node(), 1, {{"GPU-1"}}},
        PolicyCase{"binpack", mixed_node(), 1, {{"GPU-2"}}},
        PolicyCase{"spread", mixed_node(), 2, {{"GPU-1", "GPU-0"}}},
        PolicyCase{"binpack", mixed_node(), 2, {{"GPU-2", "GPU-0"}}},
        PolicyCase{"mutex", mixed_node(), 1, {{"GPU-1"}}},
        PolicyCase{"topology-aware", mixed_node(), 1, {{"GPU-1"}}},
        // Equal scores: the higher NUMA node first (upstream's tie-break), then
        // the lower index (ours; upstream's sort left it to chance).
        PolicyCase{"spread", two_numa_node(), 1, {{"GPU-2"}}},
        PolicyCase{"spread", node("n", {gpu("GPU-0", 0), gpu("GPU-1", 1)}), 1, {{"GPU-0"}}},
        PolicyCase{"binpack", node("n", {gpu("GPU-0", 0), gpu("GPU-1", 1)}), 1, {{"GPU-0"}}},
        // Chains: numa first groups by NUMA (higher first), then the next key.
        PolicyCase{"numa,binpack", two_numa_node(), 1, {{"GPU-3"}}},
        PolicyCase{"numa,spread", two_numa_node(), 1, {{"GPU-2"}}},
        PolicyCase{"binpack,numa", two_numa_node(), 1, {{"GPU-3"}}},
        PolicyCase{"numa", two_numa_node(), 2, {{"GPU-2", "GPU-3"}}}),
    [](const auto& tp) {
      std::string n = std::string(tp.param.policy) + "_" + std::to_string(tp.index);
      for (char& ch : n)
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return n;
    });

TEST(Placement, WeightsChangeTheBinpackChoice) {
  // GPU-0: 1 of 10 slots, half its memory → 10·(0.1 + 0.5) = 6 with 1/1/1.
  // GPU-1: 5 of 10 slots, no memory → 10·0.5 = 5; with slot=3: 15 against 8.
  const auto n = node("n", {used(gpu("GPU-0", 0), 1, 40000, 0), used(gpu("GPU-1", 1), 5, 0, 0)});
  PodOptions o = testing::gpu_policy("binpack");
  EXPECT_EQ(testing::run(n, testing::prepare({ctr(1)}, o)).uuids, Uuids{{"GPU-0"}});
  o.weights = *parse_scoring_weights("slot=3,core=1,memory=1");
  EXPECT_EQ(testing::run(n, testing::prepare({ctr(1)}, o)).uuids, Uuids{{"GPU-1"}});
  o.weights = *parse_scoring_weights("slot=0,core=0,memory=1");
  EXPECT_EQ(testing::run(n, testing::prepare({ctr(1)}, o)).uuids, Uuids{{"GPU-0"}});
}

TEST(Placement, TypeAndUuidFiltersPickTheAllowedGpu) {
  auto n = node("n", {gpu("GPU-0", 0), gpu("GPU-1", 1), gpu("GPU-2", 2)});
  n.devices[1].type = "NVIDIA A100-SXM4-80GB";
  PodOptions o;
  o.use_types = {"A100"};
  EXPECT_EQ(testing::run(n, testing::prepare({ctr(1)}, o)).uuids, Uuids{{"GPU-1"}});
  o = {};
  o.nouse_types = {"H200"};
  EXPECT_EQ(testing::run(n, testing::prepare({ctr(1)}, o)).uuids, Uuids{{"GPU-1"}});
  o = {};
  o.use_uuids = {"GPU-2", "GPU-9"};
  EXPECT_EQ(testing::run(n, testing::prepare({ctr(1)}, o)).uuids, Uuids{{"GPU-2"}});
  o = {};
  o.nouse_uuids = {"GPU-0", "GPU-1"};
  EXPECT_EQ(testing::run(n, testing::prepare({ctr(1)}, o)).uuids, Uuids{{"GPU-2"}});
  o = {};
  o.vgpu_mode = "hami-core";
  n.devices[0].mode = "mig";
  EXPECT_EQ(testing::run(n, testing::prepare({ctr(2)}, o)).uuids, (Uuids{{"GPU-1", "GPU-2"}}));
}

// A node with one GPU of each mode: every pod lands on the GPU of its own
// mode, and the two modes never share a GPU however many pods come.
TEST(Placement, SharingModesNeverMixOnOneGpu) {
  NodeDevices n{"n", {gpu("GPU-ts", 0), gpu("GPU-mps", 1)}};
  n.devices[1].mode = "mps";
  PodOptions mps;
  mps.vgpu_mode = "mps";
  PodOptions timeslice;
  timeslice.vgpu_mode = "hami-core";
  const auto mps_pod = testing::prepare({ctr(1, 1000, 10)}, mps);
  const auto plain_pod = testing::prepare({ctr(1, 1000, 10)});
  const auto ts_pod = testing::prepare({ctr(1, 1000, 10)}, timeslice);
  std::vector<std::string> on_mps;
  std::vector<std::string> on_ts;
  for (int k = 0; k < 12; ++k) {
    const PreparedPod& pod = k % 3 == 0 ? mps_pod : k % 3 == 1 ? plain_pod : ts_pod;
    auto devices = place_pod(n, pod);
    if (!devices) {
      // Only once a GPU's ten slots are gone, and then for want of slots.
      EXPECT_GE(k, 10) << devices.error().message;
      continue;
    }
    const std::string uuid = (*devices)[0][0].uuid;
    (&pod == &mps_pod ? on_mps : on_ts).push_back(uuid);
    apply_charges(n, pod_charges(*devices, {}));
  }
  EXPECT_EQ(on_mps, std::vector<std::string>(4, "GPU-mps"));
  EXPECT_EQ(on_ts, std::vector<std::string>(8, "GPU-ts"));
  // The MPS GPU has free slots and memory, still a plain pod does not go there.
  n.devices[0].healthy = false;
  auto r = place_pod(n, plain_pod);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("CardTypeMismatch"), std::string::npos) << r.error().message;
  EXPECT_EQ(testing::run(n, mps_pod).uuids, (std::vector<std::vector<std::string>>{{"GPU-mps"}}));
}

TEST(Placement, MpsContainerAsksForOneGpu) {
  PodOptions mps;
  mps.vgpu_mode = "mps";
  auto p = PreparedPod::make(PodRequest{{ctr(2)}}, mps);
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("a container on an MPS GPU takes exactly one GPU"),
            std::string::npos)
      << p.error().message;
  EXPECT_TRUE(PreparedPod::make(PodRequest{{ctr(1), ctr(1)}}, mps));
  EXPECT_TRUE(PreparedPod::make(PodRequest{{ctr(2)}}, {}));
}

TEST(Placement, SpreadFillsTheHigherNumaNodeFirst) {
  // docs/fitting.md's example: 8 idle GPUs on 2 NUMA nodes, one-GPU pods.
  NodeDevices n{"n", {}};
  for (int i = 0; i < 8; ++i)
    n.devices.push_back(gpu("GPU-" + std::to_string(i), i, 80000, i / 4));
  const auto pod = testing::prepare({ctr(1)});
  std::vector<std::string> got;
  for (int k = 0; k < 5; ++k) {
    auto devices = place_pod(n, pod);
    ASSERT_TRUE(devices);
    got.push_back((*devices)[0][0].uuid);
    apply_charges(n, pod_charges(*devices, {}));
  }
  EXPECT_EQ(got, (std::vector<std::string>{"GPU-4", "GPU-5", "GPU-6", "GPU-7", "GPU-0"}));
}

TEST(Placement, TypeMatchingIsCaseInsensitive) {
  auto n = node("n", {gpu("GPU-0", 0)});
  n.devices[0].type = "nvidia-Tesla T4";
  PodOptions o;
  o.use_types = {"tesla t4"};
  auto req = ctr(1);
  req.type = "Nvidia";
  EXPECT_TRUE(testing::run(n, testing::prepare({req}, o)).fits);
}

TEST(Placement, NumaBindTakesOneNumaNode) {
  // Spread with numa-bind walks the higher NUMA node first: NUMA 1 has only
  // GPU-3 usable (GPU-2 is cordoned), so the pair comes from NUMA 0.
  auto n = node("n", {gpu("GPU-0", 0, 80000, 0), gpu("GPU-1", 1, 80000, 0),
                      gpu("GPU-2", 2, 80000, 1), gpu("GPU-3", 3, 80000, 1)});
  n.devices[2].cordoned = true;
  PodOptions o;
  o.numa_bind = true;
  EXPECT_EQ(testing::run(n, testing::prepare({ctr(2)}, o)).uuids, (Uuids{{"GPU-0", "GPU-1"}}));
  // Without numa-bind the same request straddles the NUMA nodes.
  o.numa_bind = false;
  EXPECT_EQ(testing::run(n, testing::prepare({ctr(2)}, o)).uuids, (Uuids{{"GPU-3", "GPU-0"}}));
  // Binpack with numa-bind starts from the lowest NUMA node.
  n.devices[2].cordoned = false;
  o = testing::gpu_policy("binpack");
  o.numa_bind = true;
  EXPECT_EQ(testing::run(n, testing::prepare({ctr(2)}, o)).uuids, (Uuids{{"GPU-0", "GPU-1"}}));
  // A chain without numa gets it as its first key.
  o = testing::gpu_policy("binpack,spread");
  o.numa_bind = true;
  EXPECT_EQ(testing::run(n, testing::prepare({ctr(2)}, o)).uuids, (Uuids{{"GPU-2", "GPU-3"}}));
}

TEST(Placement, AssignmentsCarryMemoryAndCores) {
  const auto n = node("n", {gpu("GPU-0", 0, 81920)});
  auto c = ctr(1, 0, 150);
  c.mem_percent = 25;
  const auto pod = testing::prepare({c});
  auto devices = place_pod(n, pod);
  ASSERT_TRUE(devices) << devices.error().message;
  ASSERT_EQ(devices->size(), 1u);
  EXPECT_EQ((*devices)[0], (ContainerDevices{{"GPU-0", "NVIDIA", 20480, 100}}));
  // gpumem wins over the percentage when both are given.
  c.mem_mib = 3000;
  devices = place_pod(n, testing::prepare({c}));
  EXPECT_EQ((*devices)[0][0].mem_mib, 3000);
}

TEST(Placement, ContainersAddUpOnTheNode) {
  const auto n = node("n", {gpu("GPU-0", 0, 10000), gpu("GPU-1", 1, 10000)});
  // Spread: the second container sees the first one's usage and moves on.
  EXPECT_EQ(testing::run(n, testing::prepare({ctr(1, 4000), ctr(1, 4000)})).uuids,
            (Uuids{{"GPU-0"}, {"GPU-1"}}));
  // Binpack: it stacks onto the GPU the first one made busiest.
  EXPECT_EQ(testing::run(
                n, testing::prepare({ctr(1, 4000), ctr(1, 4000)}, testing::gpu_policy("binpack")))
                .uuids,
            (Uuids{{"GPU-0"}, {"GPU-0"}}));
  // Three of 4000 MiB cannot all share one 10000 MiB GPU under binpack.
  EXPECT_EQ(testing::run(n, testing::prepare({ctr(1, 4000), ctr(1, 4000), ctr(1, 4000)},
                                             testing::gpu_policy("binpack")))
                .uuids,
            (Uuids{{"GPU-0"}, {"GPU-0"}, {"GPU-1"}}));
  // Exclusive containers each take a whole GPU's cores, so a third finds
  // none left (the core check comes before the exclusive one).
  const auto out =
      testing::run(n, testing::prepare({ctr(1, 100, 100), ctr(1, 100, 100), ctr(1, 100, 100)}));
  EXPECT_FALSE(out.fits);
  EXPECT_EQ(out.failed_container, 2);
  EXPECT_EQ(out.reason, "2/2 CardInsufficientCore");
}

TEST(Placement, InitContainersCountAtTheirPeakOnly) {
  const auto n = node("n", {gpu("GPU-0", 0, 10000)});
  using K = ContainerKind;
  // Init 8000 then app 6000: never at the same time, so it fits.
  auto out = testing::run(n, testing::prepare({ctr(1, 8000, 0, K::kInit), ctr(1, 6000)}));
  EXPECT_TRUE(out.fits) << out.reason;
  EXPECT_EQ(out.uuids, (Uuids{{"GPU-0"}, {"GPU-0"}}));
  // Two init containers of 8000 each run one after the other.
  out = testing::run(
      n, testing::prepare({ctr(1, 8000, 0, K::kInit), ctr(1, 8000, 0, K::kInit), ctr(1, 2000)}));
  EXPECT_TRUE(out.fits) << out.reason;
  // Two app containers of 6000 run together: the second does not fit.
  out = testing::run(n, testing::prepare({ctr(1, 6000), ctr(1, 6000)}));
  EXPECT_FALSE(out.fits);
  EXPECT_EQ(out.failed_container, 1);
  EXPECT_EQ(out.reason, "1/1 CardInsufficientMemory");
  // A sidecar keeps running: an init container after it sees its memory.
  out =
      testing::run(n, testing::prepare({ctr(1, 3000, 0, K::kSidecar), ctr(1, 8000, 0, K::kInit)}));
  EXPECT_FALSE(out.fits);
  EXPECT_EQ(out.failed_container, 1);
  // ... and so do the app containers.
  out = testing::run(n, testing::prepare({ctr(1, 3000, 0, K::kSidecar), ctr(1, 7001)}));
  EXPECT_FALSE(out.fits);
  // An init container that does not fit alone fails the pod.
  out = testing::run(n, testing::prepare({ctr(1, 10001, 0, K::kInit), ctr(1, 1)}));
  EXPECT_FALSE(out.fits);
  EXPECT_EQ(out.failed_container, 0);
}

TEST(Placement, EmptySlotsAndEmptyPods) {
  const auto n = node("n", {gpu("GPU-0", 0)});
  auto out =
      testing::run(n, testing::prepare({ctr(0, 0, 0, ContainerKind::kInit), ctr(1), ctr(0)}));
  EXPECT_TRUE(out.fits);
  EXPECT_EQ(out.uuids, (Uuids{{}, {"GPU-0"}, {}}));
  const auto none = testing::prepare({ctr(0), ctr(0)});
  EXPECT_TRUE(none.empty());
  EXPECT_TRUE(testing::run(node("no-gpus", {}), none).fits);
}

TEST(Placement, PrepareRefusesBadRequests) {
  auto bad = [](ContainerRequest c) { return !PreparedPod::make(PodRequest{{c}}, {}).ok(); };
  EXPECT_TRUE(bad(ctr(-1)));
  EXPECT_TRUE(bad(ctr(1, -5)));
  EXPECT_TRUE(bad(ctr(1, 0, -1)));
  auto c = ctr(1);
  c.mem_percent = 0;
  EXPECT_TRUE(bad(c));
  c.mem_percent = 102;
  EXPECT_TRUE(bad(c));
  c = ctr(1);
  c.type = "";
  EXPECT_TRUE(bad(c));
  EXPECT_FALSE(bad(ctr(1)));
  // A container asking for nothing is not checked further.
  EXPECT_FALSE(bad(ctr(0, -5)));
}

TEST(Placement, ScratchIsReusableAcrossNodesAndPods) {
  FitScratch scratch;
  Placement placement;
  const auto a = testing::prepare({ctr(1)}, [] {
    PodOptions o;
    o.use_types = {"A100"};
    return o;
  }());
  const auto b = testing::prepare({ctr(1)});
  const auto h200 = node("h", {gpu("GPU-0", 0)});
  auto a100 = node("a", {gpu("GPU-A", 0)});
  a100.devices[0].type = "NVIDIA A100";
  // The verdict cache must follow the pod: a's "H200 is not allowed" must not
  // leak into b.
  EXPECT_FALSE(fit_pod(h200, a, scratch, &placement).fits);
  EXPECT_TRUE(fit_pod(a100, a, scratch, &placement).fits);
  EXPECT_TRUE(fit_pod(h200, b, scratch, &placement).fits);
  EXPECT_FALSE(fit_pod(h200, a, scratch, &placement).fits);
  EXPECT_TRUE(placement.assignments.empty());
}

TEST(Placement, NodeScoreIsUsageBeforeThePod) {
  const auto n = node("n", {used(gpu("GPU-0", 0, 1000), 5, 500, 50)});
  FitScratch scratch;
  Placement placement;
  const NodeFit f = fit_pod(n, testing::prepare({ctr(1, 100)}), scratch, &placement);
  ASSERT_TRUE(f.fits);
  EXPECT_FLOAT_EQ(f.score, 10.0f * (0.5f + 0.5f + 0.5f));
}

}  // namespace
}  // namespace hami::fit
