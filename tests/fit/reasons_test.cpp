// Every rejection reason of upstream's NVIDIA Fit, one GPU (or node) state
// per row, with the exact text upstream would put in FailedNodes.
#include <gtest/gtest.h>

#include <ostream>

#include "fit_helpers.hpp"

namespace hami::fit {
namespace {

using testing::ctr;
using testing::gpu;
using testing::node;
using testing::used;

struct ReasonCase {
  const char* name;
  std::vector<GpuDevice> devices;
  ContainerRequest request;
  PodOptions options;
  const char* want;
};

// Names the row in test output instead of dumping its bytes.
void PrintTo(const ReasonCase& c, std::ostream* os) {
  *os << c.name;
}

PodOptions with(void (*set)(PodOptions&)) {
  PodOptions o;
  set(o);
  return o;
}

GpuDevice unhealthy(GpuDevice d) {
  d.healthy = false;
  return d;
}
GpuDevice cordoned(GpuDevice d) {
  d.cordoned = true;
  return d;
}
GpuDevice mode(GpuDevice d, const char* m) {
  d.mode = m;
  return d;
}
GpuDevice split(GpuDevice d, int32_t n) {
  d.split_count = n;
  return d;
}
GpuDevice typed(GpuDevice d, const char* t) {
  d.type = t;
  return d;
}

std::vector<ReasonCase> reason_cases() {
  return {
      {"not healthy", {unhealthy(gpu("GPU-0", 0))}, ctr(1), {}, "1/1 CardNotHealth"},
      {"cordoned", {cordoned(gpu("GPU-0", 0))}, ctr(1), {}, "1/1 CardCordoned"},
      {"health is checked before cordon",
       {cordoned(unhealthy(gpu("GPU-0", 0)))},
       ctr(1),
       {},
       "1/1 CardNotHealth"},
      {"use-gputype",
       {gpu("GPU-0", 0)},
       ctr(1),
       with([](PodOptions& o) { o.use_types = {"A100"}; }),
       "1/1 CardTypeMismatch"},
      {"nouse-gputype",
       {gpu("GPU-0", 0)},
       ctr(1),
       with([](PodOptions& o) { o.nouse_types = {"H200"}; }),
       "1/1 CardTypeMismatch"},
      {"vgpu-mode",
       {mode(gpu("GPU-0", 0), "hami-core")},
       ctr(1),
       with([](PodOptions& o) { o.vgpu_mode = "mig"; }),
       "1/1 CardTypeMismatch"},
      {"an MPS GPU refuses a pod without vgpu-mode",
       {mode(gpu("GPU-0", 0), "mps")},
       ctr(1),
       {},
       "1/1 CardTypeMismatch"},
      {"an MPS GPU refuses a time-sliced pod",
       {mode(gpu("GPU-0", 0), "mps")},
       ctr(1),
       with([](PodOptions& o) { o.vgpu_mode = "hami-core"; }),
       "1/1 CardTypeMismatch"},
      {"a time-sliced GPU refuses an MPS pod",
       {mode(gpu("GPU-0", 0), "hami-core")},
       ctr(1),
       with([](PodOptions& o) { o.vgpu_mode = "mps"; }),
       "1/1 CardTypeMismatch"},
      {"an MPS GPU takes an MPS pod",
       {mode(gpu("GPU-0", 0), "mps")},
       ctr(1),
       with([](PodOptions& o) { o.vgpu_mode = "mps"; }),
       ""},
      {"use-gpuuuid",
       {gpu("GPU-0", 0)},
       ctr(1),
       with([](PodOptions& o) { o.use_uuids = {"GPU-9"}; }),
       "1/1 CardUuidMismatch"},
      {"nouse-gpuuuid",
       {gpu("GPU-0", 0)},
       ctr(1),
       with([](PodOptions& o) { o.nouse_uuids = {"GPU-0"}; }),
       "1/1 CardUuidMismatch"},
      {"type is checked before uuid",
       {gpu("GPU-0", 0)},
       ctr(1),
       with([](PodOptions& o) {
         o.use_types = {"A100"};
         o.use_uuids = {"GPU-9"};
       }),
       "1/1 CardTypeMismatch"},
      {"split slots exhausted",
       {used(split(gpu("GPU-0", 0), 2), 2, 0, 0)},
       ctr(1),
       {},
       "1/1 CardTimeSlicingExhausted"},
      {"mutex refuses a used GPU",
       {used(gpu("GPU-0", 0), 1, 100, 0)},
       ctr(1),
       testing::gpu_policy("mutex"),
       "1/1 ExclusiveDeviceAllocateConflict"},
      {"mutex in a chain refuses a used GPU",
       {used(gpu("GPU-0", 0), 1, 100, 0)},
       ctr(1),
       testing::gpu_policy("binpack,mutex"),
       "1/1 ExclusiveDeviceAllocateConflict"},
      {"memory",
       {used(gpu("GPU-0", 0, 10000), 1, 9000, 0)},
       ctr(1, 1001),
       {},
       "1/1 CardInsufficientMemory"},
      {"memory exactly fits", {used(gpu("GPU-0", 0, 10000), 1, 9000, 0)}, ctr(1, 1000), {}, ""},
      {"percentage memory",
       {used(gpu("GPU-0", 0, 10000), 1, 5001, 0)},
       [] {
         auto c = ctr(1, 0);
         c.mem_percent = 50;
         return c;
       }(),
       {},
       "1/1 CardInsufficientMemory"},
      {"cores",
       {used(gpu("GPU-0", 0), 1, 0, 80)},
       ctr(1, 1000, 30),
       {},
       "1/1 CardInsufficientCore"},
      {"memory is checked before cores",
       {used(gpu("GPU-0", 0, 1000), 1, 1000, 100)},
       ctr(1, 1, 1),
       {},
       "1/1 CardInsufficientMemory"},
      {"exclusive needs an empty GPU",
       {used(gpu("GPU-0", 0), 1, 0, 0)},
       ctr(1, 1000, 100),
       {},
       "1/1 ExclusiveDeviceAllocateConflict"},
      {"cores over 100 are clamped, so still exclusive",
       {used(gpu("GPU-0", 0), 1, 0, 0)},
       ctr(1, 1000, 250),
       {},
       "1/1 ExclusiveDeviceAllocateConflict"},
      {"a 0-core request cannot land on a fully booked GPU",
       {used(gpu("GPU-0", 0), 1, 0, 100)},
       ctr(1, 1000, 0),
       {},
       "1/1 CardComputeUnitsExhausted"},
      {"fewer good GPUs than asked",
       {gpu("GPU-0", 0), unhealthy(gpu("GPU-1", 1))},
       ctr(2),
       {},
       "1/2 CardNotHealth, 1/2 AllocatedCardsInsufficientRequest"},
      {"more GPUs than the node has",
       {gpu("GPU-0", 0), gpu("GPU-1", 1)},
       ctr(3),
       {},
       "NodeInsufficientDevice"},
      {"one container never takes two slices of one GPU",
       {gpu("GPU-0", 0)},
       ctr(2),
       {},
       "NodeInsufficientDevice"},
      {"numa-bind restarts on another NUMA node",
       {gpu("GPU-0", 0, 80000, 0), gpu("GPU-1", 1, 80000, 1)},
       ctr(2),
       with([](PodOptions& o) { o.numa_bind = true; }),
       "1/2 NumaNotFit, 1/2 AllocatedCardsInsufficientRequest"},
      {"other vendors' GPUs are not counted",
       {typed(gpu("MI-0", 0), "AMD-MI300X"), unhealthy(gpu("GPU-1", 1))},
       ctr(1),
       {},
       "1/1 CardNotHealth"},
      {"a node with no GPU of the vendor",
       {typed(gpu("MI-0", 0), "AMD-MI300X")},
       ctr(1),
       {},
       "NodeInsufficientDevice"},
      {"several reasons in one report",
       {unhealthy(gpu("GPU-0", 0)), cordoned(gpu("GPU-1", 1)),
        used(gpu("GPU-2", 2, 1000), 1, 900, 0), used(gpu("GPU-3", 3, 1000), 1, 900, 0)},
       ctr(1, 500),
       {},
       "1/4 CardNotHealth, 1/4 CardCordoned, 2/4 CardInsufficientMemory"},
  };
}

class Reasons : public ::testing::TestWithParam<ReasonCase> {};

TEST_P(Reasons, ReportedAsUpstream) {
  const ReasonCase& c = GetParam();
  const auto pod = testing::prepare({c.request}, c.options);
  const auto out = testing::run(node("n", c.devices), pod);
  EXPECT_EQ(out.fits, std::string(c.want).empty()) << out.reason;
  EXPECT_EQ(out.reason, c.want);
}

INSTANTIATE_TEST_SUITE_P(Fit, Reasons, ::testing::ValuesIn(reason_cases()), [](const auto& tp) {
  std::string n = tp.param.name;
  for (char& ch : n)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
});

TEST(Reasons, NamesAreUpstreams) {
  EXPECT_STREQ(reason_name(Reason::kCardNotHealth), "CardNotHealth");
  EXPECT_STREQ(reason_name(Reason::kCardUuidMismatch), "CardUuidMismatch");
  EXPECT_STREQ(reason_name(Reason::kCardComputeUnitsExhausted), "CardComputeUnitsExhausted");
  EXPECT_STREQ(reason_name(Reason::kAllocatedCardsInsufficientRequest),
               "AllocatedCardsInsufficientRequest");
  for (size_t i = 0; i < kReasonCount; ++i)
    EXPECT_STRNE(reason_name(static_cast<Reason>(i)), "Unknown") << i;
}

TEST(Reasons, OnlyTheFailingContainerReports) {
  // Container 0 passes over an unhealthy GPU on its way; container 1 then
  // finds no memory. Only container 1's reasons are reported.
  const auto pod = testing::prepare({ctr(1, 6000), ctr(1, 6000)});
  const auto out =
      testing::run(node("n", {unhealthy(gpu("GPU-0", 0, 10000)), gpu("GPU-1", 1, 10000)}), pod);
  EXPECT_FALSE(out.fits);
  EXPECT_EQ(out.failed_container, 1);
  EXPECT_EQ(out.reason, "1/2 CardNotHealth, 1/2 CardInsufficientMemory");
}

}  // namespace
}  // namespace hami::fit
