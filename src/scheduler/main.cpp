// hami-scheduler: the HAMi scheduler extender and mutating webhook in C++ (see
// docs/scheduler.md). Watches nodes and pods into an incremental cache,
// answers kube-scheduler's filter/prioritize/bind and the API server's
// AdmissionReview over HTTPS, and binds only while it leads (Lease).
// Takes upstream's flags too (common/go_flags.hpp, docs/operations.md);
// --check-flags stops after validating them.
// Exit codes: 0 after SIGTERM/SIGINT, 1 when it cannot run, 2 for bad flags.
#include "common/daemon_main.hpp"
#include "common/stop_signals.hpp"
#include "scheduler/flags.hpp"
#include "scheduler/run.hpp"

int main(int argc, char** argv) {
  using namespace hami;  // NOLINT
  return daemon::guarded("hami-scheduler", [&] {
    // Parse the command line.
    daemon::StartUp start({
        .name = "hami-scheduler",
        .description = "hami-scheduler: the HAMi scheduler extender (filter, prioritize, bind) "
                       "and mutating webhook, over HTTPS.\nExit codes: 0 stopped by a signal, 1 "
                       "cannot run, 2 bad flags or config.",
        .upstream_group = "Upstream compatibility (HAMi's flags, same meaning)",
        .help_column = 40,
    });
    scheduler::SchedulerFlags flags;
    scheduler::add_flags(start, flags);
    if (auto rc = start.parse(argc, argv)) return *rc;
    if (flags.debug) start.raise_level(log::Level::kDebug);

    // Settle: every flag, file and variable checked before anything starts.
    auto settings = scheduler::settle(flags);
    if (!settings) return start.usage(settings.error().message);
    if (start.check_flags()) return start.flags_ok(settings->summary);

    // Run until SIGTERM/SIGINT, then shut down in reverse order of start-up.
    const daemon::StopSignals signals;
    if (auto r = scheduler::run_scheduler(*settings, signals); !r) {
      return start.cannot_run(r.error().message);
    }
    return daemon::kExitOk;
  });
}
