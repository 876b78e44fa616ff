// The node agent's pass over real state files: what it reads, resolves,
// aggregates, feeds back, writes, and exports; and that it writes nothing to a
// file it cannot trust.
#include "monitor/agent.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "monitor/metrics.hpp"
#include "monitor/state_writer.hpp"
#include "region/region.hpp"
#include "support/fixtures.hpp"
#include "support/temp_dir.hpp"

namespace hami::monitor {
namespace {

namespace fs = std::filesystem;

constexpr const char* kGpuA = "GPU-11111111-2222-3333-4444-555555555555";
constexpr const char* kGpuB = "GPU-66666666-7777-8888-9999-000000000000";
constexpr const char* kFixture = "hami-core-v1.2-one-process.cache.gz";
constexpr const char* kFixtureGpu = "GPU-90496d2f-68cf-ad72-f361-08e59367de69";

// Reports what the test scripts, as NVML would for the node.
class ScriptedSampler final : public GpuSampler {
 public:
  explicit ScriptedSampler(std::vector<GpuSample>* gpus) : gpus_(gpus) {}
  std::vector<GpuSample> sample() override { return *gpus_; }

 private:
  std::vector<GpuSample>* gpus_;
};

class StaticNames final : public PodDirectory {
 public:
  void refresh_if_unknown(const std::vector<std::string>& uids) override { seen = uids; }
  std::optional<PodName> find(std::string_view uid) const override {
    if (uid == "pod-a") return PodName{"team-a", "trainer-0"};
    return std::nullopt;
  }
  std::vector<std::string> seen;
};

class AgentTest : public ::testing::Test {
 protected:
  std::string dir(const std::string& name) {
    const std::string d = root_.path() + "/containers/" + name;
    fs::create_directories(d);
    return d;
  }
  // A state file as libvgpu.so creates it, on one GPU.
  region::Region make_file(const std::string& container_dir, const char* uuid, int priority = 1,
                           uint64_t limit = 4ull << 30) {
    region::OpenOptions opt;
    opt.initial.memory_limit[0] = limit;
    opt.initial.priority = priority;
    auto r = region::Region::open(dir(container_dir) + "/vgpu.cache", opt);
    EXPECT_TRUE(r) << r.error().message;
    r->set_device_count(1);
    EXPECT_TRUE(r->set_device_uuid(0, uuid));
    return std::move(*r);
  }
  Agent make_agent(bool write_back = true) {
    return Agent(
        AgentOptions{.hook_path = root_.path(), .node_name = "node-1", .write_back = write_back},
        std::make_unique<ScriptedSampler>(&gpus_), &names_);
  }

  test::TempDir root_;
  std::vector<GpuSample> gpus_;
  StaticNames names_;
};

TEST_F(AgentTest, ResolvesOwnProcessAndWritesNvmlSamples) {
  auto region = make_file("pod-a_main", kGpuA);
  auto me = region::self_identity();
  ASSERT_TRUE(me);
  auto slot = region.register_process(*me);
  ASSERT_TRUE(slot) << slot.error().message;
  region.slot(*slot).add_usage(0, region::UsageKind::kData, 512ull << 20);
  region.slot(*slot).set_spilled(0, 128ull << 20);
  gpus_ = {GpuSample{.index = 0,
                     .uuid = kGpuA,
                     .name = "NVIDIA H200",
                     .memory_total = 141ull << 30,
                     .memory_used = 1ull << 30,
                     .utilization = 40,
                     .processes = {GpuProcess{static_cast<uint32_t>(getpid()), 700ull << 20, 37},
                                   GpuProcess{999999, 1ull << 20, 3}}}};

  Agent agent = make_agent();
  auto v = agent.run_pass();
  ASSERT_EQ(v->containers.size(), 1u);
  const ContainerView& c = v->containers[0];
  EXPECT_EQ(c.pod_namespace, "team-a");
  EXPECT_EQ(c.pod_name, "trainer-0");
  EXPECT_EQ(names_.seen, std::vector<std::string>{"pod-a"});
  ASSERT_EQ(c.processes.size(), 1u);
  ASSERT_TRUE(c.processes[0].host_pid);
  EXPECT_EQ(*c.processes[0].host_pid, getpid());
  ASSERT_EQ(c.devices.size(), 1u);
  EXPECT_EQ(c.devices[0].used, 512ull << 20);
  EXPECT_EQ(c.devices[0].spilled, 128ull << 20);    // CUDA_OVERSUBSCRIBE's host part
  EXPECT_EQ(c.devices[0].nvml_used, 700ull << 20);  // only our process, not pid 999999
  EXPECT_EQ(c.devices[0].sm_util, 37u);
  EXPECT_EQ(c.devices[0].memory_limit, 4ull << 30);

  // Written back into the slot, where the library and `vgpu inspect` read them.
  EXPECT_EQ(region.slot(*slot).host_pid(), getpid());
  auto snap = region::read_snapshot(root_.path() + "/containers/pod-a_main/vgpu.cache");
  ASSERT_TRUE(snap);
  ASSERT_EQ(snap->slots.size(), 1u);
  EXPECT_EQ(snap->slots[0].nvml_used[0], 700ull << 20);
  EXPECT_EQ(snap->slots[0].sm_util[0], 37u);
  EXPECT_EQ(v->counters.unresolved_slots, 0u);
  EXPECT_EQ(v->counters.host_pids_written, 1u);

  const std::string text = render_metrics(*v, {.version = "t"});
  EXPECT_NE(text.find("hami_container_device_utilization_ratio{namespace=\"team-a\",pod=\"trainer-"
                      "0\",container=\"main\",vdevice_index=\"0\",device_uuid=\"" +
                      std::string(kGpuA) + "\",zone=\"vGPU\"} 37\n"),
            std::string::npos)
      << text;
  EXPECT_NE(
      text.find("hami_host_gpu_utilization_ratio{node=\"node-1\",device_index=\"0\","
                "device_uuid=\"" +
                std::string(kGpuA) + "\",device_type=\"NVIDIA-NVIDIA H200\",zone=\"vGPU\"} 40"),
      std::string::npos)
      << text;
  EXPECT_NE(
      text.find("hami_container_device_memory_spilled_bytes{namespace=\"team-a\",pod=\"trainer-"
                "0\",container=\"main\",vdevice_index=\"0\",device_uuid=\"" +
                std::string(kGpuA) + "\",zone=\"vGPU\"} 134217728\n"),
      std::string::npos)
      << text;

  // A second pass with nothing changed writes nothing more.
  auto v2 = agent.run_pass();
  EXPECT_EQ(v2->counters.host_pids_written, 1u);
  EXPECT_EQ(v2->counters.passes, 2u);
}

TEST_F(AgentTest, ReadOnlyAgentWritesNothing) {
  auto region = make_file("pod-a_main", kGpuA);
  auto slot = region.register_process(*region::self_identity());
  ASSERT_TRUE(slot);
  region.set_recent_kernel(2);
  gpus_ = {GpuSample{.index = 0,
                     .uuid = kGpuA,
                     .processes = {GpuProcess{static_cast<uint32_t>(getpid()), 1 << 20, 50}}}};
  Agent agent = make_agent(/*write_back=*/false);
  auto v = agent.run_pass();
  ASSERT_EQ(v->containers.size(), 1u);
  EXPECT_EQ(v->containers[0].devices[0].sm_util, 50u);  // still observed
  EXPECT_EQ(region.slot(*slot).host_pid(), 0);
  EXPECT_EQ(region.recent_kernel(), 2);
  EXPECT_EQ(v->counters.write_errors, 0u);
}

// An MPS client's share is its thread percentage: from the plugin's record
// for a pod, from the job's directory for `vgpu run --sharing mps`; the
// metric and the JSON carry it as the SM share. Priority blocks no MPS client.
TEST_F(AgentTest, MpsClientsShowTheirThreadPercentageAsTheirShare) {
  auto pod = make_file("pod-a_main", kGpuA);
  fs::create_directories(root_.path() + "/limits");
  const std::string rec = root_.path() + "/limits/pod-a_main";
  std::ofstream(rec) << "CUDA_DEVICE_MEMORY_LIMIT_0=4096m\nVGPU_DEVICE_UUID_0=" << kGpuA
                     << "\nCUDA_MPS_ACTIVE_THREAD_PERCENTAGE=30\nCUDA_TASK_PRIORITY=0\n";
  fs::permissions(rec, fs::perms(0644));
  pod.set_recent_kernel(2);  // a busy high-priority MPS client...
  auto job = make_file("local-1_serve", kGpuA);
  job.set_recent_kernel(2);  // ...does not block this low-priority one
  std::ofstream(dir("local-1_serve") + "/mps") << "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=100\n";
  auto plain = make_file("local-2_train", kGpuA);
  // A job's file that says nothing readable is a problem, not a share.
  auto bad = make_file("local-3_bad", kGpuA);
  std::ofstream(dir("local-3_bad") + "/mps") << "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=0\n";

  Agent agent = make_agent(/*write_back=*/false);
  auto v = agent.run_pass();
  ASSERT_EQ(v->containers.size(), 4u);
  std::map<std::string, const ContainerView*> by;
  for (const ContainerView& c : v->containers)
    by[c.ref.pod_uid] = &c;
  EXPECT_EQ(by.at("pod-a")->mps_thread_percentage, 30u);
  EXPECT_EQ(by.at("pod-a")->devices.at(0).sm_limit, 30u);
  EXPECT_EQ(by.at("local-1")->mps_thread_percentage, 100u);
  EXPECT_EQ(by.at("local-1")->recent_kernel, 1);  // active, not blocked (-1)
  EXPECT_FALSE(by.at("local-2")->mps_thread_percentage);
  EXPECT_FALSE(by.at("local-3")->mps_thread_percentage);
  EXPECT_EQ(v->counters.file_problems, 1u);
  // The metric carries the cap as the SM share (100: none).
  std::istringstream metrics(render_metrics(*v, {.version = "t"}));
  std::map<std::string, std::string> share;
  for (std::string l; std::getline(metrics, l);) {
    if (l.rfind("hami_container_device_sm_limit_ratio{", 0) != 0) continue;
    for (const char* uid : {"trainer-0", "local-1"})
      if (l.find(std::string("\"") + uid + "\"") != std::string::npos)
        share[uid] = l.substr(l.rfind(' ') + 1);
  }
  EXPECT_EQ(share["trainer-0"], "30");  // pod-a's name
  EXPECT_EQ(share["local-1"], "100");

  // Writing back, a job directory's own mps file does not exempt it from
  // blocking (the tenant writes it); the plugin's record does.
  auto high = make_file("local-4_high", kGpuA, /*priority=*/0);  // time-sliced, busy
  high.set_recent_kernel(2);
  job.set_recent_kernel(2);
  Agent writer = make_agent(/*write_back=*/true);
  auto w = writer.run_pass();
  bool seen = false;
  for (const ContainerView& c : w->containers) {
    if (c.ref.pod_uid != "local-1") continue;
    seen = true;
    EXPECT_EQ(c.recent_kernel, -1);
  }
  EXPECT_TRUE(seen);
}

// Upstream's feedback semantics through real files: the high-priority
// container active on a GPU blocks the low-priority one there and turns its
// utilisation switch on; a container on another GPU is left alone.
TEST_F(AgentTest, FeedbackBlocksLowPriorityOnSharedGpu) {
  auto high = make_file("pod-h_main", kGpuA, /*priority=*/0);
  auto low = make_file("pod-l_main", kGpuA, /*priority=*/1);
  auto other = make_file("pod-o_main", kGpuB, /*priority=*/1);
  high.set_recent_kernel(2);
  low.set_recent_kernel(2);
  other.set_recent_kernel(2);
  Agent agent = make_agent();
  agent.run_pass();
  EXPECT_EQ(high.recent_kernel(), 1);
  EXPECT_EQ(low.recent_kernel(), -1);
  EXPECT_EQ(other.recent_kernel(), 1);
  EXPECT_EQ(low.utilization_switch(), 1);
  EXPECT_EQ(high.utilization_switch(), 0);
  EXPECT_EQ(other.utilization_switch(), 0);

  // The high-priority container goes quiet: next pass lifts the block.
  agent.run_pass();  // high decays 1 -> 0: inactive
  EXPECT_EQ(high.recent_kernel(), 0);
  EXPECT_EQ(low.recent_kernel(), 0);
  EXPECT_EQ(low.utilization_switch(), 0);
}

// A launch between the agent's read and its write must not be overwritten.
TEST(StateWriter, RecentKernelWrittenOnlyIfUnchanged) {
  test::TempDir d;
  const std::string path = d.file("x.cache");
  auto r = region::Region::open(path, {});
  ASSERT_TRUE(r);
  r->set_recent_kernel(1);
  auto snap = region::read_snapshot(path);
  ASSERT_TRUE(snap);
  auto w = StateWriter::open(*snap);
  ASSERT_TRUE(w) << w.error().message;
  r->set_recent_kernel(2);  // the library marks a launch
  auto wrote = w->update_recent_kernel(/*expected=*/1, /*value=*/0);
  ASSERT_TRUE(wrote);
  EXPECT_FALSE(*wrote);
  EXPECT_EQ(r->recent_kernel(), 2);
  wrote = w->update_recent_kernel(2, 1);
  ASSERT_TRUE(wrote);
  EXPECT_TRUE(*wrote);
  EXPECT_EQ(r->recent_kernel(), 1);
}

TEST(StateWriter, RefusesReplacedOrTruncatedFile) {
  test::TempDir d;
  const std::string path = d.file("x.cache");
  { ASSERT_TRUE(region::Region::open(path, {})); }
  auto snap = region::read_snapshot(path);
  ASSERT_TRUE(snap);

  // Replaced by another file under the same name.
  fs::copy_file(path, d.file("y.cache"));
  fs::rename(d.file("y.cache"), path);
  auto w = StateWriter::open(*snap);
  ASSERT_FALSE(w);
  EXPECT_NE(w.error().message.find("replaced since it was read"), std::string::npos);

  // Truncated after the writer opened it: the write is refused and the file
  // is not grown back.
  auto snap2 = region::read_snapshot(path);
  ASSERT_TRUE(snap2);
  auto w2 = StateWriter::open(*snap2);
  ASSERT_TRUE(w2) << w2.error().message;
  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  auto ok = w2->set_host_pid(0, 42);
  ASSERT_FALSE(ok);
  EXPECT_NE(ok.error().message.find("truncated"), std::string::npos);
  EXPECT_EQ(fs::file_size(path), 4096u);
}

// Broken files are skipped whole: no crash, and not one byte changes.
TEST_F(AgentTest, NeverWritesToInvalidFiles) {
  auto good = make_file("pod-a_main", kGpuA);
  good.set_recent_kernel(2);
  const std::string truncated = dir("pod-t_main") + "/vgpu.cache";
  const std::string foreign = dir("pod-f_main") + "/vgpu.cache";
  {
    auto r = region::Region::open(truncated, {});
    ASSERT_TRUE(r);
    r->set_recent_kernel(2);
  }
  ASSERT_EQ(::truncate(truncated.c_str(), 1'000'000), 0);
  std::vector<std::byte> junk(2008952, std::byte{0x5a});
  test::write_file(foreign, junk);
  const auto before_t = test::read_file(truncated);
  const auto before_f = test::read_file(foreign);

  Agent agent = make_agent();
  auto v = agent.run_pass();
  ASSERT_EQ(v->containers.size(), 1u);
  EXPECT_EQ(v->containers[0].ref.pod_uid, "pod-a");
  EXPECT_EQ(v->counters.file_problems, 2u);
  EXPECT_EQ(good.recent_kernel(), 1);
  EXPECT_EQ(test::read_file(truncated), before_t);
  EXPECT_EQ(test::read_file(foreign), before_f);
}

// The state file HAMi-core wrote on a real GPU is read and exported with the
// values it holds (a slot of 1,753,351,168 bytes on a 4 GiB limit).
TEST_F(AgentTest, ExportsUpstreamFixture) {
  test::write_file(dir("pod-a_main") + "/abc.cache", test::read_gzip_fixture(kFixture));
  Agent agent = make_agent(/*write_back=*/false);
  auto v = agent.run_pass();
  ASSERT_EQ(v->containers.size(), 1u);
  const std::string text = render_metrics(*v, {.version = "t", .legacy = true});
  const std::string labels =
      "{namespace=\"team-a\",pod=\"trainer-0\",container=\"main\","
      "vdevice_index=\"0\",device_uuid=\"" +
      std::string(kFixtureGpu) + "\",zone=\"vGPU\"}";
  EXPECT_NE(text.find("hami_vgpu_memory_used_bytes" + labels + " 1753351168\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("hami_vgpu_memory_limit_bytes" + labels + " 4294967296\n"),
            std::string::npos);
  EXPECT_NE(text.find("hami_container_device_memory_bytes" + labels + " 1753351168\n"),
            std::string::npos);
  EXPECT_NE(text.find("vGPU_device_memory_usage_in_bytes{podnamespace=\"team-a\",podname=\"trainer-"
                      "0\",ctrname=\"main\",vdeviceid=\"0\",deviceuuid=\"" +
                      std::string(kFixtureGpu) + "\",zone=\"vGPU\"} 1753351168\n"),
            std::string::npos);
}

}  // namespace
}  // namespace hami::monitor
