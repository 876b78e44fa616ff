// src/fit benchmarks: a typical pod against one node of 8 GPUs and against a
// synthetic cluster of 5,000 such nodes carrying 100,000 running pods (the
// extender's target, docs/fitting.md). Run:
//
//   build/release/bench/fit/fit-bench --benchmark_min_time=2
//
// "Filter" is one filter request's fitting work: every node fitted, the
// fitting ones collected with their scores (what filter and prioritize
// answer; nothing is sorted, kube-scheduler picks). Its p50/p99 counters are
// per request (wall time of each iteration). "Cycle" adds choosing the best
// node by the node policy and what bind does with it (placement → annotation
// text, usage charged to the cache), then undoes the charge so the cluster
// stays in its steady state. "RankAll" is a full best-first sort of the
// fitting nodes, for callers that want one.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fit/fit.hpp"
#include "fit/options.hpp"
#include "fit/resources.hpp"
#include "fit/usage.hpp"
#include "protocol/device_codec.hpp"

namespace {

using namespace hami::fit;  // NOLINT
using Clock = std::chrono::steady_clock;

constexpr int kNodes = 5000;
constexpr int kGpusPerNode = 8;
constexpr int kRunningPods = 100000;
constexpr int32_t kH200MiB = 143771;
constexpr int32_t kA100MiB = 81920;

std::string uuid(int node, int gpu) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "GPU-%08x-%04x-4000-8000-000000000000", node, gpu);
  return buf;
}

GpuDevice make_gpu(int node, int g, bool h200) {
  GpuDevice d;
  d.uuid = uuid(node, g);
  d.index = g;
  d.type = h200 ? "NVIDIA H200" : "NVIDIA A100-SXM4-80GB";
  d.numa = g / 4;
  d.split_count = 10;
  d.total_mem_mib = h200 ? kH200MiB : kA100MiB;
  return d;
}

NodeDevices make_node(int n) {
  NodeDevices node;
  node.name = "node-" + std::to_string(n);
  for (int g = 0; g < kGpusPerNode; ++g)
    node.devices.push_back(make_gpu(n, g, n % 2 == 0));
  return node;
}

// 5,000 nodes (half H200, half A100) and 100,000 pods placed at random where
// they fit: 2.5 tenants per GPU on average, some GPUs full.
std::vector<NodeDevices> make_cluster() {
  std::vector<NodeDevices> cluster;
  cluster.reserve(kNodes);
  for (int n = 0; n < kNodes; ++n)
    cluster.push_back(make_node(n));
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> node_of(0, kNodes - 1), gpu_of(0, kGpusPerNode - 1);
  std::uniform_int_distribution<int> mem_of(1, 8), cores_of(0, 3);
  for (int placed = 0, tries = 0; placed < kRunningPods && tries < 10 * kRunningPods; ++tries) {
    GpuDevice& d = cluster[node_of(rng)].devices[gpu_of(rng)];
    const int32_t mem = mem_of(rng) * 2000;
    const int32_t cores = cores_of(rng) * 10;
    if (d.used_tenants >= d.split_count || d.used_mem_mib + mem > d.total_mem_mib ||
        d.used_cores + cores > 100) {
      continue;
    }
    d.used_tenants += 1;
    d.used_mem_mib += mem;
    d.used_cores += cores;
    ++placed;
  }
  return cluster;
}

const std::vector<NodeDevices>& cluster() {
  static const std::vector<NodeDevices> c = make_cluster();
  return c;
}

// nvidia.com/gpu: 1, gpumem: 3000, gpucores: 30 (upstream's default_use.yaml).
PreparedPod typical_pod(PodOptions options = {}) {
  ContainerRequest c;
  c.nums = 1;
  c.mem_mib = 3000;
  c.cores = 30;
  return std::move(*PreparedPod::make(PodRequest{{c}}, std::move(options)));
}

PodOptions binpack_options() {
  PodOptions o;
  o.gpu_policy = *parse_gpu_policy("binpack");
  return o;
}

void BM_OneNode(benchmark::State& state, PreparedPod pod) {
  const NodeDevices& node = cluster()[1];
  FitScratch scratch;
  Placement placement;
  for (auto _ : state) {
    NodeFit f = fit_pod(node, pod, scratch, &placement);
    benchmark::DoNotOptimize(f);
  }
}
BENCHMARK_CAPTURE(BM_OneNode, typical_spread, typical_pod());
BENCHMARK_CAPTURE(BM_OneNode, typical_binpack, typical_pod(binpack_options()));
BENCHMARK_CAPTURE(BM_OneNode, use_gputype, typical_pod([] {
                    PodOptions o;
                    o.use_types = {"A100"};
                    return o;
                  }()));
BENCHMARK_CAPTURE(BM_OneNode, two_gpus_numa_bind, [] {
  ContainerRequest c;
  c.nums = 2;
  c.mem_mib = 3000;
  c.cores = 30;
  PodOptions o;
  o.numa_bind = true;
  return std::move(*PreparedPod::make(PodRequest{{c}}, o));
}());
// An idle HGX-like node: two islands of four NVLinked GPUs (upstream's pair
// score 1220 within, 10 across), the worst case for the set search.
NodeDevices islands_node() {
  NodeDevices node = make_node(0);
  node.links = LinkScores(kGpusPerNode);
  for (int a = 0; a < kGpusPerNode; ++a)
    for (int b = a + 1; b < kGpusPerNode; ++b)
      node.links.set(a, b, (a < 4) == (b < 4) ? 1220 : 10);
  return node;
}

void BM_OneNodeTopology(benchmark::State& state, const char* policy) {
  const NodeDevices node = islands_node();
  ContainerRequest c;
  c.nums = static_cast<int32_t>(state.range(0));
  c.mem_mib = 3000;
  PodOptions o;
  o.gpu_policy = *parse_gpu_policy(policy);
  const PreparedPod pod = std::move(*PreparedPod::make(PodRequest{{c}}, o));
  FitScratch scratch;
  Placement placement;
  for (auto _ : state) {
    NodeFit f = fit_pod(node, pod, scratch, &placement);
    benchmark::DoNotOptimize(f);
  }
}
BENCHMARK_CAPTURE(BM_OneNodeTopology, topology_aware, "topology-aware")->Arg(1)->Arg(2)->Arg(4);
BENCHMARK_CAPTURE(BM_OneNodeTopology, binpack_ties, "binpack")->Arg(2)->Arg(4);

BENCHMARK_CAPTURE(BM_OneNode, init_plus_two_apps, [] {
  ContainerRequest init, app;
  init.nums = 1;
  init.mem_mib = 8000;
  init.kind = ContainerKind::kInit;
  app.nums = 1;
  app.mem_mib = 3000;
  app.cores = 30;
  return std::move(*PreparedPod::make(PodRequest{{init, app, app}}, {}));
}());

// One filter request's fitting work over the whole cluster, on `threads`
// threads (the extender's 2 cores), each with its own scratch.
struct Filter {
  std::vector<FitScratch> scratch;
  std::vector<std::vector<ScoredNode>> fits;
  std::vector<ScoredNode> fitting;
  // Helper threads live as long as the filter, as an extender's pool would;
  // each request releases them through the barrier and meets them there.
  std::barrier<> start, done;
  const PreparedPod* pod = nullptr;
  bool stop = false;
  std::vector<std::thread> helpers;

  explicit Filter(int threads) : scratch(threads), fits(threads), start(threads), done(threads) {
    for (int t = 1; t < threads; ++t) {
      helpers.emplace_back([this, t, threads] {
        while (true) {
          start.arrive_and_wait();
          if (stop) return;
          part(t, threads);
          done.arrive_and_wait();
        }
      });
    }
  }
  ~Filter() {
    stop = true;
    start.arrive_and_wait();
    for (auto& h : helpers)
      h.join();
  }

  void part(int t, int threads) {
    const auto& nodes = cluster();
    auto& out = fits[t];
    out.clear();
    const size_t begin = nodes.size() * t / threads, end = nodes.size() * (t + 1) / threads;
    for (size_t i = begin; i < end; ++i) {
      const NodeFit f = fit_pod(nodes[i], *pod, scratch[t]);
      if (f.fits) out.push_back({nodes[i].name, f.score, static_cast<uint32_t>(i)});
    }
  }

  void run(const PreparedPod& p) {
    const int threads = static_cast<int>(scratch.size());
    pod = &p;
    start.arrive_and_wait();
    part(0, threads);
    done.arrive_and_wait();
    fitting.clear();
    for (const auto& f : fits)
      fitting.insert(fitting.end(), f.begin(), f.end());
  }

  const ScoredNode& best(NodePolicy policy) const {
    return *std::min_element(
        fitting.begin(), fitting.end(),
        [policy](const ScoredNode& a, const ScoredNode& b) { return node_before(a, b, policy); });
  }
};

void report_latency(benchmark::State& state, std::vector<double>& ms) {
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) {
    return ms[std::min(ms.size() - 1, static_cast<size_t>(q * ms.size()))];
  };
  state.counters["p50_ms"] = at(0.50);
  state.counters["p99_ms"] = at(0.99);
  state.counters["max_ms"] = ms.back();
}

void BM_Filter5000(benchmark::State& state) {
  const PreparedPod pod = typical_pod();
  Filter filter(static_cast<int>(state.range(0)));
  std::vector<double> ms;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    filter.run(pod);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    benchmark::DoNotOptimize(filter.fitting.data());
  }
  state.counters["fitting_nodes"] = static_cast<double>(filter.fitting.size());
  state.counters["nodes_per_s"] = benchmark::Counter(static_cast<double>(kNodes),
                                                     benchmark::Counter::kIsIterationInvariantRate);
  report_latency(state, ms);
}
BENCHMARK(BM_Filter5000)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// filter + bind's fitting work for one pod: fit every node, rank, place on
// the best, encode the annotation, charge the usage (then undo it).
void BM_Cycle5000(benchmark::State& state) {
  const PreparedPod pod = typical_pod();
  Filter filter(static_cast<int>(state.range(0)));
  std::vector<NodeDevices> nodes = cluster();  // mutable copy for the charges
  FitScratch scratch;
  Placement placement;
  const std::vector<ContainerKind> kinds = {ContainerKind::kApp};
  std::vector<double> ms;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    filter.run(pod);
    NodeDevices& best = nodes[filter.best(pod.options().node_policy).index];
    fit_pod(best, pod, scratch, &placement);
    const PodDevices pd = to_pod_devices(best, pod, placement);
    auto text = hami::protocol::encode_pod_devices(pd);
    const auto charges = pod_charges(pd, kinds);
    apply_charges(best, charges);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    benchmark::DoNotOptimize(text);
    remove_charges(best, charges);
  }
  state.counters["pods_per_s"] =
      benchmark::Counter(1, benchmark::Counter::kIsIterationInvariantRate);
  report_latency(state, ms);
}
BENCHMARK(BM_Cycle5000)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_RankAll5000(benchmark::State& state) {
  const PreparedPod pod = typical_pod();
  Filter filter(1);
  filter.run(pod);
  std::vector<ScoredNode> ranked;
  for (auto _ : state) {
    ranked = filter.fitting;
    sort_nodes_best_first(ranked, NodePolicy::kBinpack);
    benchmark::DoNotOptimize(ranked.data());
  }
}
BENCHMARK(BM_RankAll5000)->Unit(benchmark::kMicrosecond);

// Per request, before fitting: the pod's annotations and resources parsed
// and the request prepared.
void BM_PrepareRequest(benchmark::State& state) {
  const ResourceConfig config;
  const PolicyDefaults defaults;
  auto limits = [](std::string_view name) -> std::optional<std::string_view> {
    if (name == "nvidia.com/gpu") return "1";
    if (name == "nvidia.com/gpumem") return "3000";
    if (name == "nvidia.com/gpucores") return "30";
    return std::nullopt;
  };
  auto none = [](std::string_view) -> std::optional<std::string_view> { return std::nullopt; };
  auto annotations = [](std::string_view key) -> std::optional<std::string_view> {
    if (key == kAnnoGpuPolicy) return "binpack";
    return std::nullopt;
  };
  for (auto _ : state) {
    auto req = container_request(limits, none, config);
    auto opts = parse_pod_options(annotations, defaults);
    auto pod = PreparedPod::make(PodRequest{{**req}}, std::move(*opts));
    benchmark::DoNotOptimize(pod);
  }
}
BENCHMARK(BM_PrepareRequest);

void BM_DecodeAllocation(benchmark::State& state) {
  const std::string text =
      ";GPU-00000001-0002-4000-8000-000000000000,NVIDIA,3000,30:;"
      "GPU-00000001-0003-4000-8000-000000000000,NVIDIA,3000,30:"
      "GPU-00000001-0004-4000-8000-000000000000,NVIDIA,3000,30:;";
  for (auto _ : state) {
    auto pd = hami::protocol::decode_pod_devices(text);
    benchmark::DoNotOptimize(pd);
  }
}
BENCHMARK(BM_DecodeAllocation);

}  // namespace

BENCHMARK_MAIN();
