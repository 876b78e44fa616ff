// Node-agent benchmark: a node with many containers on several GPUs.
//
//   scrape-bench [--containers 1024] [--gpus 8] [--scrapes 200] [--passes 20]
//                [--agent PATH --idle-seconds 30 --nvml PATH]
//
// Creates one state file per container (as libvgpu.so does: limits, one GPU of
// the node, one registered process with usage) under a temporary hook path and
// measures, in this process:
//   - a pass of the agent (read every file, resolve host PIDs from /proc,
//     aggregate, feedback, write back) with a synthetic sampler for the GPUs;
//   - /metrics over real HTTP on loopback (what Prometheus sees), and
//     render_metrics alone.
// With --agent, it then runs the real hami-node-agent daemon over the same
// files for --idle-seconds at its default period and reports the CPU time it
// used (utime + stime from /proc/<pid>/stat), i.e. its cost on an idle node.
#include <httplib.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "monitor/agent.hpp"
#include "monitor/http_endpoints.hpp"
#include "monitor/metrics.hpp"
#include "region/region.hpp"

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;
using namespace hami;  // NOLINT

struct Stats {
  double p50, p99, max;
};
Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))]; };
  return {at(0.5), at(0.99), v.back()};
}
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

std::string gpu_uuid(int g) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "GPU-%08x-0000-4000-8000-%012x", 0xbe0c4u, g);
  return buf;
}

class SyntheticSampler final : public monitor::GpuSampler {
 public:
  explicit SyntheticSampler(int gpus) {
    for (int g = 0; g < gpus; ++g) {
      monitor::GpuSample s;
      s.index = g;
      s.uuid = gpu_uuid(g);
      s.name = "NVIDIA H200";
      s.memory_total = 141ull << 30;
      s.memory_used = 40ull << 30;
      s.utilization = 80;
      s.processes.push_back({static_cast<uint32_t>(getpid()), 1ull << 30, 10});
      gpus_.push_back(s);
    }
  }
  std::vector<monitor::GpuSample> sample() override { return gpus_; }

 private:
  std::vector<monitor::GpuSample> gpus_;
};

uint64_t cpu_ticks(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), {});
  const size_t close = s.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream in(s.substr(close + 2));
  std::string field;
  uint64_t utime = 0, stime = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return utime + stime;
}

}  // namespace

int main(int argc, char** argv) {
  int containers = 1024, gpus = 8, scrapes = 200, passes = 20, idle_seconds = 30;
  std::string agent_path, nvml_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--containers")
      containers = std::stoi(v);
    else if (k == "--gpus")
      gpus = std::stoi(v);
    else if (k == "--scrapes")
      scrapes = std::stoi(v);
    else if (k == "--passes")
      passes = std::stoi(v);
    else if (k == "--agent")
      agent_path = v;
    else if (k == "--idle-seconds")
      idle_seconds = std::stoi(v);
    else if (k == "--nvml")
      nvml_path = v;
    else {
      std::fprintf(stderr, "unknown flag %s (see the header of scrape_bench.cpp)\n", k.c_str());
      return 2;
    }
  }
  // One descriptor per state file stays open (the slot's liveness lock).
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);

  char tmpl[] = "/tmp/hami-agent-bench-XXXXXX";
  const std::string root = ::mkdtemp(tmpl);
  auto me = region::self_identity();
  if (!me) return 1;
  std::vector<region::Region> regions;
  regions.reserve(static_cast<size_t>(containers));
  const auto t_create = Clock::now();
  for (int c = 0; c < containers; ++c) {
    char name[96];
    std::snprintf(name, sizeof name, "%08x-0000-4000-8000-%012x_worker", 0x90d0u + c, c);
    const std::string dir = root + "/containers/" + name;
    fs::create_directories(dir);
    region::OpenOptions opt;
    opt.initial.memory_limit[0] = 8ull << 30;
    opt.initial.sm_limit[0] = 25;
    auto r = region::Region::open(dir + "/vgpu.cache", opt);
    if (!r) {
      std::fprintf(stderr, "%s\n", r.error().message.c_str());
      return 1;
    }
    r->set_device_count(1);
    (void)r->set_device_uuid(0, gpu_uuid(c % gpus));
    auto slot = r->register_process(*me);
    if (!slot) {
      std::fprintf(stderr, "%s\n", slot.error().message.c_str());
      return 1;
    }
    r->slot(*slot).add_usage(0, region::UsageKind::kData, (512ull + c) << 20);
    r->set_recent_kernel(c % 3 == 0 ? 2 : 0);
    regions.push_back(std::move(*r));
  }
  std::printf("setup: %d containers on %d GPUs, state files in %s (%.0f ms)\n", containers, gpus,
              root.c_str(), ms_since(t_create));

  monitor::Agent agent(monitor::AgentOptions{.hook_path = root, .node_name = "bench-node"},
                       std::make_unique<SyntheticSampler>(gpus), nullptr);
  std::vector<double> pass_ms;
  for (int i = 0; i < passes; ++i) {
    const auto t = Clock::now();
    auto v = agent.run_pass();
    pass_ms.push_back(ms_since(t));
    if (v->containers.size() != static_cast<size_t>(containers)) {
      std::fprintf(stderr, "pass saw %zu containers, expected %d\n", v->containers.size(),
                   containers);
      return 1;
    }
  }
  const Stats ps = stats(pass_ms);
  std::printf(
      "agent pass (read %d files, resolve, feedback, write back): p50 %.2f ms  p99 %.2f ms"
      "  max %.2f ms  (%d passes)\n",
      containers, ps.p50, ps.p99, ps.max, passes);

  std::vector<double> render_ms;
  size_t body_bytes = 0;
  for (int i = 0; i < scrapes; ++i) {
    const auto t = Clock::now();
    const std::string body = monitor::render_metrics(*agent.latest(), {.version = "bench"});
    render_ms.push_back(ms_since(t));
    body_bytes = body.size();
  }
  const Stats rs = stats(render_ms);
  std::printf("render_metrics: p50 %.2f ms  p99 %.2f ms  max %.2f ms  (%zu bytes)\n", rs.p50,
              rs.p99, rs.max, body_bytes);

  monitor::HttpEndpoints http(agent, {.bind = "127.0.0.1:0"});
  if (auto ok = http.start(); !ok) {
    std::fprintf(stderr, "%s\n", ok.error().message.c_str());
    return 1;
  }
  httplib::Client client("127.0.0.1", http.port());
  client.set_keep_alive(false);  // Prometheus opens a connection per scrape
  std::vector<double> scrape_ms;
  for (int i = 0; i < scrapes; ++i) {
    const auto t = Clock::now();
    auto res = client.Get("/metrics");
    scrape_ms.push_back(ms_since(t));
    if (!res || res->status != 200) {
      std::fprintf(stderr, "scrape failed\n");
      return 1;
    }
  }
  http.stop();
  const Stats ss = stats(scrape_ms);
  std::printf("GET /metrics over HTTP: p50 %.2f ms  p99 %.2f ms  max %.2f ms  (%d scrapes)\n",
              ss.p50, ss.p99, ss.max, scrapes);

  if (!agent_path.empty()) {
    const pid_t pid = fork();
    if (pid == 0) {
      std::vector<std::string> args = {agent_path,    "--hook-path", root,
                                       "--pod-names", "none",        "--metrics-bind-address",
                                       "127.0.0.1:0", "--log-level", "warn"};
      if (nvml_path.empty()) {
        args.push_back("--no-nvml");
      } else {
        args.push_back("--nvml-library");
        args.push_back(nvml_path);
      }
      std::vector<char*> a;
      for (auto& s : args)
        a.push_back(s.data());
      a.push_back(nullptr);
      execv(a[0], a.data());
      _exit(127);
    }
    std::this_thread::sleep_for(std::chrono::seconds(2));  // start-up and first pass excluded
    const uint64_t t0 = cpu_ticks(pid);
    const auto w0 = Clock::now();
    std::this_thread::sleep_for(std::chrono::seconds(idle_seconds));
    const uint64_t t1 = cpu_ticks(pid);
    const double wall = ms_since(w0) / 1000.0;
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
    const double cpu = static_cast<double>(t1 - t0) / static_cast<double>(sysconf(_SC_CLK_TCK));
    std::printf(
        "hami-node-agent idle, default 5 s period, %d containers, %s: %.3f CPU-s in %.1f s"
        " = %.2f %% of one core\n",
        containers, nvml_path.empty() ? "no NVML" : "simulated NVML", cpu, wall,
        100.0 * cpu / wall);
  }
  regions.clear();
  fs::remove_all(root);
  return 0;
}
