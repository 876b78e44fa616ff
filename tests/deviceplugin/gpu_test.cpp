// The device plugin's GPUs: virtual device IDs and what each registers as.
#include "deviceplugin/gpu.hpp"

#include <gtest/gtest.h>

namespace hami::deviceplugin {
namespace {

TEST(Gpu, VirtualIdsAndTheirPhysicalUuid) {
  Gpu g;
  g.uuid = "GPU-5a3e0000-0000-4000-8000-00000000000a";
  const auto ids = virtual_ids(g, 3);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[0], g.uuid + "-0");
  EXPECT_EQ(ids[2], g.uuid + "-2");
  for (const auto& id : ids)
    EXPECT_EQ(physical_uuid(id), g.uuid);
  EXPECT_LE(virtual_ids(g, 1024).back().size(), 63u);  // kubelet's ID limit
  EXPECT_EQ(physical_uuid("GPU-abc"), "GPU-abc");
  EXPECT_EQ(physical_uuid("MIG-x-"), "MIG-x-");
}

TEST(Gpu, NodeDevicesScaleMemoryAndCores) {
  PluginConfig cfg;
  cfg.device_split_count = 7;
  cfg.device_memory_scaling = 1.5;
  cfg.device_core_scaling = 2;
  Gpu g{3, "GPU-a", "Tesla T4", 16ull << 30, 1, false, "lost"};
  Gpu h{4, "GPU-b", "NVIDIA A30", 24ull << 30, std::nullopt, true, ""};
  const auto d = node_devices({g, h}, cfg);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0], (protocol::NodeDevice{"GPU-a", 3, 7, 24576, 200, "NVIDIA-Tesla T4", 1,
                                        "hami-core", false}));
  EXPECT_EQ(d[1].numa, 0);  // unknown NUMA registers as 0, as upstream
  EXPECT_TRUE(d[1].health);
}

TEST(Gpu, EachGpuRegistersItsOwnSharingMode) {
  PluginConfig cfg;
  Gpu a{0, "GPU-a", "NVIDIA H100", 80ull << 30, 0, true, "", SharingMode::kTimeslice};
  Gpu b{1, "GPU-b", "NVIDIA H100", 80ull << 30, 0, true, "", SharingMode::kMps};
  const auto d = node_devices({a, b}, cfg);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].mode, "hami-core");  // upstream's mode for a time-sliced GPU
  EXPECT_EQ(d[1].mode, "mps");
  // And what the scheduler reads back.
  auto back = protocol::decode_node_devices(protocol::encode_node_devices(d));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ((*back)[1].mode, "mps");
}

// Point 4 of MIG (docs/mig.md): one node, a MIG device beside a time-sliced
// and an MPS GPU, each registered with its own mode. A MIG device's memory
// and cores are the slice's, never scaled.
TEST(Gpu, MigDevicesRegisterBesideTimeslicedAndMpsGpus) {
  PluginConfig cfg;
  cfg.device_split_count = 4;
  cfg.device_memory_scaling = 2;
  cfg.device_core_scaling = 1.5;
  Gpu mig{0, "MIG-11", "NVIDIA H200 MIG 3g.71gb", 71424ull << 20, 1, true, ""};
  mig.mig = MigSlice{"GPU-p", "3g.71gb", 2, 0, 60};
  Gpu ts{1, "GPU-t", "NVIDIA H200", 143771ull << 20, 1, true, "", SharingMode::kTimeslice};
  Gpu mps{2, "GPU-m", "NVIDIA H200", 143771ull << 20, 1, true, "", SharingMode::kMps};
  const auto d = node_devices({mig, ts, mps}, cfg);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0], (protocol::NodeDevice{"MIG-11", 0, 4, 71424, 100, "NVIDIA H200 MIG 3g.71gb", 1,
                                        "mig", true}));
  EXPECT_EQ(d[1].mode, "hami-core");
  EXPECT_EQ(d[1].devmem, 143771 * 2);
  EXPECT_EQ(d[1].devcore, 150);
  EXPECT_EQ(d[2].mode, "mps");
  EXPECT_STREQ(registered_mode(mig), "mig");
  // kubelet's IDs of a MIG device come back to its UUID.
  for (const auto& id : virtual_ids(mig, 4))
    EXPECT_EQ(physical_uuid(id), "MIG-11");
  auto back = protocol::decode_node_devices(protocol::encode_node_devices(d));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, d);
}

// A GPU in dynamic MIG mode (docs/mig-dynamic.md) registers whole, with mode
// "mig", its allowed profiles and, as count and kubelet's IDs, the most
// instances they allow; neither memory nor cores scaled.
TEST(Gpu, ADynamicMigGpuRegistersItsProfilesAndCount) {
  PluginConfig cfg;
  cfg.device_split_count = 10;
  cfg.device_memory_scaling = 2;
  cfg.device_core_scaling = 1.5;
  Gpu g{0, "GPU-d", "NVIDIA H100 80GB HBM3", 81920ull << 20, 0, true, ""};
  protocol::MigProfileInfo p{"3g.40gb", 40192, 42, 3, {{0, 4}, {4, 4}}};
  g.dynamic_mig = DynamicMig{{p}, 2};
  const auto d = node_devices({g}, cfg);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].mode, "mig");
  EXPECT_EQ(d[0].count, 2);
  EXPECT_EQ(d[0].devmem, 81920);
  EXPECT_EQ(d[0].devcore, 100);
  EXPECT_EQ(d[0].mig_profiles, std::vector<protocol::MigProfileInfo>{p});
  const auto ids = virtual_ids(g, cfg.device_split_count);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(physical_uuid(ids[1]), "GPU-d");
}

TEST(Gpu, DeviceLinksOnlyWhenSomeGpuKnowsItsPeers) {
  Gpu a{0, "GPU-a", "NVIDIA H100", 80ull << 30, 0, true, ""};
  Gpu b{1, "GPU-b", "NVIDIA H100", 80ull << 30, 0, true, ""};
  EXPECT_TRUE(device_links({a, b}).empty());  // topology not read: nothing to register
  a.peers = {{"GPU-b", 420, "ok"}};
  b.peers = {{"GPU-a", 420, "ok"}};
  const auto links = device_links({a, b});
  ASSERT_EQ(links.size(), 2u);
  EXPECT_EQ(links[1], (protocol::DeviceLinks{"GPU-b", {{"GPU-a", 420, "ok"}}}));
}

}  // namespace
}  // namespace hami::deviceplugin
