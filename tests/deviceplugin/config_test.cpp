// The device plugin's config: upstream's YAML keys and defaults, per-node
// overrides from the same file or upstream's config.json, and errors that
// name the file, line and key.
#include "deviceplugin/config.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>
#include <utility>

#include "support/temp_dir.hpp"

namespace hami::deviceplugin {
namespace {

using ::testing::HasSubstr;

TEST(Config, DefaultsAreUpstreamChartValues) {
  PluginConfig c;
  EXPECT_EQ(c.device_split_count, 10);
  EXPECT_EQ(c.device_memory_scaling, 1.0);
  EXPECT_EQ(c.device_core_scaling, 1.0);
  EXPECT_FALSE(c.disable_core_limit);
  EXPECT_EQ(c.resource_count_name, "nvidia.com/gpu");
  EXPECT_EQ(c.resource_memory_name, "nvidia.com/gpumem");
  EXPECT_EQ(c.resource_core_name, "nvidia.com/gpucores");
  EXPECT_EQ(c.resource_priority_name, "nvidia.com/priority");
}

TEST(Config, ReadsTheNvidiaBlockOfTheSchedulerConfigMap) {
  // The shape of charts/hami device-configmap.yaml, scheduler-only keys included.
  const char* yaml = R"(nvidia:
  resourceCountName: example.com/vgpu
  resourceMemoryName: example.com/vgpumem
  resourceCoreName: example.com/vgpucores
  resourceMemoryPercentageName: example.com/vgpumem-percentage
  resourcePriorityName: example.com/vgpu-priority
  overwriteEnv: false
  defaultMemory: 0
  defaultCores: 0
  defaultGPUNum: 1
  memoryFactor: 1
  deviceSplitCount: 4
  deviceMemoryScaling: 1.5
  deviceCoreScaling: 2
  disableCoreLimit: true
  libCudaLogLevel: 1
  migProfileAllowlist:
    - models: ["A100"]
      profiles: ["1g.10gb"]
cambricon:
  resourceCountName: cambricon.com/vmlu
)";
  PluginConfig c;
  auto r = apply_config_text(c, yaml, "device-config.yaml", "node-1");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(c.resource_count_name, "example.com/vgpu");
  EXPECT_EQ(c.resource_priority_name, "example.com/vgpu-priority");
  EXPECT_EQ(c.device_split_count, 4);
  EXPECT_EQ(c.device_memory_scaling, 1.5);
  EXPECT_EQ(c.device_core_scaling, 2.0);
  EXPECT_TRUE(c.disable_core_limit);
  EXPECT_EQ(c.lib_cuda_log_level, 1);
  EXPECT_TRUE(c.warnings.empty()) << c.warnings[0];
  ASSERT_EQ(c.mig_profile_allowlist.size(), 1u);
  EXPECT_EQ(c.mig_profile_allowlist[0].models, std::vector<std::string>{"A100"});
  EXPECT_EQ(c.mig_profile_allowlist[0].profiles, std::vector<std::string>{"1g.10gb"});
}

// Dynamic MIG's allowlist, as upstream's chart ships it, and what is refused.
TEST(Config, MigProfileAllowlist) {
  PluginConfig c;
  auto r = apply_config_text(c, R"(nvidia:
  migProfileAllowlist:
  - models: [ "H100-PCIE-80GB", "H100-SXM5-80GB"]
    profiles: [ "1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb" ]
  - models: [ "H200 NVL", "H200-SXM5"]
    profiles: [ "1g.18gb", "7g.141gb" ]
    comment: x
)",
                             "f.yaml", "n");
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(c.mig_profile_allowlist.size(), 2u);
  EXPECT_EQ(c.mig_profile_allowlist[0].models.size(), 2u);
  EXPECT_EQ(c.mig_profile_allowlist[0].profiles[3], "7g.80gb");
  EXPECT_EQ(c.mig_profile_allowlist[1].models[0], "H200 NVL");
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_THAT(c.warnings[0], HasSubstr("nvidia.migProfileAllowlist[1].comment: unknown key"));
  for (const char* bad :
       {"nvidia:\n  migProfileAllowlist: 3\n", "nvidia:\n  migProfileAllowlist: [3]\n",
        "nvidia:\n  migProfileAllowlist: [{models: A100}]\n",
        "nvidia:\n  migProfileAllowlist: [{profiles: [[1]]}]\n"}) {
    PluginConfig b;
    EXPECT_FALSE(apply_config_text(b, bad, "f.yaml", "n")) << bad;
  }
}

TEST(Config, UnknownKeysWarnWithTheirPlace) {
  PluginConfig c;
  auto r = apply_config_text(c, "nvidia:\n  deviceSplitCont: 3\n", "f.yaml", "n");
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_THAT(c.warnings[0], HasSubstr("f.yaml:2: nvidia.deviceSplitCont: unknown key"));
  EXPECT_EQ(c.device_split_count, 10);
}

TEST(Config, BadValuesNameFileLineAndKey) {
  struct Case {
    const char* yaml;
    const char* want;
  } cases[] = {
      {"nvidia:\n  deviceSplitCount: ten\n",
       "f.yaml:2: nvidia.deviceSplitCount: expected a whole number from 1 to 1024, got 'ten'"},
      {"nvidia:\n  deviceSplitCount: 0\n", "nvidia.deviceSplitCount: expected a whole number"},
      {"nvidia:\n  deviceMemoryScaling: -1\n", "nvidia.deviceMemoryScaling: expected a number"},
      {"nvidia:\n  disableCoreLimit: maybe\n",
       "nvidia.disableCoreLimit: expected true or false, got 'maybe'"},
      {"nvidia:\n  resourceCountName: gpu\n", "expected a resource name like nvidia.com/gpu"},
      {"nvidia:\n  libCudaLogLevel: 9\n",
       "nvidia.libCudaLogLevel: expected a whole number from 0 to 4"},
      {"nvidia: [1, 2]\n", "f.yaml:1: nvidia: expected a mapping"},
      {"nvidia:\n  deviceSplitCount: [1]\n", "got a list"},
      {"- just\n- a list\n", "f.yaml: expected a mapping at the top"},
      {"nvidia:\n  deviceSplitCount: 1\n bad: indent\n", "f.yaml:3: not valid YAML"},
      {"nodeconfig:\n  - devicesplitcount: 2\n",
       "f.yaml:2: nodeconfig[0]: an entry without a name"},
  };
  for (const auto& k : cases) {
    PluginConfig c;
    auto r = apply_config_text(c, k.yaml, "f.yaml", "node-1");
    ASSERT_FALSE(r) << k.yaml;
    EXPECT_THAT(r.error().message, HasSubstr(k.want)) << k.yaml;
  }
}

TEST(Config, NodeEntryOverridesTheNvidiaBlock) {
  const char* yaml = R"(nvidia:
  deviceSplitCount: 10
  deviceMemoryScaling: 1
nodeconfig:
  - name: other-node
    devicesplitcount: 99
  - name: node-1
    devicesplitcount: 3
    devicememoryscaling: 2
    devicecorescaling: 1.5
    libcudaloglevel: 4
    enablenumatopology: false
    enablegetpreferredallocation: false
    operatingmode: hami-core
    filterdevices:
      uuid: ["GPU-x"]
      index: [3]
)";
  PluginConfig c;
  auto r = apply_config_text(c, yaml, "f.yaml", "node-1");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(c.device_split_count, 3);
  EXPECT_EQ(c.device_memory_scaling, 2.0);
  EXPECT_EQ(c.device_core_scaling, 1.5);
  EXPECT_EQ(c.lib_cuda_log_level, 4);
  EXPECT_FALSE(c.enable_numa_topology);
  EXPECT_FALSE(c.enable_get_preferred_allocation);
  EXPECT_TRUE(c.filtered("GPU-x", 0));
  EXPECT_TRUE(c.filtered("GPU-y", 3));
  EXPECT_FALSE(c.filtered("GPU-y", 2));
}

TEST(Config, UpstreamConfigJsonFileAppliesOverTheYaml) {
  test::TempDir dir;
  const std::string yaml = dir.file("device-config.yaml");
  const std::string json = dir.file("config.json");
  std::ofstream(yaml) << "nvidia:\n  deviceSplitCount: 10\n  deviceCoreScaling: 1\n";
  // Upstream's ConfigMap hami-device-plugin, keys in any case as Go reads them.
  std::ofstream(json) << R"({"nodeconfig": [{"name": "gpu-7", "operatingmode": "hami-core",
    "deviceSplitCount": 5, "devicememoryscaling": 1.25, "migstrategy": "none",
    "filterdevices": {"uuid": [], "index": []}}]})";
  PluginConfig c;
  ASSERT_TRUE(apply_config_file(c, yaml, "gpu-7"));
  auto r = apply_config_file(c, json, "gpu-7");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(c.device_split_count, 5);
  EXPECT_EQ(c.device_memory_scaling, 1.25);
  EXPECT_EQ(c.device_core_scaling, 1.0);
  ASSERT_EQ(c.sources.size(), 2u);
  EXPECT_THAT(c.sources[1], HasSubstr("config.json (nodeconfig[0], node gpu-7)"));
}

TEST(Config, MigModePerNodeAndPerGpu) {
  PluginConfig c;
  EXPECT_FALSE(c.mig_of("GPU-a", 0));
  ASSERT_TRUE(apply_config_text(c, R"({"nodeconfig":[{"name":"n","operatingmode":"mig"}]})",
                                "config.json", "n"));
  EXPECT_TRUE(c.mig_of("GPU-a", 0));
  EXPECT_EQ(c.mode_of("GPU-a", 0), SharingMode::kTimeslice);
  // Point 4 of MIG: one GPU apart from the node's mode, either way.
  ASSERT_TRUE(apply_config_text(c,
                                "nodeconfig:\n- name: n\n  devicemodes:\n  - index: 1\n"
                                "    operatingmode: mps\n  - uuid: GPU-c\n    operatingmode: "
                                "timeslice\n",
                                "f.yaml", "n"));
  EXPECT_TRUE(c.mig_of("GPU-a", 0));
  EXPECT_FALSE(c.mig_of("GPU-b", 1));
  EXPECT_EQ(c.mode_of("GPU-b", 1), SharingMode::kMps);
  EXPECT_FALSE(c.mig_of("GPU-c", 2));
  EXPECT_THAT(c.describe(), HasSubstr("operatingMode=mig GPU 1=mps GPU GPU-c=timeslice"));
  PluginConfig d;
  ASSERT_TRUE(apply_config_text(
      d, "nodeconfig:\n- name: n\n  devicemodes:\n  - index: 0\n    operatingmode: mig\n", "f.yaml",
      "n"));
  EXPECT_TRUE(d.mig_of("GPU-a", 0));
  EXPECT_FALSE(d.mig_of("GPU-b", 1));
}

TEST(Config, SharingModeIsTimesliceUnlessTheNodeSaysMps) {
  PluginConfig c;
  EXPECT_EQ(c.mode_of("GPU-a", 0), SharingMode::kTimeslice);
  // Upstream's word for it reads the same.
  ASSERT_TRUE(apply_config_text(c, R"({"nodeconfig":[{"name":"n","operatingmode":"hami-core"}]})",
                                "config.json", "n"));
  EXPECT_EQ(c.mode_of("GPU-a", 0), SharingMode::kTimeslice);
  auto r = apply_config_text(c, "nodeconfig:\n- name: n\n  operatingmode: mps\n", "f.yaml", "n");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(c.mode_of("GPU-a", 0), SharingMode::kMps);
  EXPECT_EQ(c.mode_of("GPU-b", 5), SharingMode::kMps);
  EXPECT_THAT(c.describe(), HasSubstr("operatingMode=mps"));
  // Another node's entry leaves this one alone.
  PluginConfig other;
  ASSERT_TRUE(
      apply_config_text(other, "nodeconfig:\n- name: m\n  operatingmode: mps\n", "f.yaml", "n"));
  EXPECT_EQ(other.mode_of("GPU-a", 0), SharingMode::kTimeslice);
}

TEST(Config, DeviceModesSetOneGpuByUuidOrIndex) {
  const char* yaml = R"(nodeconfig:
  - name: node-1
    operatingmode: timeslice
    devicemodes:
      - index: 1
        operatingmode: mps
      - uuid: GPU-c
        operatingmode: MPS
  - name: node-2
    operatingmode: mps
    devicemodes:
      - uuid: GPU-d
        operatingmode: timeslice
)";
  PluginConfig c;
  auto r = apply_config_text(c, yaml, "f.yaml", "node-1");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(c.mode_of("GPU-a", 0), SharingMode::kTimeslice);
  EXPECT_EQ(c.mode_of("GPU-b", 1), SharingMode::kMps);
  EXPECT_EQ(c.mode_of("GPU-c", 2), SharingMode::kMps);
  EXPECT_THAT(c.describe(), HasSubstr("GPU 1=mps GPU GPU-c=mps"));
  PluginConfig c2;
  ASSERT_TRUE(apply_config_text(c2, yaml, "f.yaml", "node-2"));
  EXPECT_EQ(c2.mode_of("GPU-a", 0), SharingMode::kMps);
  EXPECT_EQ(c2.mode_of("GPU-d", 0), SharingMode::kTimeslice);  // the UUID wins over index 0
  EXPECT_EQ(registered_mode(SharingMode::kMps), std::string("mps"));
  EXPECT_EQ(registered_mode(SharingMode::kTimeslice), std::string("hami-core"));
}

TEST(Config, BadSharingModesNameTheNodeOrGpuAndTheAcceptedValues) {
  struct Case {
    const char* yaml;
    const char* want;
  } cases[] = {
      {"nodeconfig:\n- name: n\n  operatingmode: spatial\n",
       "f.yaml:3: nodeconfig[0].operatingmode: node n: expected timeslice (also written "
       "hami-core), mps or mig, got 'spatial'"},
      {"nodeconfig:\n- name: n\n  devicemodes:\n  - index: 2\n    operatingmode: fast\n",
       "f.yaml:5: nodeconfig[0].devicemodes[0].operatingmode: GPU 2 on node n: expected "
       "timeslice (also written hami-core), mps or mig, got 'fast'"},
      {"nodeconfig:\n- name: n\n  devicemodes:\n  - operatingmode: mps\n",
       "nodeconfig[0].devicemodes[0]: name the GPU by exactly one of uuid or index"},
      {"nodeconfig:\n- name: n\n  devicemodes:\n  - {index: 1, uuid: GPU-z, operatingmode: mps}\n",
       "nodeconfig[0].devicemodes[0]: name the GPU by exactly one of uuid or index"},
      {"nodeconfig:\n- name: n\n  devicemodes:\n  - index: 1\n",
       "nodeconfig[0].devicemodes[0]: operatingmode missing (timeslice, mps or mig)"},
      {"nodeconfig:\n- name: n\n  devicemodes: mps\n",
       "nodeconfig[0].devicemodes: expected a list, got 'mps'"},
      {"nodeconfig:\n- name: n\n  devicemodes:\n  - index: -1\n    operatingmode: mps\n",
       "nodeconfig[0].devicemodes[0].index: expected a whole number from 0 to 1023"},
  };
  for (const auto& k : cases) {
    PluginConfig c;
    auto r = apply_config_text(c, k.yaml, "f.yaml", "n");
    ASSERT_FALSE(r) << k.yaml;
    EXPECT_THAT(r.error().message, HasSubstr(k.want)) << k.yaml;
    EXPECT_TRUE(c.gpu_modes.empty()) << k.yaml;
  }
}

TEST(Config, MigStrategyPerNode) {
  PluginConfig c;
  EXPECT_EQ(c.mig_strategy, MigStrategy::kNone);
  for (auto [text, want] :
       {std::pair{"single", MigStrategy::kSingle}, std::pair{"mixed", MigStrategy::kMixed},
        std::pair{"none", MigStrategy::kNone}}) {
    const std::string json =
        std::string(R"({"nodeconfig":[{"name":"n","migstrategy":")") + text + "\"}]}";
    ASSERT_TRUE(apply_config_text(c, json, "config.json", "n")) << text;
    EXPECT_EQ(c.mig_strategy, want) << text;
  }
  auto r = apply_config_text(c, R"({"nodeconfig":[{"name":"n","migstrategy":"all"}]})",
                             "config.json", "n");
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message,
              HasSubstr("nodeconfig[0].migstrategy: expected none, single or mixed, got 'all'"));
}

TEST(Config, MissingFileSaysWhich) {
  PluginConfig c;
  auto r = apply_config_file(c, "/nonexistent/device-config.yaml", "n");
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message, HasSubstr("/nonexistent/device-config.yaml"));
}

TEST(XidPolicy, ApplicationErrorsAreNeverCritical) {
  XidPolicy p;
  for (uint64_t x : {13, 31, 43, 45, 68, 109})
    EXPECT_FALSE(p.critical(x)) << x;
  for (uint64_t x : {48, 63, 64, 74, 79, 92, 94, 95, 999})
    EXPECT_TRUE(p.critical(x)) << x;
  EXPECT_EQ(p.recovery, std::chrono::minutes(5));
}

TEST(XidPolicy, IgnoreXidsTakesAListOrAll) {
  XidPolicy p;
  ASSERT_TRUE(parse_ignore_xids(" 48, 94,,", p));
  EXPECT_TRUE(p.watch);
  EXPECT_FALSE(p.critical(48));
  EXPECT_FALSE(p.critical(94));
  EXPECT_TRUE(p.critical(79));
  EXPECT_THAT(p.describe(), HasSubstr("ignoring Xids 13,31,43,45,68,109,48,94"));

  ASSERT_TRUE(parse_ignore_xids("", p));
  EXPECT_TRUE(p.watch);
  EXPECT_TRUE(p.critical(48));

  // Upstream's DP_DISABLE_HEALTHCHECKS values: "all", or "xids" in the list.
  for (const char* all : {"all", "ALL", "xids", "48,xids"}) {
    XidPolicy q;
    ASSERT_TRUE(parse_ignore_xids(all, q)) << all;
    EXPECT_FALSE(q.watch) << all;
    EXPECT_FALSE(q.critical(79)) << all;
  }

  auto bad = parse_ignore_xids("48,7x9", p);
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.error().message, HasSubstr("'7x9' is not an Xid number"));
  EXPECT_FALSE(parse_ignore_xids("-1", p));
}

}  // namespace
}  // namespace hami::deviceplugin
