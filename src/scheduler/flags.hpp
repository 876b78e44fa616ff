#pragma once
// hami-scheduler's command line: our flags and upstream HAMi's (same
// meaning), read into the settings the daemon runs with. docs/scheduler.md
// lists them; --log-level, -v and --check-flags come from common/daemon_main.
//
//   hami::daemon::StartUp start({.name = "hami-scheduler", ...});
//   hami::scheduler::SchedulerFlags flags;
//   hami::scheduler::add_flags(start, flags);
//   if (auto rc = start.parse(argc, argv)) return *rc;
//   auto s = hami::scheduler::settle(flags);  // Result<SchedulerSettings>
//   if (!s) return start.usage(s.error().message);

#include <chrono>
#include <string>

#include "common/daemon_main.hpp"
#include "common/result.hpp"
#include "scheduler/config.hpp"
#include "scheduler/node_selector.hpp"
#include "scheduler/server.hpp"

namespace hami::scheduler {

// The command line as given (durations and policies still text).
struct SchedulerFlags {
  SchedulerConfig config;
  ServerOptions server;
  std::string kubeconfig, device_config, node_policy = "binpack", gpu_policy = "spread";
  std::string lock_timeout = "5m", lock_wait = "2s";
  std::string extender_http_timeout = "30s";  // kube-scheduler's, for the bind deadline
  std::string read_timeout = "10s", idle_timeout = "60s";
  bool bind_redirect = true;
  bool leader_elect = false;
  std::string lease_name = "hami-scheduler";
  std::string lease_ns;  // default $POD_NAMESPACE, else kube-system
  std::string identity;  // default $POD_NAME, else the host name
  std::string lease_duration = "15s", renew_deadline = "10s", retry_period = "2s";
  std::string node_label_selector;
  bool debug = false, enable_ascend = false, enable_iluvatar = false;
  std::string decision_key_file, decision_writers;
  std::string trusted_schedulers;
  bool trusted_schedulers_given = false;  // else: none with a key, our own name without
};

// What the daemon runs with, checked.
struct SchedulerSettings {
  SchedulerConfig config;
  ServerOptions server;
  NodeLabelSelector nodes;
  std::string kubeconfig;
  bool leader_elect = false;
  std::string lease_ns, lease_name, identity;
  std::chrono::seconds lease_duration{15};
  std::chrono::milliseconds renew_deadline{10000}, retry_period{2000};
  std::string summary;  // what --check-flags prints
};

// Adds every flag to start.app(); upstream's spellings go in its upstream group.
void add_flags(daemon::StartUp& start, SchedulerFlags& f);
// Checks the flags, files and environment; the error names the flag.
Result<SchedulerSettings> settle(const SchedulerFlags& f);

}  // namespace hami::scheduler
