// Hostile tenants against the node agent (issue 23, docs/security.md): a
// container writes whatever it likes into its own state file and directory.
// It must not stall another container, switch its own share off, hide memory
// from the limit check, or make the agent read without bound or forge its log.
// Each test is an attack that worked before the agent defended against it.
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "monitor/agent.hpp"
#include "monitor/host_pid.hpp"
#include "monitor/metrics.hpp"
#include "region/control_file.hpp"
#include "region/layout_v1.hpp"
#include "region/region.hpp"
#include "support/free_port.hpp"
#include "support/subprocess.hpp"
#include "support/tamper.hpp"
#include "support/temp_dir.hpp"

namespace hami::monitor {
namespace {

namespace fs = std::filesystem;
using region::SharedRegion;

constexpr const char* kGpuA = "GPU-5a3e0000-0000-4000-8000-000000000000";  // simulated GPU 0
constexpr const char* kGpuB = "GPU-5a3e0000-0000-4000-8000-000000000001";
constexpr uint64_t MiB = 1ull << 20;

class NoGpus final : public GpuSampler {
 public:
  std::vector<GpuSample> sample() override { return {}; }
};

// A node as the device plugin lays it out under `root`: per container a state
// directory, a limits file (the plugin's record) and a control file.
class Node {
 public:
  explicit Node(std::string root) : root_(std::move(root)) {}

  std::string dir(const std::string& key) const { return root_ + "/containers/" + key; }
  std::string state(const std::string& key) const { return dir(key) + "/vgpu.cache"; }
  std::string limits(const std::string& key) const { return root_ + "/limits/" + key; }
  std::string control(const std::string& key) const { return root_ + "/control/" + key; }

  // The plugin's record and a fresh control file, as Allocate leaves them.
  void allocate(const std::string& key, const std::string& gpu, std::optional<int> priority,
                const std::string& memory = "1g") const {
    fs::create_directories(dir(key));
    fs::create_directories(root_ + "/limits");
    fs::create_directories(root_ + "/control");
    std::ofstream(limits(key)) << "CUDA_DEVICE_MEMORY_LIMIT_0=" << memory << "\n"
                               << (priority
                                       ? "CUDA_TASK_PRIORITY=" + std::to_string(*priority) + "\n"
                                       : std::string())
                               << "CUDA_DEVICE_MEMORY_SHARED_CACHE=/usr/local/vgpu/vgpu.cache\n"
                               << "VGPU_DEVICE_UUID_0=" << gpu << "\n";
    fs::permissions(limits(key), fs::perms(0644));
    std::ofstream(control(key), std::ios::binary) << region::control_file_bytes();
    fs::permissions(control(key), fs::perms(0644));
  }

  // A state file as the library creates it; then whatever the tenant writes.
  void state_file(const std::string& key, const std::string& gpu, int32_t priority,
                  int32_t recent_kernel) const {
    fs::create_directories(dir(key));
    region::OpenOptions opt;
    opt.initial.memory_limit[0] = 1ull << 30;
    auto r = region::Region::open(state(key), opt);
    ASSERT_TRUE(r) << r.error().message;
    r->set_device_count(1);
    ASSERT_TRUE(r->set_device_uuid(0, gpu));
    r->set_priority(priority);
    r->set_recent_kernel(recent_kernel);
  }

  int32_t recent_kernel(const std::string& key) const {
    auto s = region::read_snapshot(state(key));
    return s ? s->recent_kernel : INT32_MIN;
  }
  region::ControlState control_state(const std::string& key) const {
    std::ifstream in(control(key), std::ios::binary);
    const std::string bytes(std::istreambuf_iterator<char>(in), {});
    auto st = region::parse_control(bytes.data(), bytes.size(), control(key));
    return st ? *st : region::ControlState{-1, -1};
  }

 private:
  std::string root_;
};

class AgentTamper : public ::testing::Test {
 protected:
  Agent agent() {
    return Agent(AgentOptions{.hook_path = root_.path(), .node_name = "node-1"},
                 std::make_unique<NoGpus>(), nullptr);
  }
  test::TempDir root_;
  Node node_{root_.path()};
};

// Issue 23.4: a crafted file with priority INT32_MIN and the victim's GPU
// UUID made the agent block the victim (recent_kernel = -1) while the
// attacker "ran". Priority and GPUs now come from the plugin's records.
TEST_F(AgentTamper, PriorityAndGpusComeFromThePluginsRecord) {
  node_.allocate("victim_main", kGpuA, 1);
  node_.state_file("victim_main", kGpuA, 1, 2);
  node_.allocate("attacker_main", kGpuB, 1);
  node_.state_file("attacker_main", kGpuA, INT32_MIN, 2);
  Agent a = agent();
  a.run_pass();
  EXPECT_EQ(node_.recent_kernel("victim_main"), 1) << "the victim was blocked";
  EXPECT_EQ(node_.control_state("victim_main").blocked, 0);

  // A container the plugin did give priority 0 on the victim's GPU does block it.
  node_.allocate("high_main", kGpuA, 0);
  node_.state_file("high_main", kGpuA, 0, 2);
  node_.state_file("victim_main", kGpuA, 1, 2);
  a.run_pass();
  EXPECT_EQ(node_.recent_kernel("victim_main"), -1);
  EXPECT_EQ(node_.control_state("victim_main").blocked, 1);
}

// Without records (standalone, another device plugin) the file's values are
// all there is: outside upstream's ranges they mean nothing.
TEST_F(AgentTamper, OutOfRangeValuesAreIgnoredWithoutARecord) {
  node_.state_file("victim_main", kGpuA, 1, 2);
  node_.state_file("attacker_main", kGpuA, INT32_MIN, INT32_MAX);
  Agent a = agent();
  auto v = a.run_pass();
  EXPECT_EQ(node_.recent_kernel("victim_main"), 1) << "the victim was blocked";
  EXPECT_EQ(node_.recent_kernel("attacker_main"), 0) << "a value the library never writes";
  for (const ContainerView& c : v->containers) {
    if (c.ref.pod_uid == "attacker") {
      EXPECT_EQ(c.priority, 1);
      EXPECT_FALSE(c.active);
    }
  }
}

// The agent's switch reaches the read-only control file our library reads; a
// tenant's own write to the state file's switch changes nothing there.
TEST_F(AgentTamper, SwitchAndBlockAreWrittenToTheControlFile) {
  node_.allocate("a_main", kGpuA, 1);
  node_.allocate("b_main", kGpuA, 1);
  node_.state_file("a_main", kGpuA, 1, 2);
  node_.state_file("b_main", kGpuA, 1, 2);
  Agent a = agent();
  a.run_pass();
  EXPECT_EQ(node_.control_state("a_main").utilization_switch, 1) << "two tenants contend";
  EXPECT_EQ(node_.control_state("b_main").utilization_switch, 1);
  // b goes quiet and a alone is left: no contention, the share may rest.
  ASSERT_TRUE(test::poke(node_.state("a_main"), offsetof(SharedRegion, recent_kernel), 2));
  ASSERT_TRUE(test::poke(node_.state("b_main"), offsetof(SharedRegion, recent_kernel), 0));
  a.run_pass();
  EXPECT_EQ(node_.control_state("a_main").utilization_switch, 0);
  // b "launches" and clears its state file's switch as well: the control file
  // says enforce, and that is what the library reads.
  ASSERT_TRUE(test::poke(node_.state("a_main"), offsetof(SharedRegion, recent_kernel), 2));
  ASSERT_TRUE(test::poke(node_.state("b_main"), offsetof(SharedRegion, recent_kernel), 2));
  ASSERT_TRUE(test::poke(node_.state("b_main"), offsetof(SharedRegion, utilization_switch), 0));
  a.run_pass();
  EXPECT_EQ(node_.control_state("b_main").utilization_switch, 1);
}

// A tenant writes a process of another pod (PID inside that container's
// namespace and its start time) into its own slot: the agent must not count
// that process, or act on it, as the tenant's.
TEST_F(AgentTamper, ASlotCannotClaimAnotherPodsProcess) {
  const std::string victim_pod = "0b5c8e7e-1111-4222-8333-444455556666";
  const std::string tenant_pod = "9f1e2d3c-aaaa-4bbb-8ccc-dddddddddddd";
  ProcEntry victim;
  victim.host_pid = 4242;
  victim.ns_pids = {4242, 1};
  victim.start_time = 777;
  victim.state = 'S';
  victim.cgroup = "0::/kubepods.slice/kubepods-pod" + victim_pod + ".slice/cri-containerd-1.scope";
  const ProcTable table = ProcTable::from_entries({victim});
  EXPECT_FALSE(resolve_host_pid(table, 1, 777, tenant_pod).host_pid);
  // Its own pod still resolves, and a standalone directory (no pod cgroup) too.
  EXPECT_EQ(resolve_host_pid(table, 1, 777, victim_pod).host_pid, 4242);
}

// A program that never loads the library (a static binary, raw ioctls) makes
// no state file and no slot: its pod is still checked, through the processes
// whose cgroup names the pod.
class OneGpu final : public GpuSampler {
 public:
  explicit OneGpu(std::vector<GpuProcess> procs) : procs_(std::move(procs)) {}
  std::vector<GpuSample> sample() override {
    GpuSample g;
    g.uuid = kGpuA;
    g.name = "Simulated GPU 0";
    g.memory_total = 80ull << 30;
    g.processes = procs_;
    return {g};
  }

 private:
  std::vector<GpuProcess> procs_;
};

TEST_F(AgentTamper, ProcessesTheLibraryNeverSawAreCheckedByTheirCgroup) {
  const std::string pod = "0b5c8e7e-1111-4222-8333-444455556666";
  node_.allocate(pod + "_main", kGpuA, 1);  // a 1 GiB limit, and no state file ever
  test::TempDir proc;  // a host /proc with the pod's one process, host PID 4242
  fs::create_directories(proc.file("4242"));
  std::ofstream(proc.file("4242/stat"))
      << "4242 (static-bin) S 1 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 777 4096 100 0\n";
  std::ofstream(proc.file("4242/status")) << "Name:\tstatic-bin\nNSpid:\t4242\t1\n";
  std::ofstream(proc.file("4242/cgroup"))
      << "0::/kubepods.slice/kubepods-pod" << pod << ".slice/cri-containerd-1.scope\n";
  Agent a(AgentOptions{.hook_path = root_.path(), .proc_root = proc.path(), .node_name = "node-1"},
          std::make_unique<OneGpu>(std::vector<GpuProcess>{{4242, 2ull << 30, 90}}), nullptr);
  auto first = a.run_pass();
  ASSERT_EQ(first->pod_checks.size(), 1u);
  EXPECT_EQ(first->pod_checks[0].nvml_used, 2ull << 30);
  EXPECT_EQ(first->pod_checks[0].limit, 1ull << 30);
  EXPECT_FALSE(first->pod_checks[0].over) << "one pass is not yet two";
  auto second = a.run_pass();
  ASSERT_EQ(second->pod_checks.size(), 1u);
  EXPECT_TRUE(second->pod_checks[0].over);
  EXPECT_EQ(second->pod_checks[0].host_pids, std::vector<uint32_t>{4242});
  EXPECT_NE(render_metrics(*second, {.version = "t"})
                .find("hami_pod_memory_over_limit{namespace=\"\",pod=\"" + pod +
                      "\",device_uuid=\"" + std::string(kGpuA) + "\",zone=\"vGPU\"} 1"),
            std::string::npos);
}

// A resize lowered a pod's limit below what it holds (docs/resize.md: nothing
// is taken away). With --over-limit-action kill the agent killed it two passes
// later. It is now judged by the limit before the resize until NVML shows it
// under the new one; past that, the new limit holds as any other.
class ChangingGpu final : public GpuSampler {
 public:
  explicit ChangingGpu(std::shared_ptr<std::vector<GpuProcess>> procs) : procs_(std::move(procs)) {}
  std::vector<GpuSample> sample() override {
    GpuSample g;
    g.uuid = kGpuA;
    g.name = "Simulated GPU 0";
    g.memory_total = 80ull << 30;
    g.processes = *procs_;
    return {g};
  }

 private:
  std::shared_ptr<std::vector<GpuProcess>> procs_;
};

TEST_F(AgentTamper, ALimitLoweredBelowUseByAResizeKillsNothing) {
  const std::string pod = "0b5c8e7e-1111-4222-8333-777788889999";
  node_.allocate(pod + "_main", kGpuA, 1, "4g");
  // The pod's process: a child of ours, so the kill that must come last
  // cannot hit anything else.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::execlp("sleep", "sleep", "60", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const std::string id = std::to_string(child);
  test::TempDir proc;
  fs::create_directories(proc.file(id));
  std::ofstream(proc.file(id + "/stat"))
      << id << " (python3) S 1 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 777 4096 100 0\n";
  std::ofstream(proc.file(id + "/status")) << "Name:\tpython3\nNSpid:\t" << id << "\t1\n";
  std::ofstream(proc.file(id + "/cgroup"))
      << "0::/kubepods.slice/kubepods-pod" << pod << ".slice/cri-containerd-1.scope\n";
  const auto pid = static_cast<uint32_t>(child);
  auto procs =
      std::make_shared<std::vector<GpuProcess>>(std::vector<GpuProcess>{{pid, 3ull << 30, 50}});
  Agent a(AgentOptions{.hook_path = root_.path(),
                       .proc_root = proc.path(),
                       .node_name = "node-1",
                       .over_limit_action = OverLimitAction::kKill},
          std::make_unique<ChangingGpu>(procs), nullptr);
  auto check = [&] {
    auto v = a.run_pass();
    EXPECT_EQ(v->pod_checks.size(), 1u);
    return v->pod_checks.empty() ? PodDeviceCheck{} : v->pod_checks[0];
  };
  EXPECT_FALSE(check().over) << "3 GiB under 4 GiB";
  node_.allocate(pod + "_main", kGpuA, 1, "1g");  // the resize: 4 GiB -> 1 GiB
  for (int pass = 0; pass < 3; ++pass) {
    const PodDeviceCheck c = check();
    EXPECT_EQ(c.limit, 1ull << 30);
    EXPECT_FALSE(c.over) << "pass " << pass << ": the 3 GiB it held before the resize";
    EXPECT_EQ(c.killed, 0);
  }
  (*procs)[0].used_bytes = 512 * MiB;  // it freed memory: now under the new limit
  EXPECT_FALSE(check().over);
  (*procs)[0].used_bytes = 3ull << 30;  // and grew past it again: the new limit holds
  EXPECT_FALSE(check().over) << "one pass is not yet two";
  const PodDeviceCheck c = check();
  EXPECT_TRUE(c.over);
  EXPECT_EQ(c.host_pids, std::vector<uint32_t>{pid});
  EXPECT_EQ(c.killed, 1);
  int status = 0;
  if (c.killed == 0) ::kill(child, SIGKILL);
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

using test::free_port;

// Issue 23.6: 8,000 state files in one container directory made a 219 MB
// /metrics with duplicate series and 3 GB resident. One state file per
// container is read, the listing is bounded, memory stays flat and comes back
// when the files go away.

uint64_t rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
  }
  return 0;
}

// Sample lines (name and labels) that appear more than once.
std::vector<std::string> duplicate_series(const std::string& text) {
  std::set<std::string> seen;
  std::vector<std::string> dups;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const std::string series = line.substr(0, line.rfind(' '));
    if (!seen.insert(series).second) dups.push_back(series);
  }
  return dups;
}

class AgentDaemonTamper : public ::testing::Test {
 protected:
  test::Env env() const {
    return {{"LD_LIBRARY_PATH", SIMGPU_LIB_DIR},
            {"SIMGPU_STATE", root_.file("gpu.state")},
            {"SIMGPU_CONTEXT_SIZE", "0"},
            {"ASAN_OPTIONS", "verify_asan_link_order=0:detect_leaks=0"},
            {"CUDA_VISIBLE_DEVICES", test::kUnset},
            {"SIMGPU_NVML_SCRIPT", test::kUnset},
            {"SIMGPU_NVML_PID_OFFSET", test::kUnset},
            {"KUBECONFIG", test::kUnset},
            {"KUBERNETES_SERVICE_HOST", test::kUnset},
            {"CUDA_DEVICE_MEMORY_LIMIT", test::kUnset},
            {"VGPU_CONTROL_FILE", test::kUnset},
            {"LIBCUDA_LOG_LEVEL", test::kUnset}};
  }
  test::Child start_agent(int port, std::vector<std::string> extra = {}) const {
    std::vector<std::string> argv = {AGENT,
                                     "--hook-path",
                                     root_.path(),
                                     "--node-name",
                                     "node-1",
                                     "--nvml-library",
                                     std::string(SIMGPU_LIB_DIR) + "/libnvidia-ml.so.1",
                                     "--pod-names",
                                     "none",
                                     "--interval",
                                     "200ms",
                                     "--log-level",
                                     "warn",
                                     "--metrics-bind-address",
                                     "127.0.0.1:" + std::to_string(port)};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return test::Child::spawn(argv, env());
  }
  // /metrics once `pred` holds for it (at most 20 s), or the last one seen.
  template <class Pred>
  std::string metrics_when(int port, Pred&& pred) const {
    httplib::Client http("127.0.0.1", port);
    http.set_read_timeout(std::chrono::seconds(30));
    std::string last;
    // Up to a minute: a pass over 8,000 files on a loaded 2-core CI machine
    // has taken longer than the 20 s this waited before.
    for (int i = 0; i < 600; ++i) {
      auto r = http.Get("/metrics");
      if (r && r->status == 200) {
        last = r->body;
        if (pred(last)) return last;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return last;
  }
  static uint64_t passes(const std::string& metrics) {
    const std::string key = "hami_monitor_passes_total{zone=\"vGPU\"} ";
    const size_t at = metrics.find(key);
    return at == std::string::npos ? 0 : std::stoull(metrics.substr(at + key.size()));
  }

  test::TempDir root_;
  Node node_{root_.path()};
};

TEST_F(AgentDaemonTamper, ManyStateFilesInOneDirectoryStayBounded) {
  const std::string key = "0b5c8e7e-1111-4222-8333-444455556666_main";
  node_.state_file(key, kGpuA, 1, 0);
  const int port = free_port();
  test::Child agent = start_agent(port);
  const std::string first = metrics_when(port, [](const std::string& m) { return passes(m) >= 2; });
  ASSERT_GE(passes(first), 2u) << first;
  const uint64_t baseline = rss_kib(agent.pid());

  // 8,000 sparse state files of the full size, each with a valid header.
  const std::string fixture = node_.state(key);
  std::string header(64, '\0');
  {
    std::ifstream in(fixture, std::ios::binary);
    in.read(header.data(), static_cast<std::streamsize>(header.size()));
  }
  for (int i = 0; i < 8000; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "/x%05d.cache", i);
    const std::string path = node_.dir(key) + name;
    std::ofstream(path, std::ios::binary) << header;
    fs::resize_file(path, region::kFileSize);
  }
  const uint64_t before = passes(first);
  uint64_t peak = 0;
  std::string m;
  for (int scrape = 0; scrape < 10; ++scrape) {
    m = metrics_when(port, [&](const std::string& t) { return passes(t) > before + scrape; });
    peak = std::max(peak, rss_kib(agent.pid()));
  }
  EXPECT_LT(m.size(), 64u * 1024) << "a /metrics of " << m.size() << " bytes";
  EXPECT_EQ(duplicate_series(m), std::vector<std::string>{});
  EXPECT_NE(m.find("hami_monitor_containers{zone=\"vGPU\"} 1"), std::string::npos);
  EXPECT_LT(peak, baseline + 32 * 1024) << "resident " << peak << " KiB against " << baseline;

  // The files go away: memory returns to where it was.
  for (int i = 0; i < 8000; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "/x%05d.cache", i);
    fs::remove(node_.dir(key) + name);
  }
  const uint64_t after_removal = passes(m);
  m = metrics_when(port, [&](const std::string& t) { return passes(t) > after_removal + 2; });
  EXPECT_NE(m.find("hami_monitor_file_problems{zone=\"vGPU\"} 0"), std::string::npos) << m;
  EXPECT_LT(rss_kib(agent.pid()), baseline + 4 * 1024);
  agent.kill(SIGTERM);
  agent.finish();
}

// A file name that carries a newline and a log line of the agent's own.
TEST_F(AgentDaemonTamper, FileNamesCannotForgeALogLine) {
  const std::string key = "0b5c8e7e-1111-4222-8333-444455556666_main";
  node_.state_file(key, kGpuA, 1, 0);
  const std::string forged = "[hami-node-agent pid 1] ERROR: forged by a tenant";
  std::ofstream(node_.dir(key) + "/a\n" + forged + "\n.cache") << "not a state file";
  auto r = test::run_process({AGENT, "--once", "--hook-path", root_.path(), "--no-nvml",
                              "--pod-names", "none", "--log-level", "info"},
                             env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.err);
  std::string line;
  while (std::getline(lines, line))
    EXPECT_NE(line.rfind(forged, 0), 0u) << "a forged line:\n" << r.err;
  EXPECT_NE(r.err.find("a\\n" + forged + "\\n.cache"), std::string::npos) << r.err;
}

// Issue 23.3, the multi-process case: a tenant forges *another* of its
// processes' usage down to 0 in the state file and allocates past the limit;
// the library cannot see through that (each process trusts only its own
// count), the node agent can: NVML shows the pod's processes holding more
// than the plugin gave it, and --over-limit-action kill ends them.
TEST_F(AgentDaemonTamper, ForgedUsageOfOtherProcessesIsCaughtThroughNvml) {
  const std::string key = "0b5c8e7e-1111-4222-8333-444455556666_main";
  node_.allocate(key, kGpuA, 1);
  // The plugin's record is also the container's limits file, as when mounted.
  {
    std::ofstream out(node_.limits(key), std::ios::app);
    out << "CUDA_DEVICE_MEMORY_SHARED_CACHE=" << node_.state(key) << "\n";
  }
  test::Env c = env();
  c.push_back({"LD_PRELOAD", LIBVGPU});
  c.push_back({"VGPU_LIMITS_FILE", node_.limits(key)});
  c.push_back({"VGPU_CONTROL_FILE", node_.control(key)});
  test::Child holder =
      test::Child::spawn({CUDA_CLIENT, "init", "ctx:0", "alloc:768m", "mark", "hold"}, c);
  ASSERT_TRUE(holder.wait_for_line("op=mark")) << holder.out();
  const std::string go = root_.file("go");
  test::Child forger = test::Child::spawn(
      {CUDA_CLIENT, "init", "ctx:0", "mark", "await:" + go, "alloc:768m", "mark", "hold"}, c);
  ASSERT_TRUE(forger.wait_for_line("op=mark")) << forger.out();
  // The forger's doing: the holder's slot says it holds nothing.
  auto snap = region::read_snapshot(node_.state(key));
  ASSERT_TRUE(snap);
  int holder_slot = -1;
  for (const auto& s : snap->slots) {
    if (s.pid == holder.pid()) holder_slot = s.index;
  }
  ASSERT_GE(holder_slot, 0);
  ASSERT_TRUE(
      test::poke(node_.state(key), test::slot_usage(holder_slot, 0), region::DeviceMemory{}));
  std::ofstream(go) << "go";
  ASSERT_TRUE(forger.wait_for_line("op=alloc:768m")) << forger.out();
  ASSERT_NE(forger.out().find("op=alloc:768m rc=0"), std::string::npos)
      << "the forged file admits it (the library's residual, the agent's to catch)";

  // Reported first (the default action): the processes live on.
  const std::string over =
      "hami_pod_memory_over_limit{namespace=\"\",pod=\"0b5c8e7e-1111-4222-"
      "8333-444455556666\",device_uuid=\"" +
      std::string(kGpuA) + "\",zone=\"vGPU\"} 1";
  {
    const int port = free_port();
    test::Child agent = start_agent(port);
    const std::string m =
        metrics_when(port, [&](const std::string& t) { return t.find(over) != std::string::npos; });
    EXPECT_NE(m.find(over), std::string::npos) << m;
    EXPECT_NE(m.find("hami_pod_nvml_memory_bytes{namespace=\"\",pod=\"0b5c8e7e-1111-4222-8333-"
                     "444455556666\",device_uuid=\"" +
                     std::string(kGpuA) + "\",zone=\"vGPU\"} " + std::to_string(1536 * MiB)),
              std::string::npos)
        << m;
    agent.kill(SIGTERM);
    const auto done = agent.finish();
    EXPECT_NE(done.err.find("over its limit of 1 GiB"), std::string::npos) << done.err;
    EXPECT_EQ(::kill(holder.pid(), 0), 0) << "reporting kills nobody";
  }
  // Then --over-limit-action kill: both processes of the pod end.
  const int port = free_port();
  test::Child agent = start_agent(port, {"--over-limit-action", "kill"});
  const std::string m = metrics_when(port, [](const std::string& t) {
    return t.find("hami_monitor_over_limit_kills_total{zone=\"vGPU\"} 2") != std::string::npos;
  });
  EXPECT_NE(m.find("hami_monitor_over_limit_kills_total{zone=\"vGPU\"} 2"), std::string::npos) << m;
  const auto f = forger.finish();
  const auto h = holder.finish();
  EXPECT_EQ(f.exit_code, 128 + SIGKILL);
  EXPECT_EQ(h.exit_code, 128 + SIGKILL);
  agent.kill(SIGTERM);
  agent.finish();
}

}  // namespace
}  // namespace hami::monitor
