// Static MIG devices in the fit (docs/mig.md): a MIG device registers like a
// GPU with its slice's memory, 100 cores (the slice's SMs) and mode "mig", so
// a pod is placed on one by size; nvidia.com/vgpu-mode picks MIG devices or
// whole GPUs; use-gputype can name a profile. The node: an H200 partitioned
// into a 1g.18gb and a 3g.71gb beside a time-sliced and an MPS H200.
#include <gtest/gtest.h>

#include "fit_helpers.hpp"

namespace hami::fit {
namespace {

using testing::ctr;
using testing::gpu;
using testing::node;
using testing::prepare;
using testing::run;
using testing::used;
using Uuids = std::vector<std::vector<std::string>>;

GpuDevice mig(std::string uuid, int32_t index, const char* profile, int32_t mem_mib) {
  GpuDevice d = gpu(std::move(uuid), index, mem_mib);
  d.type = std::string("NVIDIA H200 MIG ") + profile;
  d.mode = kModeMig;
  return d;
}

NodeDevices mig_node() {
  GpuDevice mps = gpu("GPU-m", 2, 143771);
  mps.mode = kModeMps;
  return node("n", {mig("MIG-small", 0, "1g.18gb", 16384), mig("MIG-big", 0, "3g.71gb", 71424),
                    gpu("GPU-t", 1, 143771), mps});
}

PodOptions mode(const char* m) {
  PodOptions o;
  o.vgpu_mode = m;
  return o;
}

TEST(MigFit, AMigPodGoesToTheSliceLargeEnough) {
  // 20000 MiB does not fit the 1g.18gb's 16384: the 3g.71gb it is.
  auto out = run(mig_node(), prepare({ctr(1, 20000)}, mode("mig")));
  ASSERT_TRUE(out.fits) << out.reason;
  EXPECT_EQ(out.uuids, (Uuids{{"MIG-big"}}));
  // Larger than any slice: no fit, for want of memory on both MIG devices;
  // the GPUs of other modes are not candidates at all.
  out = run(mig_node(), prepare({ctr(1, 80000)}, mode("mig")));
  ASSERT_FALSE(out.fits);
  EXPECT_EQ(out.reason, "2/4 CardTypeMismatch, 2/4 CardInsufficientMemory");
}

TEST(MigFit, ModeAnnotationKeepsWholeGpusAndSlicesApart) {
  // hami-core: the time-sliced GPU only (neither a MIG device nor MPS).
  auto out = run(mig_node(), prepare({ctr(1, 1000)}, mode("hami-core")));
  ASSERT_TRUE(out.fits) << out.reason;
  EXPECT_EQ(out.uuids, (Uuids{{"GPU-t"}}));
  // Without the annotation, as upstream: MIG devices and time-sliced GPUs
  // alike (never MPS), here by size.
  auto node_no_ts = mig_node();
  node_no_ts.devices[2] = used(node_no_ts.devices[2], 1, 140000, 50);
  out = run(node_no_ts, prepare({ctr(1, 20000)}));
  ASSERT_TRUE(out.fits) << out.reason;
  EXPECT_EQ(out.uuids, (Uuids{{"MIG-big"}}));
}

TEST(MigFit, AWholeSliceIsExclusive) {
  // nvidia.com/gpu: 1 alone: the webhook makes it 100 % memory and cores.
  ContainerRequest whole = ctr(1, 0, 100);
  whole.mem_percent = 100;
  NodeDevices n = mig_node();
  PodOptions o = mode("mig");
  o.use_types = {"1G.18GB"};  // use-gputype names a profile
  auto out = run(n, prepare({whole}, o));
  ASSERT_TRUE(out.fits) << out.reason;
  EXPECT_EQ(out.uuids, (Uuids{{"MIG-small"}}));
  FitScratch scratch;
  Placement placement;
  const PreparedPod pod = prepare({whole}, o);
  ASSERT_TRUE(fit_pod(n, pod, scratch, &placement).fits);
  ASSERT_EQ(placement.assignments.size(), 1u);
  EXPECT_EQ(placement.assignments[0].mem_mib, 16384);  // the whole slice
  // Once taken, nobody else lands on that slice.
  n.devices[0] = used(n.devices[0], 1, 16384, 100);
  out = run(n, prepare({ctr(1, 1000)}, o));
  ASSERT_FALSE(out.fits);
  // Two pods share a slice when their memory fits in it (the library holds
  // each to its share).
  NodeDevices shared = mig_node();
  shared.devices[0] = used(shared.devices[0], 1, 8000, 0);
  out = run(shared, prepare({ctr(1, 8000)}, o));
  ASSERT_TRUE(out.fits) << out.reason;
  EXPECT_EQ(out.uuids, (Uuids{{"MIG-small"}}));
}

}  // namespace
}  // namespace hami::fit
