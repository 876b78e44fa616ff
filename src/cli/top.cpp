#include "cli/top.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <thread>

#include "cli/inspect.hpp"
#include "cli/table.hpp"
#include "common/bytes.hpp"
#include "monitor/agent.hpp"
#include "monitor/nvml_sampler.hpp"

namespace hami::cli {
namespace {

volatile sig_atomic_t g_stop = 0;

std::string percent(uint64_t v) {
  return std::to_string(v) + "%";
}

std::string share(const monitor::ContainerView& c, uint64_t sm_limit) {
  // An MPS client's share is its thread percentage, held by the MPS server.
  if (c.mps_thread_percentage) {
    const uint64_t t = *c.mps_thread_percentage;
    return t >= 100 ? "mps -" : "mps " + percent(t);
  }
  return sm_limit == 0 || sm_limit >= 100 ? "-" : percent(sm_limit);
}

std::string limit_text(uint64_t bytes) {
  return bytes == 0 ? "-" : format_bytes(bytes);
}

std::string state(const monitor::ContainerView& c) {
  if (c.recent_kernel < 0) return "blocked";
  std::string s = c.active ? "active" : "idle";
  if (c.utilization_switch == 1) s += ",contended";
  return s;
}

std::string processes(const monitor::ContainerView& c) {
  std::string out;
  for (const monitor::ContainerProcess& p : c.processes) {
    if (!p.live) continue;
    if (!out.empty()) out += ' ';
    out += std::to_string(p.pid);
    out += p.host_pid ? "->" + std::to_string(*p.host_pid) : "->?";
  }
  return out.empty() ? "-" : out;
}

}  // namespace

std::string render_top(const monitor::NodeView& v) {
  std::string out;
  // Containers grouped by GPU UUID; a GPU NVML did not report still shows.
  std::map<std::string,
           std::vector<std::pair<const monitor::ContainerView*, const monitor::ContainerDevice*>>>
      by_gpu;
  for (const monitor::ContainerView& c : v.containers) {
    for (const monitor::ContainerDevice& d : c.devices) {
      by_gpu[d.uuid.substr(0, std::min<size_t>(d.uuid.size(), 40))].emplace_back(&c, &d);
    }
  }
  auto section = [&](const std::string& title, const std::string& uuid) {
    out += title + "\n";
    auto it = by_gpu.find(uuid);
    if (it == by_gpu.end()) {
      out += "  no containers\n\n";
      return;
    }
    Table t({"POD", "CONTAINER", "MEMORY", "LIMIT", "SM", "SHARE", "STATE", "PIDS (ctr->host)"});
    for (const auto& [c, d] : it->second) {
      const std::string pod =
          c->pod_name.empty()
              ? c->ref.pod_uid
              : (c->pod_namespace.empty() ? "" : c->pod_namespace + "/") + c->pod_name;
      // Spilled memory (CUDA_OVERSUBSCRIBE) is part of the usage, shown beside it.
      const std::string memory =
          d->spilled == 0 ? format_bytes(d->used)
                          : format_bytes(d->used) + " (" + format_bytes(d->spilled) + " host)";
      t.add({pod, c->ref.container, memory, limit_text(d->memory_limit), percent(d->sm_util),
             share(*c, d->sm_limit), state(*c), processes(*c)});
    }
    out += t.render("  ");
    out += "\n";
    by_gpu.erase(it);
  };
  for (const monitor::GpuSample& g : v.gpus) {
    // A MIG device (docs/mig.md) is a section of its own after its GPU; NVML
    // gives no utilisation for it.
    std::string title = "GPU " + std::to_string(g.index);
    if (g.mig) {
      title += " MIG " + g.mig->profile + " (GI " + std::to_string(g.mig->gpu_instance_id) +
               ", CI " + std::to_string(g.mig->compute_instance_id) + ")";
    }
    title += "  " + g.name + "  " + g.uuid;
    if (!g.error.empty()) {
      title += "  (" + g.error + ")";
    } else {
      title += "  memory " + format_bytes(g.memory_used) + " / " + format_bytes(g.memory_total);
      if (!g.mig) title += "  util " + percent(g.utilization);
    }
    section(title, g.uuid.substr(0, std::min<size_t>(g.uuid.size(), 40)));
  }
  // GPUs known only from the state files (no NVML, or another node's UUID).
  std::vector<std::string> rest;
  for (const auto& [uuid, _] : by_gpu)
    rest.push_back(uuid);
  for (const std::string& uuid : rest) {
    section("GPU " + (uuid.empty() ? std::string("(no UUID in the state file)") : uuid) +
                (v.gpus.empty() ? "  (no NVML: host figures unknown)" : "  (not reported by NVML)"),
            uuid);
  }
  if (v.containers.empty()) out += "no container state files found\n";
  if (v.counters.file_problems > 0) {
    out += std::to_string(v.counters.file_problems) +
           " state file(s) could not be read (see the messages above)\n";
  }
  return out;
}

int run_top(const TopOptions& o) {
  std::unique_ptr<monitor::GpuSampler> sampler;
  if (!o.no_nvml) {
    auto s = monitor::NvmlSampler::open(o.nvml_library);
    if (s) {
      sampler = std::move(*s);
    } else {
      std::fprintf(stderr, "vgpu top: %s; showing the state files only\n",
                   s.error().message.c_str());
    }
  }
  monitor::Agent agent(monitor::AgentOptions{.hook_path = o.hook_path, .write_back = false},
                       std::move(sampler), nullptr);
  if (o.once) {
    // SM utilisation is a rate: measured over one interval between two passes.
    agent.run_pass();
    std::this_thread::sleep_for(std::chrono::milliseconds(o.interval_ms));
    std::fputs(render_top(*agent.run_pass()).c_str(), stdout);
    return kExitOk;
  }
  struct sigaction sa {};
  sa.sa_handler = [](int) { g_stop = 1; };
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  const bool tty = ::isatty(STDOUT_FILENO) != 0;
  while (g_stop == 0) {
    const std::string frame = render_top(*agent.run_pass());
    // Home and clear only on a terminal; piped output gets frames one after another.
    if (tty) std::fputs("\x1b[H\x1b[2J", stdout);
    std::fputs(frame.c_str(), stdout);
    std::fflush(stdout);
    for (int waited = 0; waited < o.interval_ms && g_stop == 0; waited += 50) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  return kExitOk;
}

}  // namespace hami::cli
