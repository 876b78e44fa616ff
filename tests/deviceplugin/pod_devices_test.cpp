// The scheduler → device plugin annotation codec (hami.io/vgpu-devices-to-allocate)
// and the node lock value, on the exact strings upstream writes.
#include "deviceplugin/pod_devices.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

#include "deviceplugin/node_lock.hpp"
#include "deviceplugin/pending_pod.hpp"

namespace hami::deviceplugin {
namespace {

using ::testing::HasSubstr;

TEST(PodDevices, DecodesUpstreamExampleWithEmptyInitSlot) {
  // hami-k8s.md §3.6: an init container without GPU, two app containers.
  auto pd = decode_pod_devices(";GPU-a,NVIDIA,2500,25:;GPU-b,NVIDIA,2500,25:;");
  ASSERT_TRUE(pd) << pd.error().message;
  ASSERT_EQ(pd->size(), 3u);
  EXPECT_TRUE((*pd)[0].empty());
  EXPECT_EQ((*pd)[1], (ContainerDevices{{"GPU-a", "NVIDIA", 2500, 25}}));
  EXPECT_EQ((*pd)[2], (ContainerDevices{{"GPU-b", "NVIDIA", 2500, 25}}));
}

TEST(PodDevices, DecodesSeveralDevicesPerContainer) {
  auto pd = decode_pod_devices("GPU-a,NVIDIA,1000,10:GPU-b,NVIDIA-Tesla T4,2000,20:;");
  ASSERT_TRUE(pd) << pd.error().message;
  ASSERT_EQ(pd->size(), 1u);
  EXPECT_EQ((*pd)[0], (ContainerDevices{{"GPU-a", "NVIDIA", 1000, 10},
                                        {"GPU-b", "NVIDIA-Tesla T4", 2000, 20}}));
}

TEST(PodDevices, EncodeIsTheInverseAndMatchesUpstreamBytes) {
  const std::string text = ";GPU-a,NVIDIA,2500,25:;GPU-b,NVIDIA,2500,25:GPU-c,NVIDIA,1,0:;";
  auto pd = decode_pod_devices(text);
  ASSERT_TRUE(pd) << pd.error().message;
  EXPECT_EQ(encode_pod_devices(*pd), text);
  // Emptied after Allocate: every slot kept, no devices left.
  PodDevices served = *pd;
  for (auto& c : served)
    c.clear();
  EXPECT_EQ(encode_pod_devices(served), ";;;");
  EXPECT_FALSE(any_devices(served));
  EXPECT_TRUE(any_devices(*pd));
}

TEST(PodDevices, EmptyAndBlankValues) {
  auto empty = decode_pod_devices("");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());
  auto one = decode_pod_devices(" GPU-a,NVIDIA,1,2:;\n");
  ASSERT_TRUE(one) << one.error().message;
  EXPECT_EQ(one->size(), 1u);
  // A final entry without its ';' is still an entry.
  auto open = decode_pod_devices(";GPU-a,NVIDIA,1,2:");
  ASSERT_TRUE(open) << open.error().message;
  EXPECT_EQ(open->size(), 2u);
}

TEST(PodDevices, BadNumbersAreErrorsNotZero) {
  auto r = decode_pod_devices(";GPU-a,NVIDIA,lots,25:;");
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message, HasSubstr("container 1, device 0"));
  EXPECT_THAT(r.error().message, HasSubstr("memory (MiB) 'lots' is not a whole number"));
  EXPECT_FALSE(decode_pod_devices("GPU-a,NVIDIA,100,-1:;"));
  EXPECT_FALSE(decode_pod_devices("GPU-a,NVIDIA,99999999999,1:;"));
  EXPECT_FALSE(decode_pod_devices("GPU-a,NVIDIA,1 ,1:;"));
}

TEST(PodDevices, WrongFieldCountOrEmptyUuid) {
  auto few = decode_pod_devices("GPU-a,NVIDIA,100:;");
  ASSERT_FALSE(few);
  EXPECT_THAT(few.error().message, HasSubstr("(4 fields), found 3"));
  auto many = decode_pod_devices("GPU-a,NVIDIA,100,1,x:;");
  ASSERT_FALSE(many);
  EXPECT_THAT(many.error().message, HasSubstr("found 5"));
  auto nouuid = decode_pod_devices(",NVIDIA,100,1:;");
  ASSERT_FALSE(nouuid);
  EXPECT_THAT(nouuid.error().message, HasSubstr("UUID is empty"));
}

TEST(PodDevices, RefusesOversizedValue) {
  const std::string big(kMaxPodDevicesText + 1, ';');
  auto r = decode_pod_devices(big);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message, HasSubstr("more than"));
}

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

TEST(NodeLock, ParsesUpstreamValue) {
  auto l = parse_node_lock("2024-05-01T10:00:00Z,default,my-pod");
  ASSERT_TRUE(l) << l.error().message;
  EXPECT_EQ(l->ns, "default");
  EXPECT_EQ(l->name, "my-pod");
  EXPECT_TRUE(l->names_pod());
  EXPECT_TRUE(l->held_by("default", "my-pod"));
  EXPECT_FALSE(l->held_by("other", "my-pod"));
  EXPECT_EQ(std::chrono::system_clock::to_time_t(l->time), 1714557600);
}

TEST(NodeLock, LegacyTimeOnlyNamesNoPod) {
  auto l = parse_node_lock("2024-05-01T10:00:00+02:00");
  ASSERT_TRUE(l) << l.error().message;
  EXPECT_FALSE(l->names_pod());
}

TEST(NodeLock, RejectsMalformedValues) {
  EXPECT_FALSE(parse_node_lock(""));
  EXPECT_FALSE(parse_node_lock("yesterday,default,p"));
  EXPECT_FALSE(parse_node_lock("2024-05-01T10:00:00Z,default"));
  EXPECT_FALSE(parse_node_lock("2024-05-01T10:00:00Z,,p"));
  EXPECT_FALSE(parse_node_lock("2024-05-01T10:00:00Z,ns,a,b"));
}

TEST(NodeLock, FormatRoundTrips) {
  const auto t = std::chrono::system_clock::from_time_t(1714557600);
  const std::string v = format_node_lock(t, "ns", "p");
  EXPECT_EQ(v, "2024-05-01T10:00:00Z,ns,p");
  auto l = parse_node_lock(v);
  ASSERT_TRUE(l);
  EXPECT_TRUE(l->held_by("ns", "p"));
}

}  // namespace
}  // namespace hami::deviceplugin
