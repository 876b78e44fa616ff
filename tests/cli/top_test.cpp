// `vgpu top`: the frame it renders from the agent's view, and the command over
// a real state directory.
#include "cli/top.hpp"

#include "cli/inspect.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "region/region.hpp"
#include "support/fixtures.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"

namespace hami::cli {
namespace {

TEST(Top, GroupsContainersUnderTheirGpu) {
  monitor::NodeView v;
  v.gpus.push_back(monitor::GpuSample{.index = 0,
                                      .uuid = "GPU-a",
                                      .name = "NVIDIA H200",
                                      .memory_total = 141ull << 30,
                                      .memory_used = 3ull << 30,
                                      .utilization = 55});
  v.gpus.push_back(monitor::GpuSample{
      .index = 1, .uuid = "GPU-b", .name = "NVIDIA H200", .error = "NVML_ERROR_GPU_IS_LOST"});
  monitor::ContainerView c;
  c.ref = {"uid-1", "main"};
  c.pod_namespace = "ml";
  c.pod_name = "trainer-0";
  c.active = true;
  c.utilization_switch = 1;
  c.devices.push_back({.vdevice_index = 0,
                       .uuid = "GPU-a",
                       .memory_limit = 4ull << 30,
                       .sm_limit = 30,
                       .used = 1ull << 30,
                       .sm_util = 29});
  c.processes.push_back({.slot = 0, .pid = 7, .live = true, .host_pid = 4242});
  v.containers.push_back(c);
  monitor::ContainerView blocked;
  blocked.ref = {"uid-2", "side"};
  blocked.recent_kernel = -1;
  blocked.devices.push_back({.vdevice_index = 0, .uuid = "GPU-c"});
  v.containers.push_back(blocked);

  const std::string frame = render_top(v);
  EXPECT_NE(frame.find("GPU 0  NVIDIA H200  GPU-a  memory 3 GiB / 141 GiB  util 55%"),
            std::string::npos)
      << frame;
  EXPECT_NE(frame.find("ml/trainer-0  main       1 GiB   4 GiB  29%  30%    active,contended  "
                       "7->4242"),
            std::string::npos)
      << frame;
  EXPECT_NE(frame.find("GPU 1  NVIDIA H200  GPU-b  (NVML_ERROR_GPU_IS_LOST)\n  no containers"),
            std::string::npos)
      << frame;
  // A GPU only the state files know still shows, with its containers.
  EXPECT_NE(frame.find("GPU GPU-c  (not reported by NVML)"), std::string::npos) << frame;
  EXPECT_NE(frame.find("uid-2  side"), std::string::npos) << frame;
  EXPECT_NE(frame.find("blocked"), std::string::npos) << frame;
}

TEST(Top, MigDevicesAreSectionsOfTheirOwn) {
  monitor::NodeView v;
  v.gpus.push_back(monitor::GpuSample{
      .index = 0, .uuid = "GPU-p", .name = "NVIDIA H200", .memory_total = 141ull << 30});
  monitor::GpuSample m{.index = 0,
                       .uuid = "MIG-1",
                       .name = "NVIDIA H200 MIG 3g.71gb",
                       .memory_total = 70ull << 30,
                       .memory_used = 2ull << 30};
  m.mig = monitor::MigOf{"GPU-p", "3g.71gb", 2, 0};
  v.gpus.push_back(m);
  monitor::ContainerView c;
  c.ref = {"uid-1", "main"};
  c.pod_namespace = "ml";
  c.pod_name = "infer-0";
  c.devices.push_back(
      {.vdevice_index = 0, .uuid = "MIG-1", .memory_limit = 4ull << 30, .used = 1ull << 30});
  v.containers.push_back(c);
  const std::string frame = render_top(v);
  EXPECT_NE(frame.find("GPU 0 MIG 3g.71gb (GI 2, CI 0)  NVIDIA H200 MIG 3g.71gb  MIG-1  memory "
                       "2 GiB / 70 GiB\n"),
            std::string::npos)
      << frame;
  const size_t section = frame.find("MIG-1  memory");
  EXPECT_NE(frame.find("ml/infer-0", section), std::string::npos) << frame;
}

TEST(Top, SpilledMemoryShowsBesideTheUsage) {
  monitor::NodeView v;
  monitor::ContainerView c;
  c.ref = {"uid-1", "main"};
  c.devices.push_back({.vdevice_index = 0,
                       .uuid = "GPU-a",
                       .memory_limit = 8ull << 30,
                       .used = 6ull << 30,
                       .spilled = 2ull << 30});
  v.containers.push_back(c);
  const std::string frame = render_top(v);
  EXPECT_NE(frame.find("6 GiB (2 GiB host)"), std::string::npos) << frame;
}

TEST(Top, MpsClientsShowTheirThreadPercentage) {
  monitor::NodeView v;
  for (auto [name, pct] : {std::pair<const char*, uint64_t>{"svc", 100}, {"trn", 60}}) {
    monitor::ContainerView c;
    c.ref = {"uid-1", name};
    c.mps_thread_percentage = pct;
    c.devices.push_back({.vdevice_index = 0, .uuid = "GPU-a", .sm_limit = pct});
    v.containers.push_back(c);
  }
  const std::string frame = render_top(v);
  EXPECT_NE(frame.find("mps 60%"), std::string::npos) << frame;
  EXPECT_NE(frame.find("mps -"), std::string::npos) << frame;
}

TEST(Top, OnceOverAStateDirectoryWithoutNvml) {
  test::TempDir root;
  const std::string dir = root.path() + "/containers/pod-9_app";
  std::filesystem::create_directories(dir);
  region::OpenOptions opt;
  opt.initial.memory_limit[0] = 2ull << 30;
  auto r = region::Region::open(dir + "/x.cache", opt);
  ASSERT_TRUE(r);
  r->set_device_count(1);
  ASSERT_TRUE(r->set_device_uuid(0, "GPU-z"));
  r->set_recent_kernel(2);  // the agent's pass would decrement it; top must not
  const auto before = test::read_file(dir + "/x.cache");
  auto res =
      test::run_process({VGPU_BINARY, "top", "--once", "--no-nvml", "--hook-path", root.path()});
  ASSERT_EQ(res.exit_code, 0) << res.err;
  EXPECT_NE(res.out.find("GPU GPU-z  (no NVML: host figures unknown)"), std::string::npos)
      << res.out;
  EXPECT_NE(res.out.find("pod-9  app"), std::string::npos) << res.out;
  EXPECT_EQ(test::read_file(dir + "/x.cache"), before);  // read-only

  auto bad = test::run_process({VGPU_BINARY, "top", "--interval", "10ms"});
  EXPECT_EQ(bad.exit_code, kExitUsage);
  EXPECT_NE(bad.err.find("at least 100ms"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace hami::cli
