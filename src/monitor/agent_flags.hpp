#pragma once
// hami-node-agent's command line: our flags and upstream vGPUmonitor's (same
// meaning), read into the settings the agent runs with. docs/node-agent.md
// lists them; --log-level, -v and --check-flags come from common/daemon_main.
//
//   hami::daemon::StartUp start({.name = "hami-node-agent", ...});
//   hami::monitor::AgentFlags flags;
//   hami::monitor::add_flags(start, flags);
//   if (auto rc = start.parse(argc, argv)) return *rc;
//   auto s = hami::monitor::settle(flags);  // Result<AgentSettings>
//   if (!s) return start.usage(s.error().message);

#include <chrono>
#include <string>

#include "common/daemon_main.hpp"
#include "common/result.hpp"
#include "deviceplugin/mig_manager.hpp"
#include "monitor/agent.hpp"

namespace hami::monitor {

// The command line as given (durations and sizes still text).
struct AgentFlags {
  AgentOptions options;  // hook path and node name default from HOOK_PATH and NODE_NAME
  std::string bind = ":9394";
  std::string interval = "5s";
  std::string nvml_path = "libnvidia-ml.so.1";
  bool no_nvml = false;
  std::string pod_names = "auto";
  std::string kubeconfig;  // default $KUBECONFIG
  std::string resync;      // default $HAMI_RESYNC_INTERVAL, else 5m
  bool legacy = false;
  bool read_only = false;
  bool once = false;
  std::string read_timeout = "10s";
  std::string idle_timeout = "60s";
  size_t http_memory_budget = 32u << 20;
  std::string over_limit_action = "report";
  std::string over_limit_margin = "256m";
  std::string mig_apply_lock = deviceplugin::kMigApplyLock;
};

// What the agent runs with, checked.
struct AgentSettings {
  AgentOptions options;
  std::string bind;
  std::chrono::milliseconds interval{5000};
  std::string nvml_path;  // empty: no NVML
  std::string pod_names;  // auto, api or none
  std::string kubeconfig;
  std::chrono::seconds resync{300};
  bool legacy = false;
  bool once = false;
  std::chrono::milliseconds read_timeout{10000}, idle_timeout{60000};
  size_t http_memory_budget = 32u << 20;
  // Dynamic MIG's apply lock (the device plugin's --mig-apply-lock): no pass
  // runs while it is held, as NVML answers oddly while instances change.
  std::string mig_apply_lock;
  std::string summary;  // what --check-flags prints
};

// Adds every flag to start.app(); upstream's go in its upstream group.
void add_flags(daemon::StartUp& start, AgentFlags& f);
// Checks the flags and environment; the error names the flag.
Result<AgentSettings> settle(const AgentFlags& f);

}  // namespace hami::monitor
