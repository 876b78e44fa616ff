#include "monitor/agent_run.hpp"

#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>

#include "common/build_info.hpp"
#include "common/log.hpp"
#include "deviceplugin/mig_manager.hpp"
#include "monitor/http_endpoints.hpp"
#include "monitor/metrics.hpp"
#include "monitor/nvml_sampler.hpp"
#include "monitor/pod_directory_k8s.hpp"

namespace hami::monitor {

namespace {

std::unique_ptr<GpuSampler> open_sampler(const std::string& nvml_path) {
  if (nvml_path.empty()) return nullptr;
  auto s = NvmlSampler::open(nvml_path);
  if (!s) {
    log::error("%s; continuing without GPU metrics (pass --no-nvml to silence this)",
               s.error().message.c_str());
    return nullptr;
  }
  return std::move(*s);
}

Result<std::unique_ptr<PodDirectory>> open_pod_directory(const AgentSettings& s) {
  if (s.pod_names == "none") return std::unique_ptr<PodDirectory>();
  auto d = make_k8s_pod_directory(s.kubeconfig, s.options.node_name, s.resync);
  if (d) return std::move(*d);
  if (s.pod_names == "api") return d.error();
  log::info("no cluster configuration (%s): labelling containers by pod UID",
            d.error().message.c_str());
  return std::unique_ptr<PodDirectory>();
}

}  // namespace

Result<void> run_agent(const AgentSettings& s, const daemon::StopSignals& signals) {
  auto names = open_pod_directory(s);
  if (!names) return names.error();
  Agent agent(s.options, open_sampler(s.nvml_path), names->get());
  const MetricsOptions metrics{.version = std::string(build_info().version), .legacy = s.legacy};
  if (s.once) {
    agent.run_pass();
    const std::string text = render_metrics(*agent.latest(), metrics);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return {};
  }

  daemon::ShutdownSequence shutdown;
  HttpEndpoints http(agent, {.bind = s.bind,
                             .interval = s.interval,
                             .metrics = metrics,
                             .request_timeout = s.read_timeout,
                             .idle_timeout = s.idle_timeout,
                             .memory_budget = s.http_memory_budget});
  if (auto ok = http.start(); !ok) return ok.error();
  shutdown.add("the metrics server", [&] { http.stop(); });

  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  std::thread signal_thread([&] {
    const int sig = signals.wait();
    log::info("signal %d: stopping", sig);
    std::lock_guard<std::mutex> lock(mu);
    stopping = true;
    cv.notify_all();
  });
  shutdown.add("the signal thread", [&] { signal_thread.join(); });

  log::info("watching %s/containers every %lld ms on node %s", s.options.hook_path.c_str(),
            static_cast<long long>(s.interval.count()), s.options.node_name.c_str());
  std::unique_lock<std::mutex> lock(mu);
  bool told = false;  // the first skipped pass at info, the rest at debug: one per Allocate
  while (!stopping) {
    lock.unlock();
    if (!s.mig_apply_lock.empty() && deviceplugin::MigApplyLock::held(s.mig_apply_lock)) {
      log::write(told ? log::Level::kDebug : log::Level::kInfo,
                 "pass skipped: %s is held (the device plugin is changing MIG instances)",
                 s.mig_apply_lock.c_str());
      told = true;
    } else {
      auto v = agent.run_pass();
      log::debug("pass %llu: %zu containers, %zu GPUs, %lld us",
                 static_cast<unsigned long long>(v->counters.passes), v->containers.size(),
                 v->gpus.size(), static_cast<long long>(v->pass_duration.count()));
    }
    lock.lock();
    cv.wait_for(lock, s.interval, [&] { return stopping; });
  }
  lock.unlock();
  shutdown.run();
  return {};
}

}  // namespace hami::monitor
