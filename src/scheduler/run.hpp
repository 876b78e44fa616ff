#pragma once
// hami-scheduler's life once its flags are settled: connect to the API
// server, fill the cache from watches, elect a leader, serve the extender and
// webhook, and on SIGTERM/SIGINT stop it all in reverse order.
//
//   hami::daemon::StopSignals signals;  // before any thread starts
//   if (auto r = hami::scheduler::run_scheduler(*settings, signals); !r)
//     return start.cannot_run(r.error().message);

#include "common/result.hpp"
#include "common/stop_signals.hpp"
#include "scheduler/flags.hpp"

namespace hami::scheduler {

// Returns after a stop signal and an orderly shutdown; an Error when it cannot
// start (Kubernetes config or client, a port taken).
Result<void> run_scheduler(const SchedulerSettings& s, const daemon::StopSignals& signals);

}  // namespace hami::scheduler
