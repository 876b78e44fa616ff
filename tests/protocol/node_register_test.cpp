// The node registration JSON (byte-compatible with upstream's
// MarshalNodeDevices), what a GPU registers as, and the pair-score
// (upstream's) and P2P (ours) topology annotations.
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

TEST(NodeRegister, DynamicMigGpuCarriesItsProfiles) {
  NodeDevice d{"GPU-m", 0, 7, 81920, 100, "NVIDIA H100 80GB HBM3", 0, "mig", true};
  d.mig_profiles = {{"1g.10gb", 9984, 14, 1, {{0, 1}, {1, 1}}},
                    {"7g.80gb", 80896, 100, 7, {{0, 8}}}};
  const std::string text = encode_node_devices({d});
  EXPECT_EQ(text, R"([{"id":"GPU-m","count":7,"devmem":81920,"devcore":100,)"
                  R"("type":"NVIDIA H100 80GB HBM3","mode":"mig","health":true,"migProfiles":[)"
                  R"({"name":"1g.10gb","memory":9984,"core":14,"sliceCount":1,)"
                  R"("placements":[{"start":0,"size":1},{"start":1,"size":1}]},)"
                  R"({"name":"7g.80gb","memory":80896,"core":100,"sliceCount":7,)"
                  R"("placements":[{"start":0,"size":8}]}]}])");
  auto back = decode_node_devices(text);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, std::vector<NodeDevice>{d});

  auto err = [](const std::string& profiles) {
    auto r = decode_node_devices(R"([{"id":"GPU-m","migProfiles":)" + profiles + "}]");
    return r ? std::string("accepted") : r.error().message;
  };
  EXPECT_THAT(err("{}"), HasSubstr("migProfiles: expected an array"));
  EXPECT_THAT(err(R"([{"memory":1}])"), HasSubstr("no name"));
  EXPECT_THAT(err(R"([{"name":"1g","placements":[{"start":0}]}])"), HasSubstr("no size"));
  EXPECT_THAT(err(R"([{"name":"1g","placements":[{"start":-1,"size":1}]}])"),
              HasSubstr("out of range"));
  EXPECT_THAT(err(R"([{"name":"1g","placements":{}}])"), HasSubstr("expected an array"));
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

TEST(NodeTopology, PairScoreIsUpstreamsTable) {
  // calculateGPUPairScore: the PCIe level plus 100 per NVLink.
  EXPECT_EQ(pair_score(50, 0), 10);   // NVML_TOPOLOGY_SYSTEM: P2PLinkCrossCPU
  EXPECT_EQ(pair_score(40, 0), 20);   // NODE: P2PLinkSameCPU
  EXPECT_EQ(pair_score(30, 0), 30);   // HOSTBRIDGE
  EXPECT_EQ(pair_score(20, 0), 40);   // MULTIPLE: P2PLinkMultiSwitch
  EXPECT_EQ(pair_score(10, 0), 50);   // SINGLE: P2PLinkSingleSwitch
  EXPECT_EQ(pair_score(0, 0), 60);    // INTERNAL: P2PLinkSameBoard
  EXPECT_EQ(pair_score(10, 4), 450);  // four NVLinks over one switch
  EXPECT_EQ(pair_score(50, 18), 1810);
  EXPECT_EQ(pair_score(std::nullopt, 2), 200);  // level unknown: the links still count
  EXPECT_EQ(pair_score(50, 19), 10);            // past upstream's table: no NVLink score
  EXPECT_EQ(pair_score(35, 0), 0);              // not a level NVML defines
}

std::vector<DeviceLinks> three_gpus() {
  return {{"GPU-b", {{"GPU-c", 20, "ok"}, {"GPU-a", 460, "ok"}}},
          {"GPU-a", {{"GPU-b", 460, "ok"}, {"GPU-c", 10, "not_supported"}}},
          {"GPU-c", {{"GPU-a", 10, "not_supported"}, {"GPU-b", 20, ""}}}};
}

TEST(NodeTopology, EncodesScoresAsGoMarshalsThem) {
  // Entries in registration order, each map sorted by key as Go writes it.
  EXPECT_EQ(encode_pair_scores(three_gpus()),
            R"([{"uuid":"GPU-b","score":{"GPU-a":460,"GPU-c":20}},)"
            R"({"uuid":"GPU-a","score":{"GPU-b":460,"GPU-c":10}},)"
            R"({"uuid":"GPU-c","score":{"GPU-a":10,"GPU-b":20}}])");
  EXPECT_EQ(encode_pair_scores({{"GPU-a", {}}}), R"([{"uuid":"GPU-a","score":{}}])");
}

TEST(NodeTopology, EncodesP2pLeavingUnknownOut) {
  EXPECT_EQ(encode_p2p(three_gpus()),
            R"([{"uuid":"GPU-b","p2p":{"GPU-a":"ok","GPU-c":"ok"}},)"
            R"({"uuid":"GPU-a","p2p":{"GPU-b":"ok","GPU-c":"not_supported"}},)"
            R"({"uuid":"GPU-c","p2p":{"GPU-a":"not_supported"}}])");
}

TEST(NodeTopology, DecodesUpstreamScoresAndOurP2p) {
  // As upstream's plugin writes it, with a field neither side knows.
  auto up = decode_pair_scores(
      R"([{"uuid":"GPU-a","score":{"GPU-b":200,"GPU-c":10},"extra":1},)"
      R"({"uuid":"GPU-b","score":{"GPU-a":200}},{"uuid":"GPU-c","score":null}])");
  ASSERT_TRUE(up) << up.error().message;
  ASSERT_EQ(up->size(), 3u);
  EXPECT_EQ((*up)[0].uuid, "GPU-a");
  ASSERT_EQ((*up)[0].peers.size(), 2u);
  EXPECT_EQ((*up)[0].peers[0], (PeerLink{"GPU-b", 200, ""}));
  EXPECT_TRUE((*up)[2].peers.empty());

  auto p2p = decode_p2p(encode_p2p(three_gpus()));
  ASSERT_TRUE(p2p) << p2p.error().message;
  ASSERT_EQ(p2p->size(), 3u);
  EXPECT_EQ((*p2p)[1].peers[1], (PeerLink{"GPU-c", 0, "not_supported"}));
}

TEST(NodeTopology, DecodeErrorsSayWhere) {
  EXPECT_THAT(decode_pair_scores("GPU-a").error().message, HasSubstr("not valid JSON"));
  EXPECT_THAT(decode_pair_scores("{}").error().message, HasSubstr("not a JSON array"));
  EXPECT_THAT(decode_pair_scores(R"([{"score":{}}])").error().message, HasSubstr("no uuid"));
  EXPECT_THAT(decode_pair_scores(R"([{"uuid":"a","score":{"b":"x"}}])").error().message,
              HasSubstr("entry 0.score.b: expected a whole number"));
  EXPECT_THAT(decode_pair_scores(R"([{"uuid":"a","score":{"b":1e12}}])").error().message,
              HasSubstr("entry 0.score.b"));
  EXPECT_THAT(decode_pair_scores(R"([{"uuid":"a","score":[]}])").error().message,
              HasSubstr("entry 0.score: expected an object"));
  EXPECT_THAT(decode_p2p(R"([{"uuid":"a","p2p":{"b":0}}])").error().message,
              HasSubstr("entry 0.p2p.b: expected a status"));
  EXPECT_THAT(decode_p2p(R"([{"uuid":"a","p2p":{"b":""}}])").error().message,
              HasSubstr("entry 0.p2p.b: expected a status"));
}

}  // namespace
}  // namespace hami::protocol
