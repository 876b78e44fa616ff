// src/nvml against the simulated libnvidia-ml.so.1 (tests/support/simgpu):
// loading and its errors, device enumeration, memory, scripted processes,
// samples and failures (SIMGPU_NVML_SCRIPT), buffer growth, per-process SM
// utilisation measured from a real CUDA client's simulated GPU engine, Xid
// events (scripted `xid` lines; a library without the event functions), and
// the topology queries and read_topology over scripted topologies.
#include "nvml/nvml.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "nvml/topology.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"

namespace hami::nvml {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kMiB = 1ull << 20;
const char* const kUuids[] = {"GPU-5a3e0000-0000-4000-8000-00000000000a",
                              "GPU-5a3e0000-0000-4000-8000-00000000000b",
                              "GPU-5a3e0000-0000-4000-8000-00000000000c"};

// The simulated GPUs this process and its children share, set before the
// simulated NVML is first loaded (it reads them when it maps the state file).
struct SimEnv {
  test::TempDir dir;
  SimEnv() {
    ::setenv("SIMGPU_STATE", dir.file("gpu.state").c_str(), 1);
    ::setenv("SIMGPU_DEVICES",
             (std::string(kUuids[0]) + ":80g," + kUuids[1] + ":40g," + kUuids[2] + ":24g").c_str(),
             1);
    ::setenv("SIMGPU_NUMA", "0,1,-1", 1);
    ::setenv("SIMGPU_NVML_SCRIPT", script().c_str(), 1);
    for (const char* v : {"SIMGPU_NVML_PID_OFFSET", "SIMGPU_FAIL", "SIMGPU_DRIVER_VERSION",
                          "SIMGPU_CONTEXT_SIZE", "SIMGPU_KERNEL_NS"})
      ::unsetenv(v);
  }
  std::string script() const { return dir.file("nvml.script"); }
};

SimEnv& sim() {
  static SimEnv env;
  return env;
}

// Replaces the script in one step (a new inode), as the header asks.
void write_script(const std::string& text) {
  const std::string tmp = sim().script() + ".tmp";
  std::ofstream(tmp) << text;
  ASSERT_EQ(std::rename(tmp.c_str(), sim().script().c_str()), 0);
}

class NvmlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    write_script("");
    auto lib = Library::open(SIMNVML);
    ASSERT_TRUE(lib) << lib.error().message;
    lib_ = std::move(*lib);
  }

  template <class T>
  static T ok(Result<T> r) {
    EXPECT_TRUE(r) << r.error().message;
    return r ? std::move(r).value() : T{};
  }

  std::unique_ptr<Library> lib_;
};

const ProcessMemory* find_pid(const std::vector<ProcessMemory>& v, uint32_t pid) {
  auto it = std::find_if(v.begin(), v.end(), [&](const ProcessMemory& p) { return p.pid == pid; });
  return it == v.end() ? nullptr : &*it;
}
const ProcessSample* find_pid(const std::vector<ProcessSample>& v, uint32_t pid) {
  auto it = std::find_if(v.begin(), v.end(), [&](const ProcessSample& p) { return p.pid == pid; });
  return it == v.end() ? nullptr : &*it;
}

TEST(NvmlOpen, MissingLibraryNamesThePathAndTheDriver) {
  sim();
  const std::string path = "/nonexistent/hami/libnvidia-ml.so.1";
  auto lib = Library::open(path);
  ASSERT_FALSE(lib);
  EXPECT_THAT(lib.error().message, HasSubstr(path));
  EXPECT_THAT(lib.error().message, HasSubstr("NVIDIA driver"));
}

TEST(NvmlOpen, LibraryWithoutNvmlNamesTheMissingSymbol) {
  sim();
  auto lib = Library::open(SIMCUDA);  // the simulated libcuda.so.1: no NVML in it
  ASSERT_FALSE(lib);
  EXPECT_THAT(lib.error().message, HasSubstr(SIMCUDA));
  EXPECT_THAT(lib.error().message, HasSubstr("symbol nvmlInit_v2 not found"));
}

TEST(NvmlOpen, InitFailureCarriesTheNvmlCode) {
  sim();
  write_script("fail nvmlInit_v2\n");
  auto lib = Library::open(SIMNVML);
  write_script("");
  ASSERT_FALSE(lib);
  EXPECT_THAT(lib.error().message, HasSubstr("nvmlInit_v2 failed: NVML_ERROR_UNKNOWN (999)"));
}

TEST_F(NvmlTest, EnumeratesDevicesWithTheirProperties) {
  ASSERT_EQ(ok(lib_->device_count()), 3);
  const uint64_t totals[] = {80 * kGiB, 40 * kGiB, 24 * kGiB};
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    const DeviceInfo d = ok(lib_->device(i));
    EXPECT_EQ(d.index, i);
    EXPECT_EQ(d.uuid, kUuids[i]);
    EXPECT_EQ(d.name, "Simulated GPU " + std::to_string(i));
    EXPECT_EQ(d.memory_total, totals[i]);
    char bus[32];
    std::snprintf(bus, sizeof bus, "00000000:%02X:00.0", 0x10 + i);
    EXPECT_EQ(d.pci_bus_id, bus);
    EXPECT_EQ(d.minor, std::optional<unsigned>(static_cast<unsigned>(i)));
    EXPECT_EQ(d.cc_major, 9);
    EXPECT_EQ(d.cc_minor, 0);
  }
  EXPECT_EQ(ok(lib_->device(0)).numa_node, std::optional<int>(0));
  EXPECT_EQ(ok(lib_->device(1)).numa_node, std::optional<int>(1));
  EXPECT_EQ(ok(lib_->device(2)).numa_node, std::nullopt);  // NVML_ERROR_NOT_SUPPORTED

  auto missing = lib_->device(3);
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.error().message, HasSubstr("device 3"));
  EXPECT_THAT(missing.error().message, HasSubstr("NVML_ERROR_INVALID_ARGUMENT"));
  EXPECT_FALSE(lib_->device(-1));
  EXPECT_EQ(ok(lib_->driver_version()), "550.127.05");
}

TEST_F(NvmlTest, ReportsEachDevicesComputeMode) {
  ::setenv("SIMGPU_COMPUTE_MODE", "3,2", 1);
  EXPECT_EQ(ok(lib_->device(0)).compute_mode, std::optional<int>(kComputeExclusiveProcess));
  EXPECT_EQ(ok(lib_->device(1)).compute_mode, std::optional<int>(kComputeProhibited));
  EXPECT_EQ(ok(lib_->device(2)).compute_mode, std::optional<int>(kComputeDefault));
  ::unsetenv("SIMGPU_COMPUTE_MODE");
  write_script("fail nvmlDeviceGetComputeMode 1\n");
  EXPECT_EQ(ok(lib_->device(1)).compute_mode, std::nullopt);
}

TEST_F(NvmlTest, OptionalQueriesAreUnknownOnFailureButALostGpuIsAnError) {
  write_script("fail nvmlDeviceGetNumaNodeId\nfail nvmlDeviceGetPciInfo_v3 1\n");
  const DeviceInfo d1 = ok(lib_->device(1));
  EXPECT_EQ(d1.numa_node, std::nullopt);
  EXPECT_EQ(d1.pci_bus_id, "");
  EXPECT_EQ(ok(lib_->device(0)).pci_bus_id, "00000000:10:00.0");

  write_script("gpu_lost nvmlDeviceGetNumaNodeId 1\n");
  auto lost = lib_->device(1);
  ASSERT_FALSE(lost);
  EXPECT_EQ(lib_->last_error(), kGpuIsLost);
  EXPECT_THAT(lost.error().message, HasSubstr("nvmlDeviceGetNumaNodeId(device 1)"));
  EXPECT_THAT(lost.error().message, HasSubstr("NVML_ERROR_GPU_IS_LOST (15"));
  EXPECT_TRUE(lib_->device(0));
}

TEST_F(NvmlTest, MemoryIncludesScriptedProcesses) {
  const MemoryInfo before = ok(lib_->memory(1));
  EXPECT_EQ(before.total, 40 * kGiB);
  EXPECT_EQ(before.used + before.free, before.total);
  write_script("process 1 4242 1073741824 0\n");
  const MemoryInfo after = ok(lib_->memory(1));
  EXPECT_EQ(after.used, before.used + kGiB);
  EXPECT_EQ(after.used + after.free, after.total);
}

TEST_F(NvmlTest, ReportsScriptedProcessesAndSamplesAndRereadsTheScript) {
  write_script(
      "# device pid bytes sm\n"
      "process 0 4242 1073741824 37\n"
      "process 0 4243 2097152 0\n"
      "process 1 4242 5 12\n");
  const auto procs0 = ok(lib_->processes(0));
  ASSERT_NE(find_pid(procs0, 4242), nullptr);
  EXPECT_EQ(find_pid(procs0, 4242)->used_bytes, kGiB);
  ASSERT_NE(find_pid(procs0, 4243), nullptr);
  EXPECT_EQ(find_pid(procs0, 4243)->used_bytes, 2 * kMiB);
  const auto procs1 = ok(lib_->processes(1));
  ASSERT_NE(find_pid(procs1, 4242), nullptr);
  EXPECT_EQ(find_pid(procs1, 4242)->used_bytes, 5u);
  EXPECT_EQ(find_pid(procs1, 4243), nullptr);

  const auto samples = ok(lib_->process_samples(0, 0));
  ASSERT_NE(find_pid(samples, 4242), nullptr);
  EXPECT_EQ(find_pid(samples, 4242)->sm, 37u);
  const auto now_us = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                                std::chrono::system_clock::now().time_since_epoch())
                                                .count());
  EXPECT_NEAR(static_cast<double>(find_pid(samples, 4242)->timestamp_us),
              static_cast<double>(now_us), 60e6);  // CLOCK_REALTIME microseconds
  EXPECT_EQ(find_pid(samples, 4243), nullptr);     // no SM time: no sample
  EXPECT_GE(ok(lib_->utilization(0)).gpu, 37u);
  // Nothing newer than an hour from now; nothing at all on device 2.
  EXPECT_TRUE(ok(lib_->process_samples(0, now_us + 3600ull * 1000000)).empty());
  EXPECT_TRUE(ok(lib_->process_samples(2, 0)).empty());

  write_script("process 0 4244 1 50\n");
  const auto rewritten = ok(lib_->processes(0));
  EXPECT_EQ(find_pid(rewritten, 4242), nullptr);
  ASSERT_NE(find_pid(rewritten, 4244), nullptr);
  const auto resampled = ok(lib_->process_samples(0, 0));
  ASSERT_NE(find_pid(resampled, 4244), nullptr);
  EXPECT_EQ(find_pid(resampled, 4244)->sm, 50u);
  EXPECT_EQ(find_pid(resampled, 4242), nullptr);
}

TEST_F(NvmlTest, ScriptedFailuresCarryTheNvmlCode) {
  write_script(
      "fail nvmlDeviceGetUtilizationRates\n"
      "gpu_lost nvmlDeviceGetComputeRunningProcesses_v3 1\n");
  auto u = lib_->utilization(0);
  ASSERT_FALSE(u);
  EXPECT_EQ(lib_->last_error(), kUnknown);
  EXPECT_THAT(u.error().message,
              HasSubstr("nvmlDeviceGetUtilizationRates(device 0): NVML_ERROR_UNKNOWN (999"));

  auto p1 = lib_->processes(1);
  ASSERT_FALSE(p1);
  EXPECT_EQ(lib_->last_error(), kGpuIsLost);
  EXPECT_THAT(p1.error().message, HasSubstr("NVML_ERROR_GPU_IS_LOST"));
  EXPECT_TRUE(lib_->processes(0));  // only device 1 is lost

  write_script("");
  EXPECT_TRUE(lib_->utilization(0));
  EXPECT_TRUE(lib_->processes(1));
}

TEST_F(NvmlTest, GrowsItsBuffersForManyProcesses) {
  std::string text;
  for (int i = 0; i < 200; ++i) {
    text += "process 2 " + std::to_string(10000 + i) + " " + std::to_string((i + 1) * kMiB) + " " +
            std::to_string(1 + i % 50) + "\n";
  }
  write_script(text);
  const auto procs = ok(lib_->processes(2));
  const auto samples = ok(lib_->process_samples(2, 0));
  EXPECT_EQ(procs.size(), 200u);
  EXPECT_EQ(samples.size(), 200u);
  for (int i = 0; i < 200; ++i) {
    const auto pid = static_cast<uint32_t>(10000 + i);
    const ProcessMemory* p = find_pid(procs, pid);
    ASSERT_NE(p, nullptr) << pid;
    EXPECT_EQ(p->used_bytes, static_cast<uint64_t>(i + 1) * kMiB);
    const ProcessSample* s = find_pid(samples, pid);
    ASSERT_NE(s, nullptr) << pid;
    EXPECT_EQ(s->sm, static_cast<unsigned>(1 + i % 50));
  }
}

// A real CUDA client (the simulated libcuda.so.1) queues 5 s of kernels on
// device 0; NVML, in this process, sees its memory and its engine's busy time.
TEST_F(NvmlTest, ReportsTheBusyTimeOfARealClientsEngine) {
  auto child =
      test::Child::spawn({CUDA_CLIENT, "init", "ctx:0", "launchpath:kernel:5000", "mark", "hold"},
                         {{"LD_LIBRARY_PATH", SIMGPU_LIB_DIR},
                          {"LD_PRELOAD", test::kUnset},
                          {"CUDA_VISIBLE_DEVICES", test::kUnset},
                          {"SIMGPU_KERNEL_NS", "1000000"},
                          {"ASAN_OPTIONS", "detect_leaks=0"}});
  ASSERT_TRUE(child.wait_for_line("op=mark")) << child.out();
  EXPECT_THAT(child.out(), HasSubstr("op=launchpath:kernel:5000 rc=0"));
  EXPECT_THAT(child.out(), HasSubstr("ran=5000"));
  const auto pid = static_cast<uint32_t>(child.pid());

  const ProcessSample* seen = nullptr;
  std::vector<ProcessSample> samples;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (seen == nullptr && std::chrono::steady_clock::now() < deadline) {
    samples = ok(lib_->process_samples(0, 0));
    seen = find_pid(samples, pid);
    if (seen == nullptr) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_NE(seen, nullptr) << "no sample for the client's PID " << pid;
  EXPECT_GT(seen->sm, 0u);
  EXPECT_GT(ok(lib_->utilization(0)).gpu, 0u);
  // Its context's memory, on the device it used and no other.
  const auto procs = ok(lib_->processes(0));
  ASSERT_NE(find_pid(procs, pid), nullptr);
  EXPECT_GE(find_pid(procs, pid)->used_bytes, 300 * kMiB);  // SIMGPU_CONTEXT_SIZE default
  EXPECT_EQ(find_pid(ok(lib_->process_samples(1, 0)), pid), nullptr);
  EXPECT_EQ(find_pid(ok(lib_->processes(1)), pid), nullptr);
}

// Waits for the next Xid within `within`, failing the test when none comes.
std::optional<XidEvent> next_xid(Library& lib, std::chrono::milliseconds within = 5s) {
  auto ev = lib.wait_xid(within);
  EXPECT_TRUE(ev) << ev.error().message;
  if (!ev) return std::nullopt;
  return *ev;
}

TEST_F(NvmlTest, XidEventsArriveInOrderWithTheirDeviceIndex) {
  ASSERT_EQ(ok(lib_->watch_xid_events()), 3);
  write_script("xid 1 79\nxid 2 48\n");
  auto first = next_xid(*lib_);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->index, 1);
  EXPECT_EQ(first->xid, 79u);
  auto second = next_xid(*lib_);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->index, 2);
  EXPECT_EQ(second->xid, 48u);

  // Each line once; a rewritten script delivers only its new lines.
  auto none = lib_->wait_xid(30ms);
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_EQ(*none, std::nullopt);
  write_script("xid 1 79\nxid 2 48\nxid 0 94\n");
  auto third = next_xid(*lib_);
  ASSERT_TRUE(third);
  EXPECT_EQ(third->index, 0);
  EXPECT_EQ(third->xid, 94u);
}

TEST_F(NvmlTest, XidWaitTimesOutWithNullopt) {
  ASSERT_EQ(ok(lib_->watch_xid_events()), 3);
  const auto start = std::chrono::steady_clock::now();
  auto none = lib_->wait_xid(100ms);
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_EQ(*none, std::nullopt);
  EXPECT_GE(waited, 100ms);
  EXPECT_LT(waited, 5s);
  auto now = lib_->wait_xid(0ms);  // a poll
  ASSERT_TRUE(now);
  EXPECT_EQ(*now, std::nullopt);
}

TEST_F(NvmlTest, XidWatchSkipsDevicesThatCannotRegister) {
  write_script("fail nvmlDeviceRegisterEvents 1\n");
  ASSERT_EQ(ok(lib_->watch_xid_events()), 2);
  // Device 1's event is lost (not registered); device 2's arrives.
  write_script("xid 1 79\nxid 2 63\n");
  auto ev = next_xid(*lib_);
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->index, 2);
  EXPECT_EQ(ev->xid, 63u);
}

TEST_F(NvmlTest, XidWaitErrorsCarryTheNvmlCode) {
  auto before = lib_->wait_xid(0ms);
  ASSERT_FALSE(before);
  EXPECT_THAT(before.error().message, HasSubstr("watch_xid_events"));
  ASSERT_EQ(ok(lib_->watch_xid_events()), 3);
  write_script("gpu_lost nvmlEventSetWait_v2\n");
  auto lost = lib_->wait_xid(10ms);
  ASSERT_FALSE(lost);
  EXPECT_EQ(lib_->last_error(), kGpuIsLost);
  EXPECT_THAT(lost.error().message, HasSubstr("nvmlEventSetWait_v2: NVML_ERROR_GPU_IS_LOST"));
}

TEST_F(NvmlTest, XidEventsNeedAScriptInTheSimulator) {
  ::unsetenv("SIMGPU_NVML_SCRIPT");
  auto r = lib_->watch_xid_events();
  ::setenv("SIMGPU_NVML_SCRIPT", sim().script().c_str(), 1);
  ASSERT_FALSE(r);
  EXPECT_EQ(lib_->last_error(), kNotSupported);
  EXPECT_THAT(r.error().message, HasSubstr("nvmlEventSetCreate: NVML_ERROR_NOT_SUPPORTED"));
}

TEST(NvmlOpen, LibraryWithoutEventFunctionsSaysEventsAreNotAvailable) {
  sim();
  write_script("");
  const std::string path = std::string(SIMGPU_LIB_DIR) + "/libnvidia-ml-noevents.so.1";
  auto lib = Library::open(path);
  ASSERT_TRUE(lib) << lib.error().message;
  auto n = (*lib)->device_count();  // the rest works
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(*n, 3);
  auto r = (*lib)->watch_xid_events();
  ASSERT_FALSE(r);
  EXPECT_EQ((*lib)->last_error(), kFunctionNotFound);
  EXPECT_THAT(r.error().message, HasSubstr(path));
  EXPECT_THAT(r.error().message, HasSubstr("NVML events are not available"));
  EXPECT_THAT(r.error().message, HasSubstr("nvmlEventSetCreate not found"));
  EXPECT_FALSE((*lib)->wait_xid(0ms));
}

// ---------------------------------------------------------------- topology

const PairLink* find_pair(const Topology& t, int a, int b) {
  for (const PairLink& p : t.pairs)
    if ((p.a == a && p.b == b) || (p.a == b && p.b == a)) return &p;
  return nullptr;
}

TEST_F(NvmlTest, TopologyWithoutAScriptFollowsTheNumaNodes) {
  // GPU 0 on NUMA 0, GPU 1 on NUMA 1, GPU 2 unknown; no NVLink anywhere.
  EXPECT_EQ(ok(lib_->common_ancestor(0, 1)), kTopologySystem);
  EXPECT_EQ(ok(lib_->common_ancestor(0, 0)), kTopologyInternal);
  EXPECT_TRUE(ok(lib_->nvlinks(0)).empty());
  EXPECT_EQ(ok(lib_->p2p_status(0, 1, kP2pRead)), kP2pOk);
  EXPECT_NE(ok(lib_->p2p_status(0, 1, kP2pNvlink)), kP2pOk);
}

TEST_F(NvmlTest, ReportsScriptedAncestorsNvlinksAndP2p) {
  write_script(
      "topology 0 1 single\n"
      "nvlink 1 0 4\n"
      "topology 2 0 hostbridge\n"
      "p2p 0 2 1\n");
  EXPECT_EQ(ok(lib_->common_ancestor(1, 0)), kTopologySingle);
  EXPECT_EQ(ok(lib_->common_ancestor(0, 2)), kTopologyHostBridge);
  const std::vector<NvLink> links = ok(lib_->nvlinks(0));
  ASSERT_EQ(links.size(), 4u);
  for (unsigned i = 0; i < links.size(); ++i) {
    EXPECT_EQ(links[i].link, i);
    EXPECT_EQ(links[i].remote_type, kNvLinkRemoteGpu);
    EXPECT_TRUE(same_bus_id(links[i].remote_bus_id, ok(lib_->device(1)).pci_bus_id))
        << links[i].remote_bus_id;
  }
  EXPECT_TRUE(ok(lib_->nvlinks(2)).empty());
  EXPECT_EQ(ok(lib_->p2p_status(2, 0, kP2pRead)), 1);  // CHIPSET_NOT_SUPPORTED
  EXPECT_EQ(ok(lib_->p2p_status(0, 1, kP2pNvlink)), kP2pOk);

  const Topology t = read_topology(*lib_, {0, 1, 2});
  EXPECT_TRUE(t.problems.empty()) << t.problems[0];
  ASSERT_EQ(t.pairs.size(), 3u);
  const PairLink* p01 = find_pair(t, 0, 1);
  ASSERT_NE(p01, nullptr);
  EXPECT_EQ(p01->common_ancestor, std::optional<int>(kTopologySingle));
  EXPECT_EQ(p01->nvlinks, 4);
  EXPECT_FALSE(p01->via_nvswitch);
  const PairLink* p02 = find_pair(t, 0, 2);
  ASSERT_NE(p02, nullptr);
  EXPECT_EQ(p02->nvlinks, 0);
  EXPECT_EQ(p02->p2p[kP2pRead], std::optional<int>(1));
  EXPECT_EQ(p2p_status_name(p02->p2p[kP2pRead]), "chipset_not_supported");
  EXPECT_EQ(topology_level_name(p02->common_ancestor), "PHB");
}

TEST_F(NvmlTest, GpusBehindNvSwitchesCountTheNarrowerSide) {
  write_script(
      "nvswitch 0 18\n"
      "nvswitch 1 12\n");
  const std::vector<NvLink> links = ok(lib_->nvlinks(0));
  ASSERT_EQ(links.size(), 18u);
  EXPECT_EQ(links[0].remote_type, kNvLinkRemoteSwitch);
  const Topology t = read_topology(*lib_, {0, 1, 2});
  const PairLink* p01 = find_pair(t, 0, 1);
  ASSERT_NE(p01, nullptr);
  EXPECT_EQ(p01->nvlinks, 12);
  EXPECT_TRUE(p01->via_nvswitch);
  const PairLink* p02 = find_pair(t, 0, 2);  // GPU 2 has no switch links
  ASSERT_NE(p02, nullptr);
  EXPECT_EQ(p02->nvlinks, 0);
}

TEST_F(NvmlTest, TopologyQueriesThatFailLeaveTheFactUnknownAndSayWhy) {
  write_script(
      "nvlink 0 1 2\n"
      "fail nvmlDeviceGetTopologyCommonAncestor 0\n"
      "fail nvmlDeviceGetP2PStatus\n");
  const Topology t = read_topology(*lib_, {0, 1});
  ASSERT_EQ(t.pairs.size(), 1u);
  EXPECT_EQ(t.pairs[0].common_ancestor, std::nullopt);
  EXPECT_EQ(t.pairs[0].p2p[kP2pRead], std::nullopt);
  EXPECT_EQ(t.pairs[0].nvlinks, 2);  // what NVML did answer is kept
  ASSERT_EQ(t.problems.size(), 2u);
  EXPECT_THAT(t.problems[0], HasSubstr("nvmlDeviceGetTopologyCommonAncestor"));
  EXPECT_THAT(t.problems[1], HasSubstr("nvmlDeviceGetP2PStatus"));
}

TEST(NvmlTopology, BusIdsMatchWhateverTheirDomainWidthOrCase) {
  EXPECT_TRUE(same_bus_id("00000000:1A:00.0", "0000:1a:00.0"));
  EXPECT_TRUE(same_bus_id("0000:1a:00.0", "00000000:1A:00.0"));
  EXPECT_FALSE(same_bus_id("00000000:1A:00.0", "00000000:1B:00.0"));
}

}  // namespace
}  // namespace hami::nvml
