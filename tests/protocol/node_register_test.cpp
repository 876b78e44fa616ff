// The node registration JSON (byte-compatible with upstream's
// MarshalNodeDevices) and what a GPU registers as.
#include "protocol/node_register.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hami::protocol {
namespace {

using ::testing::HasSubstr;

TEST(NodeRegister, EncodesUpstreamFieldOrderAndOmitempty) {
  std::vector<NodeDevice> d = {
      {"GPU-a", 0, 10, 81920, 100, "NVIDIA-H100", 0, "hami-core", true},
      {"GPU-b", 1, 10, 32768, 100, "NVIDIA-Tesla V100-PCIE-32GB", 1, "hami-core", false}};
  EXPECT_EQ(encode_node_devices(d),
            R"([{"id":"GPU-a","count":10,"devmem":81920,"devcore":100,"type":"NVIDIA-H100",)"
            R"("mode":"hami-core","health":true},)"
            R"({"id":"GPU-b","index":1,"count":10,"devmem":32768,"devcore":100,)"
            R"("type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,"mode":"hami-core"}])");
  EXPECT_EQ(encode_node_devices({}), "[]");
}

TEST(NodeRegister, DecodeRoundTripsAndReadsUpstreamText) {
  std::vector<NodeDevice> d = {{"GPU-a", 2, 10, 1000, 150, "NVIDIA A30", 1, "hami-core", true}};
  auto back = decode_node_devices(encode_node_devices(d));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, d);
  // Upstream's registration JSON, with a field we do not model.
  auto up = decode_node_devices(
      R"([{"id":"GPU-x","index":1,"count":10,"devmem":32768,"devcore":100,)"
      R"("type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,"mode":"hami-core","health":true,)"
      R"("migProfiles":[]}])");
  ASSERT_TRUE(up) << up.error().message;
  EXPECT_EQ((*up)[0].devmem, 32768);
  EXPECT_TRUE((*up)[0].health);
}

TEST(NodeRegister, DecodeErrorsSayWhere) {
  EXPECT_THAT(decode_node_devices("GPU-a,10,100,100,NVIDIA,0,true:").error().message,
              HasSubstr("not valid JSON"));
  EXPECT_THAT(decode_node_devices("{}").error().message, HasSubstr("not a JSON array"));
  EXPECT_THAT(decode_node_devices(R"([{"id":"a","count":"10"}])").error().message,
              HasSubstr("device 0.count: expected a whole number"));
  EXPECT_THAT(decode_node_devices(R"([{"count":1}])").error().message, HasSubstr("no id"));
  EXPECT_THAT(decode_node_devices(R"([{"id":"a","devmem":99999999999}])").error().message,
              HasSubstr("out of range"));
}

TEST(NodeRegister, DeviceTypeFollowsUpstreamPrefixRule) {
  EXPECT_EQ(device_type("Tesla T4"), "NVIDIA-Tesla T4");
  EXPECT_EQ(device_type("NVIDIA A30"), "NVIDIA A30");
  EXPECT_EQ(device_type("NVIDIA-H100"), "NVIDIA-H100");
}

}  // namespace
}  // namespace hami::protocol
