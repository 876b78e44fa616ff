#pragma once
// hami-node-agent's life once its flags are settled: open NVML and the pod
// directory, serve /metrics, run a pass every interval, and on SIGTERM/SIGINT
// stop it all in reverse order (--once: one pass, the metrics on stdout).
//
//   hami::daemon::StopSignals signals;  // before any thread starts
//   if (auto r = hami::monitor::run_agent(*settings, signals); !r)
//     return start.cannot_run(r.error().message);

#include "common/result.hpp"
#include "common/stop_signals.hpp"
#include "monitor/agent_flags.hpp"

namespace hami::monitor {

// Returns after a stop signal (or the --once pass); an Error when it cannot
// start (the pod directory with --pod-names api, the metrics port).
Result<void> run_agent(const AgentSettings& s, const daemon::StopSignals& signals);

}  // namespace hami::monitor
