// What the device plugin adds to the scheduler → device plugin annotation codec
// (hami.io/vgpu-devices-to-allocate), on the exact strings upstream writes.
#include "deviceplugin/pod_devices.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

#include "deviceplugin/pending_pod.hpp"

namespace hami::deviceplugin {
namespace {

using ::testing::HasSubstr;

// The codec itself is tested with src/protocol (tests/protocol/device_codec_test.cpp).

TEST(PodDevices, NthPendingContainerSkipsEmptySlots) {
  auto pd = decode_pod_devices(";GPU-a,N,1,1:;;GPU-b,N,1,1:;");
  ASSERT_TRUE(pd);
  EXPECT_EQ(pd->size(), 4u);
  EXPECT_EQ(nth_pending_container(*pd, 0), 1);
  EXPECT_EQ(nth_pending_container(*pd, 1), 3);
  EXPECT_EQ(nth_pending_container(*pd, 2), -1);
  (*pd)[1].clear();
  EXPECT_EQ(nth_pending_container(*pd, 0), 3);
}

}  // namespace
}  // namespace hami::deviceplugin
