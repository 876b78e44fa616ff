// The node agent's pass with real NVML, for the GPU suite (tests/gpu/node_agent.sh):
//   agent-once HOOK_PATH PASSES INTERVAL_MS
// Runs PASSES passes INTERVAL_MS apart, then prints the metrics of the last one
// and, per container, each process slot's resolved host PID. Built on the GPU
// machine with g++ alone (no HTTP or JSON library needed there).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "monitor/agent.hpp"
#include "monitor/metrics.hpp"
#include "monitor/nvml_sampler.hpp"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: agent-once HOOK_PATH PASSES INTERVAL_MS\n");
    return 2;
  }
  using namespace hami::monitor;  // NOLINT
  auto sampler = NvmlSampler::open("libnvidia-ml.so.1");
  if (!sampler) {
    std::fprintf(stderr, "%s\n", sampler.error().message.c_str());
    return 1;
  }
  Agent agent(AgentOptions{.hook_path = argv[1], .node_name = "gpu-node"}, std::move(*sampler),
              nullptr);
  const int passes = std::atoi(argv[2]);
  for (int i = 0; i < passes; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(argv[3])));
    agent.run_pass();
  }
  auto v = agent.latest();
  for (const ContainerView& c : v->containers) {
    for (const ContainerProcess& p : c.processes) {
      std::printf("# container %s slot %d pid %d host_pid %d%s%s\n", c.ref.container.c_str(),
                  p.slot, p.pid, p.host_pid ? *p.host_pid : -1,
                  p.unresolved_reason.empty() ? "" : " unresolved: ", p.unresolved_reason.c_str());
    }
  }
  for (const GpuSample& g : v->gpus) {
    for (const GpuProcess& p : g.processes) {
      std::printf("# nvml gpu %d pid %u used %llu sm %u\n", g.index, p.pid,
                  static_cast<unsigned long long>(p.used_bytes), p.sm);
    }
  }
  std::fputs(render_metrics(*v, {.version = "gpu-suite"}).c_str(), stdout);
  return 0;
}
