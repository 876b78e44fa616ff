// The device plugin following a resize: a running pod's new, signed
// allocation replaces its container's limits file (only the sizes change;
// state file, priority and policy stay as Allocate wrote them); a forged or
// altered allocation, another node's pod, a container this plugin did not
// allocate, a pod still in Allocate, other GPUs and an MPS client given more
// change nothing.
#include "deviceplugin/limits_follower.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "common/small_file.hpp"
#include "deviceplugin/container_plan.hpp"
#include "k8s/objects.hpp"
#include "protocol/annotations.hpp"
#include "protocol/container_contract.hpp"
#include "protocol/decision.hpp"
#include "protocol/mig_allocations.hpp"
#include "support/temp_dir.hpp"

namespace hami::deviceplugin {
namespace {

using nlohmann::json;

constexpr const char* kUid = "0b5c8e7e-1111-4222-8333-444455556666";

class LimitsFollowerTest : public ::testing::Test {
 protected:
  // As the daemon has it with --decision-key-file: only signed decisions.
  LimitsFollowerTest() {
    trust.keys = keys;
    trust.unsigned_schedulers.clear();
  }

  // The limits file as Allocate writes it.
  std::string allocate(int32_t mem, int32_t cores, SharingMode mode = SharingMode::kTimeslice,
                       const std::string& container = "main") {
    PlanInput in;
    in.hook_path = dir.path();
    in.pod_uid = kUid;
    in.container = container;
    in.gpus = {{"GPU-a", mem, cores, mode}};
    in.priority = 1;
    in.core_policy = mode == SharingMode::kMps ? "" : "force";
    in.cache_name = "state.cache";
    auto plan = plan_container(in, PluginConfig{});
    EXPECT_TRUE(plan) << plan.error().message;
    std::filesystem::create_directories(plan->limits_dir);
    EXPECT_TRUE(replace_small_file(plan->limits_file, plan->limits_text, 0644));
    return plan->limits_file;
  }
  json pod(const std::string& allocated, const std::string& node = "node-1",
           const char* phase = protocol::kPhaseSuccess) {
    json p = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata",
               {{"name", "p"},
                {"namespace", "default"},
                {"uid", kUid},
                {"annotations",
                 {{protocol::kAssignedNode, node},
                  {protocol::kDevicesAllocated, allocated},
                  {protocol::kBindPhase, phase}}}}},
              {"spec",
               {{"nodeName", node},
                {"schedulerName", "hami-scheduler"},
                {"containers", json::array({{{"name", "main"}, {"image", "cuda"}}})}}},
              {"status", {{"phase", "Running"}}}};
    p["metadata"]["annotations"][protocol::kDecisionSignature] =
        keys.sign({kUid, "default", "p", node, allocated});
    return p;
  }
  protocol::ContainerLimits read(const std::string& path) {
    auto text = read_small_file(path, protocol::kMaxLimitsFileSize);
    EXPECT_TRUE(text);
    return protocol::parse_limits_file(text ? *text : "", path);
  }
  static ino_t inode(const std::string& path) {
    struct stat st {};
    ::stat(path.c_str(), &st);
    return st.st_ino;
  }

  test::TempDir dir;
  const protocol::DecisionKeys keys =
      *protocol::DecisionKeys::parse(std::string(40, 'k'), "test key");
  protocol::DecisionTrust trust;
};

TEST_F(LimitsFollowerTest, SignedResizeReplacesTheFileKeepingTheRest) {
  const std::string path = allocate(4000, 30);
  LimitsFollower follow("node-1", dir.path(), trust);
  // As allocated: nothing to do, the file is not touched.
  const ino_t before = inode(path);
  EXPECT_EQ(follow.pod_changed(pod("GPU-a,NVIDIA,4000,30:;")), 0);
  EXPECT_EQ(inode(path), before);

  EXPECT_EQ(follow.pod_changed(pod("GPU-a,NVIDIA,8000,60:;")), 1);
  EXPECT_NE(inode(path), before);  // replaced by rename, not rewritten in place
  const protocol::ContainerLimits now = read(path);
  EXPECT_FALSE(now.corrupt);
  EXPECT_EQ(now.memory_limit[0], 8000ull << 20);
  EXPECT_EQ(now.sm_limit[0], 60u);
  EXPECT_EQ(now.priority, 1);
  EXPECT_EQ(now.policy, protocol::CorePolicy::kForce);
  EXPECT_EQ(now.state_file, dir.path() + "/vgpu/state.cache");
  EXPECT_EQ(now.device_uuids, std::vector<std::string>{"GPU-a"});
  // Seen again (a restart lists every pod): nothing to do.
  const ino_t after = inode(path);
  EXPECT_EQ(follow.pod_changed(pod("GPU-a,NVIDIA,8000,60:;")), 0);
  EXPECT_EQ(inode(path), after);
}

// A dynamic MIG device: the file names the MIG device Allocate made, the
// allocation its GPU; the pod's hami.io/vgpu-mig-allocations ties them.
TEST_F(LimitsFollowerTest, ADynamicMigDeviceIsResizedByItsMigUuid) {
  PlanInput in;
  in.hook_path = dir.path();
  in.pod_uid = kUid;
  in.container = "main";
  in.gpus = {{"MIG-m", 9984, 100, SharingMode::kTimeslice}};
  in.cache_name = "state.cache";
  auto plan = plan_container(in, PluginConfig{});
  ASSERT_TRUE(plan) << plan.error().message;
  std::filesystem::create_directories(plan->limits_dir);
  ASSERT_TRUE(replace_small_file(plan->limits_file, plan->limits_text, 0644));
  auto with_mig = [&](const std::string& allocated) {
    json p = pod(allocated);
    p["metadata"]["annotations"][protocol::kMigAllocations] =
        R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"1g.10gb",)"
        R"("placement":{"start":0,"size":1},"migUUID":"MIG-m","gpuInstanceID":9,)"
        R"("computeInstanceID":0}])";
    auto typed = k8s::Pod::from_json(p);
    p["metadata"]["annotations"][protocol::kDecisionSignature] =
        keys.sign(protocol::decision_of(*typed));
    return p;
  };
  LimitsFollower follow("node-1", dir.path(), trust);
  // Without gpumem the limit stays the profile's memory Allocate gave.
  EXPECT_EQ(follow.pod_changed(with_mig("GPU-a,NVIDIA,0,100:;")), 0);
  EXPECT_EQ(follow.pod_changed(with_mig("GPU-a,NVIDIA,5000,50:;")), 1);
  const protocol::ContainerLimits now = read(plan->limits_file);
  EXPECT_EQ(now.memory_limit[0], 5000ull << 20);
  EXPECT_EQ(now.sm_limit[0], 50u);
  EXPECT_EQ(now.device_uuids, std::vector<std::string>{"MIG-m"});
}

TEST_F(LimitsFollowerTest, ForgedOrAlteredAllocationChangesNothing) {
  const std::string path = allocate(4000, 30);
  const auto text = read_small_file(path, protocol::kMaxLimitsFileSize);
  LimitsFollower follow("node-1", dir.path(), trust);
  json altered = pod("GPU-a,NVIDIA,4000,30:;");
  altered["metadata"]["annotations"][protocol::kDevicesAllocated] = "GPU-a,NVIDIA,80000,100:;";
  EXPECT_EQ(follow.pod_changed(altered), 0);
  json unsigned_pod = pod("GPU-a,NVIDIA,80000,100:;");
  unsigned_pod["metadata"]["annotations"].erase(protocol::kDecisionSignature);
  EXPECT_EQ(follow.pod_changed(unsigned_pod), 0);
  EXPECT_EQ(follow.pod_changed(pod("GPU-a,NVIDIA,80000,100:")), 1);  // the control: signed
  ASSERT_TRUE(replace_small_file(path, *text, 0644));
  EXPECT_EQ(follow.pod_changed(pod("not an allocation")), 0);
  EXPECT_EQ(*read_small_file(path, protocol::kMaxLimitsFileSize), *text);
}

TEST_F(LimitsFollowerTest, OnlyRunningPodsOfThisNodeWithFilesItWrote) {
  const std::string path = allocate(4000, 30);
  const auto text = read_small_file(path, protocol::kMaxLimitsFileSize);
  LimitsFollower follow("node-1", dir.path(), trust);
  EXPECT_EQ(follow.pod_changed(pod("GPU-a,NVIDIA,8000,30:;", "node-2")), 0);
  EXPECT_EQ(follow.pod_changed(pod("GPU-a,NVIDIA,8000,30:;", "node-1", "allocating")), 0);
  EXPECT_EQ(follow.pod_changed(pod("GPU-b,NVIDIA,8000,30:;")), 0);  // other GPUs
  EXPECT_EQ(*read_small_file(path, protocol::kMaxLimitsFileSize), *text);
  // A container this plugin did not allocate gets no file.
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
  EXPECT_EQ(follow.pod_changed(pod("GPU-a,NVIDIA,8000,30:;")), 0);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST_F(LimitsFollowerTest, MpsClientMemoryOnlyGoesDown) {
  const std::string path = allocate(4000, 30, SharingMode::kMps);
  LimitsFollower follow("node-1", dir.path(), trust);
  EXPECT_EQ(follow.pod_changed(pod("GPU-a,NVIDIA,8000,30:;")), 0);
  EXPECT_EQ(follow.pod_changed(pod("GPU-a,NVIDIA,4000,60:;")), 0);
  EXPECT_EQ(read(path).memory_limit[0], 4000ull << 20);
  EXPECT_EQ(follow.pod_changed(pod("GPU-a,NVIDIA,2000,30:;")), 1);
  const protocol::ContainerLimits now = read(path);
  EXPECT_EQ(now.memory_limit[0], 2000ull << 20);
  EXPECT_EQ(now.mode(), SharingMode::kMps);
}

}  // namespace
}  // namespace hami::deviceplugin
