// The scheduler's /metrics body: upstream's per-GPU, per-pod and overview
// gauges with upstream's names, labels and units, hami_build_info, and the
// pre-2.5 names only with set_legacy.
#include "scheduler/metrics.hpp"

#include <gtest/gtest.h>

#include <string>

#include "protocol/mig_allocations.hpp"
#include "scheduler/feed.hpp"
#include "scheduler/helpers.hpp"

namespace hami::scheduler {
namespace {

bool has(const std::string& body, const std::string& line) {
  return body.find(line) != std::string::npos;
}

class SchedulerMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    feed.node_changed(test::sched_node("a", 2, 16000));
    // Two pods on GPU-a-0: 3000 MiB / 30 cores and 1000 MiB / 25 cores.
    feed.pod_changed(test::placed_pod("p1", "u1", "a", "GPU-a-0,NVIDIA,3000,30:;"));
    feed.pod_changed(test::placed_pod("p2", "u2", "a", "GPU-a-0,NVIDIA,1000,25:;"));
  }
  ClusterCache cache;
  CacheFeed feed{cache};
  Metrics metrics;
};

// The time a bind waited for a worker is exported beside the answer times.
TEST_F(SchedulerMetricsTest, QueueWaitIsAHistogramByVerb) {
  metrics.queue_wait(Verb::kBind, std::chrono::milliseconds(3));
  metrics.queue_wait(Verb::kBind, std::chrono::seconds(12));
  const std::string body = metrics.render(cache);
  EXPECT_TRUE(has(body, "# TYPE hami_scheduler_queue_wait_seconds histogram\n")) << body;
  EXPECT_TRUE(
      has(body, "hami_scheduler_queue_wait_seconds_bucket{verb=\"bind\",le=\"0.005000\"} 1\n"))
      << body;
  EXPECT_TRUE(
      has(body, "hami_scheduler_queue_wait_seconds_bucket{verb=\"bind\",le=\"10.000000\"} 1\n"));
  EXPECT_TRUE(
      has(body, "hami_scheduler_queue_wait_seconds_bucket{verb=\"bind\",le=\"15.000000\"} 2\n"));
  EXPECT_TRUE(has(body, "hami_scheduler_queue_wait_seconds_count{verb=\"bind\"} 2\n"));
  EXPECT_TRUE(has(body, "hami_scheduler_queue_wait_seconds_count{verb=\"filter\"} 0\n"));
  EXPECT_EQ(metrics.queue_waits(Verb::kBind), 2u);
}

TEST_F(SchedulerMetricsTest, UpstreamGaugesWithTheirLabels) {
  const std::string body = metrics.render(cache);
  // device_cores holds the GPU's total cores, as upstream, not the allocated.
  EXPECT_TRUE(has(body,
                  "hami_gpu_memory_allocated_bytes{node=\"a\",device_uuid=\"GPU-a-0\","
                  "device_index=\"0\",device_cores=\"100\",device_type=\"NVIDIA-Tesla T4\","
                  "zone=\"vGPU\"} 4194304000\n"))
      << body;
  EXPECT_TRUE(has(body,
                  "hami_node_gpu_overview{node=\"a\",device_uuid=\"GPU-a-0\",device_index=\"0\","
                  "device_cores=\"100\",device_memory_limit=\"16000\",device_type=\"NVIDIA-Tesla "
                  "T4\",zone=\"vGPU\"} 4194304000\n"))
      << body;
  EXPECT_TRUE(has(body,
                  "hami_node_gpu_overview{node=\"a\",device_uuid=\"GPU-a-1\",device_index=\"1\","
                  "device_cores=\"100\",device_memory_limit=\"16000\",device_type=\"NVIDIA-Tesla "
                  "T4\",zone=\"vGPU\"} 0\n"));
  EXPECT_TRUE(has(body,
                  "hami_gpu_core_allocated_ratio{node=\"a\",device_uuid=\"GPU-a-0\","
                  "device_index=\"0\",device_type=\"NVIDIA-Tesla T4\",zone=\"vGPU\"} 55\n"));
  EXPECT_TRUE(has(body,
                  "hami_gpu_shared_count{node=\"a\",device_uuid=\"GPU-a-0\",device_index=\"0\","
                  "device_type=\"NVIDIA-Tesla T4\",zone=\"vGPU\"} 2\n"));
  EXPECT_TRUE(has(body,
                  "hami_vgpu_memory_allocated_bytes{namespace=\"default\",node=\"a\",pod=\"p1\","
                  "container_index=\"0\",device_uuid=\"GPU-a-0\",zone=\"vGPU\"} 3145728000\n"))
      << body;
  EXPECT_TRUE(has(body,
                  "hami_vgpu_core_allocated_ratio{namespace=\"default\",node=\"a\",pod=\"p2\","
                  "container_index=\"0\",device_uuid=\"GPU-a-0\",zone=\"vGPU\"} 25\n"));
  // hami_build_info: upstream's six labels, no zone.
  const auto at = body.find("hami_build_info{version=\"");
  ASSERT_NE(at, std::string::npos) << body;
  const std::string line = body.substr(at, body.find('\n', at) - at);
  for (const char* label :
       {"revision=\"", "build_date=\"", "go_version=\"", "compiler=\"gcc-", "platform=\"linux/"}) {
    EXPECT_NE(line.find(label), std::string::npos) << label << " in " << line;
  }
  EXPECT_EQ(line.find("zone"), std::string::npos) << line;
  EXPECT_EQ(line.substr(line.size() - 2), " 1");
  // No legacy names unless asked for.
  EXPECT_FALSE(has(body, "nodeGPUOverview"));
  EXPECT_FALSE(has(body, "GPUDeviceMemoryLimit"));
}

TEST_F(SchedulerMetricsTest, LegacyNamesBehindTheFlag) {
  metrics.set_legacy(true);
  const std::string body = metrics.render(cache);
  EXPECT_TRUE(has(body,
                  "GPUDeviceMemoryLimit{nodeid=\"a\",deviceuuid=\"GPU-a-0\",deviceidx=\"0\","
                  "devicetype=\"NVIDIA-Tesla T4\",zone=\"vGPU\"} 16777216000\n"))
      << body;
  EXPECT_TRUE(
      has(body,
          "GPUDeviceMemoryAllocated{nodeid=\"a\",deviceuuid=\"GPU-a-0\",deviceidx=\"0\","
          "devicecores=\"100\",devicetype=\"NVIDIA-Tesla T4\",zone=\"vGPU\"} 4194304000\n"));
  EXPECT_TRUE(has(body,
                  "GPUDeviceCoreAllocated{nodeid=\"a\",deviceuuid=\"GPU-a-0\",deviceidx=\"0\","
                  "devicetype=\"NVIDIA-Tesla T4\",zone=\"vGPU\"} 55\n"));
  EXPECT_TRUE(has(body,
                  "GPUDeviceSharedNum{nodeid=\"a\",deviceuuid=\"GPU-a-0\",deviceidx=\"0\","
                  "devicetype=\"NVIDIA-Tesla T4\",zone=\"vGPU\"} 2\n"));
  EXPECT_TRUE(has(body,
                  "nodeGPUOverview{nodeid=\"a\",deviceuuid=\"GPU-a-0\",deviceidx=\"0\","
                  "devicecores=\"100\",devicememorylimit=\"16000\",devicetype=\"NVIDIA-Tesla T4\","
                  "zone=\"vGPU\"} 4194304000\n"));
  EXPECT_TRUE(has(body,
                  "nodeGPUMemoryPercentage{nodeid=\"a\",deviceuuid=\"GPU-a-0\",deviceidx=\"0\","
                  "zone=\"vGPU\"} 0.25\n"));
  EXPECT_TRUE(has(body,
                  "vGPUMemoryAllocated{podnamespace=\"default\",nodename=\"a\",podname=\"p1\","
                  "containeridx=\"0\",deviceuuid=\"GPU-a-0\",zone=\"vGPU\"} 3145728000\n"));
  EXPECT_TRUE(has(body,
                  "vGPUCoreAllocated{podnamespace=\"default\",nodename=\"a\",podname=\"p1\","
                  "containeridx=\"0\",deviceuuid=\"GPU-a-0\",zone=\"vGPU\"} 30\n"));
  // The modern names stay.
  EXPECT_TRUE(has(body, "# TYPE hami_node_gpu_overview gauge\n"));
}

// Upstream's hami_node_gpu_mig_instance_info: one series per dynamic MIG
// instance the plugin has made (an entry without its MIG UUID has none yet).
TEST(SchedulerMigMetricsTest, OneSeriesPerRealisedMigInstance) {
  ClusterCache cache;
  CacheFeed feed(cache);
  feed.node_changed(test::mig_node("m"));
  auto pod = test::placed_pod("p", "u", "m", "GPU-m-0,NVIDIA,20000,0:;");
  std::vector<protocol::MigAllocation> allocs = {
      {.gpu_uuid = "GPU-m-0", .profile = "2g.20gb", .placement = {2, 2}}};
  pod["metadata"]["annotations"][protocol::kMigAllocations] =
      protocol::encode_mig_allocations(allocs);
  feed.pod_changed(pod);
  Metrics metrics;
  EXPECT_FALSE(has(metrics.render(cache), "hami_node_gpu_mig_instance_info{"));
  allocs[0].mig_uuid = "MIG-1";
  allocs[0].gpu_instance_id = 5;
  allocs[0].compute_instance_id = 0;
  pod["metadata"]["annotations"][protocol::kMigAllocations] =
      protocol::encode_mig_allocations(allocs);
  feed.pod_changed(pod);
  const std::string body = metrics.render(cache);
  EXPECT_TRUE(has(body,
                  "hami_node_gpu_mig_instance_info{node=\"m\",device_uuid=\"GPU-m-0\","
                  "device_index=\"0\",mig_uuid=\"MIG-1\",profile=\"2g.20gb\","
                  "gpu_instance_id=\"5\",compute_instance_id=\"0\",placement_start=\"2\","
                  "placement_size=\"2\",zone=\"vGPU\"} 1\n"))
      << body;
  feed.pod_deleted(pod);
  EXPECT_FALSE(has(metrics.render(cache), "hami_node_gpu_mig_instance_info{"));
}

TEST_F(SchedulerMetricsTest, PodGoneLeavesNoSeries) {
  feed.pod_deleted(test::placed_pod("p1", "u1", "a", "GPU-a-0,NVIDIA,3000,30:;"));
  const std::string body = metrics.render(cache);
  EXPECT_FALSE(has(body, "pod=\"p1\"")) << body;
  EXPECT_TRUE(has(body, "pod=\"p2\""));
  EXPECT_TRUE(has(body,
                  "hami_node_gpu_memory_allocated_ratio{node=\"a\",device_uuid=\"GPU-a-0\","
                  "device_index=\"0\",device_type=\"NVIDIA-Tesla T4\",zone=\"vGPU\"} 0.0625\n"))
      << body;
}

}  // namespace
}  // namespace hami::scheduler
