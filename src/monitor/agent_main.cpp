// hami-node-agent: the per-node daemon that accounts GPU use per container,
// resolves host PIDs, runs the priority/contention feedback loop and serves
// Prometheus metrics. docs/node-agent.md describes it; --help lists the flags.
// Takes upstream vGPUmonitor's flags too (klog's -v, --legacy-metrics;
// docs/operations.md); --check-flags stops after validating them.
#include "common/daemon_main.hpp"
#include "common/stop_signals.hpp"
#include "monitor/agent_flags.hpp"
#include "monitor/agent_run.hpp"

int main(int argc, char** argv) {
  using namespace hami;  // NOLINT
  return daemon::guarded("hami-node-agent", [&] {
    // Parse the command line.
    daemon::StartUp start({
        .name = "hami-node-agent",
        .description =
            "hami-node-agent: per-container GPU accounting, host-PID mapping, the priority and\n"
            "contention feedback loop, and Prometheus metrics for one node.\n"
            "Runs in the host PID namespace (hostPID: true) with the containers' state\n"
            "directory mounted. Exit codes: 0 stopped by signal, 2 usage error, 1 start-up "
            "failure.",
        .upstream_group = "Upstream compatibility (vGPUmonitor's flags, same meaning)",
        .check_flags_help = "Validate the flags and environment, print what would run, exit 0 "
                            "(2 if bad); reads and contacts nothing",
    });
    monitor::AgentFlags flags;
    monitor::add_flags(start, flags);
    if (auto rc = start.parse(argc, argv)) return *rc;

    // Settle: every flag and variable checked before anything starts.
    auto settings = monitor::settle(flags);
    if (!settings) return start.usage(settings.error().message);
    if (start.check_flags()) return start.flags_ok(settings->summary);

    // Run a pass every interval until SIGTERM/SIGINT, then shut down.
    const daemon::StopSignals signals;
    if (auto r = monitor::run_agent(*settings, signals); !r) {
      return start.cannot_run(r.error().message);
    }
    return daemon::kExitOk;
  });
}
