// DeviceState's two health sources: NVML's (set_health) and the MPS control
// daemon's (set_mps_health); a GPU is healthy only when both say so.
#include "deviceplugin/device_state.hpp"

#include <gtest/gtest.h>

namespace hami::deviceplugin {
namespace {

std::vector<Gpu> two_gpus() {
  Gpu a;
  a.index = 0;
  a.uuid = "GPU-a";
  Gpu b;
  b.index = 1;
  b.uuid = "GPU-b";
  return {a, b};
}

TEST(DeviceState, MpsDaemonDownMakesOnlyItsGpuUnhealthy) {
  DeviceState s(two_gpus());
  const uint64_t v0 = s.version();
  EXPECT_TRUE(s.set_mps_health("GPU-b", false, "MPS control daemon not answering"));
  EXPECT_GT(s.version(), v0);
  auto gpus = s.gpus();
  EXPECT_TRUE(gpus[0].healthy);
  EXPECT_FALSE(gpus[1].healthy);
  EXPECT_EQ(gpus[1].unhealthy_reason, "MPS control daemon not answering");
  // Same state again: no change for the streams.
  EXPECT_FALSE(s.set_mps_health("GPU-b", false, "still down"));
  // NVML saying healthy does not hide the daemon being down.
  s.set_health(1, true, {});
  EXPECT_FALSE(s.gpus()[1].healthy);
  EXPECT_TRUE(s.set_mps_health("GPU-b", true, {}));
  EXPECT_TRUE(s.gpus()[1].healthy);
  EXPECT_FALSE(s.set_mps_health("GPU-b", true, {}));
}

TEST(DeviceState, BothReasonsWhenNvmlAndTheDaemonFail) {
  DeviceState s(two_gpus());
  s.set_health(0, false, "NVML_ERROR_GPU_IS_LOST");
  s.set_mps_health("GPU-a", false, "MPS control daemon cannot start");
  const auto g = s.gpus()[0];
  EXPECT_FALSE(g.healthy);
  EXPECT_EQ(g.unhealthy_reason, "NVML_ERROR_GPU_IS_LOST; MPS control daemon cannot start");
  s.set_mps_health("GPU-a", true, {});
  EXPECT_EQ(s.gpus()[0].unhealthy_reason, "NVML_ERROR_GPU_IS_LOST");
}

}  // namespace
}  // namespace hami::deviceplugin
