// The allocation annotation codec: upstream's examples, round trips, and a
// clear error for every malformed shape.
#include <gtest/gtest.h>

#include "protocol/device_codec.hpp"

namespace hami::protocol {
namespace {

TEST(Codec, UpstreamExample) {
  const std::string text = ";GPU-a,NVIDIA,2500,25:;GPU-b,NVIDIA,2500,25:;";
  auto pd = decode_pod_devices(text);
  ASSERT_TRUE(pd) << pd.error().message;
  const PodDevices want = {{}, {{"GPU-a", "NVIDIA", 2500, 25}}, {{"GPU-b", "NVIDIA", 2500, 25}}};
  EXPECT_EQ(*pd, want);
  EXPECT_EQ(*encode_pod_devices(want), text);
}

TEST(Codec, RoundTrips) {
  const std::vector<PodDevices> cases = {
      {},
      {{}},
      {{}, {}, {}},
      {{{"GPU-a", "NVIDIA", 0, 0}}},
      {{{"GPU-a", "NVIDIA", 1000, 30}, {"GPU-b", "NVIDIA", 1000, 30}}, {}},
      {{{"GPU-a[1-0]", "NVIDIA", 2147483647, 100}}},
  };
  for (const auto& pd : cases) {
    auto text = encode_pod_devices(pd);
    ASSERT_TRUE(text);
    auto back = decode_pod_devices(*text);
    ASSERT_TRUE(back) << *text << ": " << back.error().message;
    EXPECT_EQ(*back, pd) << *text;
  }
}

TEST(Codec, MissingFinalTerminatorsAreAccepted) {
  auto pd = decode_pod_devices("GPU-a,NVIDIA,1,2:GPU-b,NVIDIA,3,4");
  ASSERT_TRUE(pd);
  EXPECT_EQ(*pd, (PodDevices{{{"GPU-a", "NVIDIA", 1, 2}, {"GPU-b", "NVIDIA", 3, 4}}}));
  pd = decode_pod_devices(";GPU-a,NVIDIA,1,2");
  ASSERT_TRUE(pd);
  EXPECT_EQ(pd->size(), 2u);
}

TEST(Codec, SurroundingWhitespaceIsIgnored) {
  auto pd = decode_pod_devices(" GPU-a,NVIDIA,1,2:;\n");
  ASSERT_TRUE(pd) << pd.error().message;
  ASSERT_EQ(pd->size(), 1u);
  EXPECT_EQ((*pd)[0].at(0).uuid, "GPU-a");
  auto blank = decode_pod_devices("  \n");
  ASSERT_TRUE(blank);
  EXPECT_TRUE(blank->empty());
}

TEST(Codec, MalformedInputsSayWhere) {
  struct Bad {
    const char* text;
    const char* message;
  };
  const std::vector<Bad> cases = {
      {"GPU-a,NVIDIA,1:",
       "container 0, device 0 'GPU-a,NVIDIA,1': expected UUID,Type,Usedmem,Usedcores"},
      {"GPU-a,NVIDIA,1,2,3:",
       "container 0, device 0 'GPU-a,NVIDIA,1,2,3': expected UUID,Type,Usedmem,Usedcores"},
      {";GPU-a,NVIDIA,1,2::", "container 1, device 1 '': empty device entry"},
      {",NVIDIA,1,2:", "container 0, device 0 ',NVIDIA,1,2': empty UUID or type"},
      {"GPU-a,,1,2:", "container 0, device 0 'GPU-a,,1,2': empty UUID or type"},
      {"GPU-a,NVIDIA,x,2:",
       "container 0, device 0 'GPU-a,NVIDIA,x,2': memory is not a non-negative 32-bit integer"},
      {"GPU-a,NVIDIA,-1,2:",
       "container 0, device 0 'GPU-a,NVIDIA,-1,2': memory is not a non-negative 32-bit integer"},
      {"GPU-a,NVIDIA,2147483648,2:",
       "container 0, device 0 'GPU-a,NVIDIA,2147483648,2': memory is not a non-negative 32-bit "
       "integer"},
      {"GPU-a,NVIDIA,1, 2:",
       "container 0, device 0 'GPU-a,NVIDIA,1, 2': cores is not a non-negative 32-bit integer"},
      {"GPU-a,NVIDIA,1,:",
       "container 0, device 0 'GPU-a,NVIDIA,1,': cores is not a non-negative 32-bit integer"},
  };
  for (const auto& c : cases) {
    auto pd = decode_pod_devices(c.text);
    ASSERT_FALSE(pd) << c.text;
    EXPECT_EQ(pd.error().message, c.message);
  }
  const std::string huge(kMaxPodDevicesText + 1, ';');
  auto pd = decode_pod_devices(huge);
  ASSERT_FALSE(pd);
  EXPECT_NE(pd.error().message.find("larger than any allocation"), std::string::npos);
}

TEST(Codec, EncodeRefusesWhatCannotBeReadBack) {
  for (const auto& d : std::vector<ContainerDevice>{{"GPU,a", "NVIDIA", 1, 1},
                                                    {"GPU-a", "NVI:DIA", 1, 1},
                                                    {"GPU-a", "NVIDIA;", 1, 1},
                                                    {"", "NVIDIA", 1, 1},
                                                    {"GPU-a", "", 1, 1},
                                                    {"GPU-a", "NVIDIA", -1, 1},
                                                    {"GPU-a", "NVIDIA", 1, -1}}) {
    auto text = encode_pod_devices({{}, {d}});
    ASSERT_FALSE(text) << d.uuid << " " << d.type;
    EXPECT_EQ(text.error().message.rfind("container 1, device 0", 0), 0u) << text.error().message;
  }
}

}  // namespace
}  // namespace hami::protocol
