// The extender's request paths on a synthetic cluster, as the daemon runs
// them minus HTTP/TLS: the body parsed (kube-scheduler's ExtenderArgs with
// 5,000 NodeNames), the verb run against the cache, the answer serialised.
//
// Cluster: 5,000 nodes × 8 GPUs (half "NVIDIA H200" 143,771 MiB, half
// "NVIDIA A100-SXM4-80GB" 81,920 MiB, NUMA 0/1), split 10; 100,000 running
// pods of 1 GPU (1,000-20,000 MiB, 0-50 % cores) placed at random, loaded
// through CacheFeed from their JSON as the pod watch delivers them.
//
//   BM_Filter       one /filter request: every node tried, all fitting names returned
//   BM_Prioritize   one /prioritize request over every node
//   BM_Cycle/<n>    with n node names per request (5,000: all; 500: kube-scheduler's
//                   default percentageOfNodesToScore at 5,000 nodes), filter → prioritize → best
//                   node → bind (the real Extender::bind: fit + reserve under the cache's exclusive
//                   lock, then node lock, annotations, binding through an in-memory BindBackend
//                   instead of HTTP to the API server) and the watch's echo of the annotated pod
//
// p50/p99/max are per request (ms). RSS counters: VmRSS/VmHWM after loading the
// cluster (cache only), and again with a copy of every pod's JSON kept as the
// daemon's Reflector keeps it.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/node_register.hpp"
#include "scheduler/cache.hpp"
#include "scheduler/extender.hpp"
#include "scheduler/feed.hpp"
#include "scheduler/memory_backend.hpp"
#include "scheduler/protocol.hpp"

namespace {

using nlohmann::json;
using namespace hami::scheduler;

constexpr int kNodes = 5000;
constexpr int kGpus = 8;
constexpr int kPods = 100000;

long status_kib(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key, 0) == 0) return std::stol(line.substr(std::string(key).size()));
  }
  return -1;
}

std::string node_name(int i) {
  std::string s("node-");
  s.append(std::to_string(i));
  return s;
}
std::string gpu_uuid(int node, int g) {
  std::string s("GPU-");
  s.append(std::to_string(node)).append("-").append(std::to_string(g));
  return s;
}

json pod_json(const std::string& name, const std::string& uid, int mem, int cores) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", name},
            {"namespace", "bench"},
            {"uid", uid},
            {"labels", {{"app", "inference"}, {"team", "ml"}}}}},
          {"spec",
           {{"schedulerName", "hami-scheduler"},
            {"containers",
             {{{"name", "server"},
               {"image", "registry.example.com/ml/inference:1.2.3"},
               {"resources",
                {{"limits",
                  {{"nvidia.com/gpu", "1"},
                   {"nvidia.com/gpumem", std::to_string(mem)},
                   {"nvidia.com/gpucores", std::to_string(cores)},
                   {"cpu", "2"},
                   {"memory", "8Gi"}}}}}}}}}},
          {"status", {{"phase", "Pending"}}}};
}

struct Cluster {
  ClusterCache cache;
  CacheFeed feed{cache};
  SchedulerConfig config;
  Metrics metrics;
  hami::test::MemoryBackend backend;
  Extender ext{cache, config, &backend, &metrics};
  // As the daemon: the request's thread plus one per other core.
  ParallelFor pool{std::max(1u, std::thread::hardware_concurrency()) - 1};
  std::vector<std::string> names;
  std::string filter_body;
  long rss_cache_kib = 0, hwm_cache_kib = 0, rss_reflector_kib = 0, hwm_reflector_kib = 0;
  int next = 0;

  Cluster() {
    if (std::getenv("BENCH_SERIAL") == nullptr) ext.set_pool(&pool);
    std::mt19937 rng(42);
    for (int n = 0; n < kNodes; ++n) {
      std::vector<hami::protocol::NodeDevice> devs;
      const bool h200 = n % 2 == 0;
      for (int g = 0; g < kGpus; ++g) {
        devs.push_back({.id = gpu_uuid(n, g),
                        .index = g,
                        .count = 10,
                        .devmem = h200 ? 143771 : 81920,
                        .devcore = 100,
                        .type = h200 ? "NVIDIA H200" : "NVIDIA A100-SXM4-80GB",
                        .numa = g / 4,
                        .mode = "hami-core",
                        .health = true});
      }
      names.push_back(node_name(n));
      feed.node_changed(
          {{"metadata",
            {{"name", names.back()},
             {"annotations",
              {{"hami.io/node-nvidia-register", hami::protocol::encode_node_devices(devs)}}}}}});
    }
    std::uniform_int_distribution<int> node(0, kNodes - 1), gpu(0, kGpus - 1), mem(1000, 20000),
        cores(0, 50);
    auto running = [&](int i) {
      const int n = node(rng), g = gpu(rng), m = mem(rng), c = cores(rng);
      std::string name("running-");
      name.append(std::to_string(i));
      json p = pod_json(name, "uid-" + name, m, c);
      p["spec"]["nodeName"] = names[static_cast<size_t>(n)];
      p["status"]["phase"] = "Running";
      const std::string alloc =
          gpu_uuid(n, g) + ",NVIDIA," + std::to_string(m) + "," + std::to_string(c) + ":;";
      p["metadata"]["annotations"] = {{"hami.io/vgpu-node", names[static_cast<size_t>(n)]},
                                      {"hami.io/vgpu-devices-allocated", alloc},
                                      {"hami.io/vgpu-devices-to-allocate", ";"},
                                      {"hami.io/bind-phase", "success"}};
      return p;
    };
    // First the cache alone (each pod's JSON dropped after the event), then
    // the same number of pod objects kept as the daemon's Reflector keeps them.
    for (int i = 0; i < kPods; ++i)
      feed.pod_changed(running(i));
    rss_cache_kib = status_kib("VmRSS:");
    hwm_cache_kib = status_kib("VmHWM:");
    std::vector<json> reflector;
    reflector.reserve(kPods);
    for (int i = 0; i < kPods; ++i)
      reflector.push_back(running(i));
    rss_reflector_kib = status_kib("VmRSS:");
    hwm_reflector_kib = status_kib("VmHWM:");
    reflector.clear();
    reflector.shrink_to_fit();
    filter_body = json{
        {"Pod", pod_json("probe", "uid-probe", 4000, 20)},
        {"Nodes", nullptr},
        {"NodeNames",
         names}}.dump();
  }
};

Cluster& cluster() {
  static Cluster c;
  return c;
}

void report(benchmark::State& state, std::vector<double>& ms) {
  if (ms.empty()) return;
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) {
    return ms[std::min(ms.size() - 1, static_cast<size_t>(q * ms.size()))];
  };
  state.counters["p50_ms"] = at(0.50);
  state.counters["p99_ms"] = at(0.99);
  state.counters["max_ms"] = ms.back();
  Cluster& c = cluster();
  state.counters["rss_cache_MiB"] = static_cast<double>(c.rss_cache_kib) / 1024;
  state.counters["rss_with_reflector_MiB"] = static_cast<double>(c.rss_reflector_kib) / 1024;
  state.counters["hwm_MiB"] = static_cast<double>(status_kib("VmHWM:")) / 1024;
}

double since_ms(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void BM_Filter(benchmark::State& state) {
  Cluster& c = cluster();
  std::vector<double> ms;
  size_t fitting = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    auto args = parse_extender_args(c.filter_body);
    FilterResult r = c.ext.filter(args->pod, args->node_names);
    std::string out = filter_result_json(*args, r);
    benchmark::DoNotOptimize(out.data());
    ms.push_back(since_ms(t0));
    fitting = r.nodes.size();
  }
  state.counters["fitting_nodes"] = static_cast<double>(fitting);
  report(state, ms);
}

void BM_Prioritize(benchmark::State& state) {
  Cluster& c = cluster();
  std::vector<double> ms;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    auto args = parse_extender_args(c.filter_body);
    auto r = c.ext.prioritize(args->pod, args->node_names);
    std::string out = priorities_json(*r);
    benchmark::DoNotOptimize(out.data());
    ms.push_back(since_ms(t0));
  }
  report(state, ms);
}

void BM_Cycle(benchmark::State& state) {
  Cluster& c = cluster();
  std::vector<double> ms;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> mem(1000, 20000), cores(0, 50);
  int failures = 0;
  using clock = std::chrono::steady_clock;
  // How many node names kube-scheduler sends: all 5,000, or what its default
  // percentageOfNodesToScore leaves (adaptive: 50 - 5000/125 = 10 % = 500
  // feasible nodes, then the extenders see only those), taken from a start
  // index that rotates as kube-scheduler's does.
  const size_t k = static_cast<size_t>(state.range(0));
  size_t start = 0;
  std::vector<std::string> window;
  double stage_ms[3] = {0, 0, 0};  // filter, prioritize, bind: summed
  for (auto _ : state) {
    window.clear();
    for (size_t i = 0; i < k; ++i)
      window.push_back(c.names[(start + i) % c.names.size()]);
    start = (start + k) % c.names.size();
    // kube-scheduler's side (building the request bodies) is not timed; the
    // extender's (parse, verb, answer) is, summed over the three verbs.
    std::string name("new-");
    name.append(std::to_string(c.next++));
    json pod = pod_json(name, "uid-" + name, mem(rng), cores(rng));
    c.backend.add_pod(pod);
    const std::string fbody = json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", window}}.dump();

    auto t0 = clock::now();
    auto args = parse_extender_args(fbody);
    FilterResult f = c.ext.filter(args->pod, args->node_names);
    std::string fout = filter_result_json(*args, f);
    double elapsed = since_ms(t0);
    stage_ms[0] += elapsed;

    // kube-scheduler sends the filter's survivors to prioritize.
    const std::string pbody = json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", f.nodes}}.dump();
    t0 = clock::now();
    auto pargs = parse_extender_args(pbody);
    auto prio = c.ext.prioritize(pargs->pod, pargs->node_names);
    std::string pout = priorities_json(*prio);
    const double prioritize_ms = since_ms(t0);
    stage_ms[1] += prioritize_ms;
    elapsed += prioritize_ms;

    const auto best = std::max_element(
        prio->begin(), prio->end(),
        [](const HostPriority& a, const HostPriority& b) { return a.score < b.score; });
    const std::string bbody = json{
        {"PodName", name},
        {"PodNamespace", "bench"},
        {"PodUID", "uid-" + name},
        {"Node", best->host}}.dump();
    t0 = clock::now();
    auto bargs = parse_binding_args(bbody);
    const std::string err = c.ext.bind(*bargs);
    std::string bout = binding_result_json(err);
    const double bind_ms = since_ms(t0);
    stage_ms[2] += bind_ms;
    elapsed += bind_ms;
    failures += !err.empty();

    // The watch echoes the annotated pod; the device plugin releases the lock.
    c.feed.pod_changed(c.backend.pod("bench", name));
    c.backend.unlock_node(best->host, "bench", name);
    ms.push_back(elapsed);
    state.SetIterationTime(elapsed / 1000);
    benchmark::DoNotOptimize(fout.data());
    benchmark::DoNotOptimize(pout.data());
    benchmark::DoNotOptimize(bout.data());
  }
  state.counters["bind_failures"] = failures;
  const double iters =
      static_cast<double>(std::max<benchmark::IterationCount>(state.iterations(), 1));
  state.counters["filter_ms"] = stage_ms[0] / iters;
  state.counters["prioritize_ms"] = stage_ms[1] / iters;
  state.counters["bind_ms"] = stage_ms[2] / iters;
  state.counters["pods_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  report(state, ms);
}

// The parts of a /filter request, to see where its time goes.
void BM_ParseArgs(benchmark::State& state) {
  Cluster& c = cluster();
  for (auto _ : state) {
    auto args = parse_extender_args(c.filter_body);
    benchmark::DoNotOptimize(args->node_names.data());
  }
}
void BM_FilterOnly(benchmark::State& state) {
  Cluster& c = cluster();
  auto args = parse_extender_args(c.filter_body);
  for (auto _ : state) {
    FilterResult r = c.ext.filter(args->pod, args->node_names);
    benchmark::DoNotOptimize(r.nodes.data());
  }
}
void BM_PrioritizeOnly(benchmark::State& state) {
  Cluster& c = cluster();
  auto args = parse_extender_args(c.filter_body);
  for (auto _ : state) {
    auto r = c.ext.prioritize(args->pod, args->node_names);
    benchmark::DoNotOptimize(r->data());
  }
}
void BM_FilterAnswer(benchmark::State& state) {
  Cluster& c = cluster();
  auto args = parse_extender_args(c.filter_body);
  FilterResult r = c.ext.filter(args->pod, args->node_names);
  for (auto _ : state) {
    std::string out = filter_result_json(*args, r);
    benchmark::DoNotOptimize(out.data());
  }
}
void BM_PrioritizeAnswer(benchmark::State& state) {
  Cluster& c = cluster();
  auto args = parse_extender_args(c.filter_body);
  auto r = c.ext.prioritize(args->pod, args->node_names);
  for (auto _ : state) {
    std::string out = priorities_json(*r);
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_ParseArgs)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FilterOnly)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FilterAnswer)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PrioritizeOnly)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PrioritizeAnswer)->Unit(benchmark::kMillisecond);

// Wall-clock time: the pool's threads work for the request too.
BENCHMARK(BM_Filter)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Prioritize)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Cycle)->Arg(5000)->Arg(500)->Unit(benchmark::kMillisecond)->UseManualTime();

}  // namespace

BENCHMARK_MAIN();
