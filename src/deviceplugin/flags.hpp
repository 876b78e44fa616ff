#pragma once
// hami-device-plugin's command line: our flags, HAMi's and NVIDIA's device
// plugin's (each with its environment variable, as there), read into the
// options the daemon runs with. docs/device-plugin.md lists them;
// --log-level, -v and --check-flags come from common/daemon_main.
//
//   hami::daemon::StartUp start({.name = "hami-device-plugin", ...});
//   hami::deviceplugin::PluginFlags flags;
//   hami::deviceplugin::add_flags(start, flags);
//   if (auto rc = start.parse(argc, argv)) return *rc;
//   auto o = hami::deviceplugin::settle(flags, start.app());  // Result<DaemonOptions>
//   if (!o) return start.usage(o.error().message);

#include <optional>
#include <string>

#include "common/daemon_main.hpp"
#include "common/result.hpp"
#include "deviceplugin/daemon.hpp"

namespace hami::deviceplugin {

// The command line as given (durations and lists still text).
struct PluginFlags {
  DaemonOptions options;
  std::string kubeconfig;
  std::string config_file;
  std::string node_config_file = "/config/config.json";
  std::string health_interval = "5s";
  std::string register_interval = "30s";
  std::string mig_cleanup_interval = "30s";
  std::string ignore_xids;
  std::string xid_recovery = "5m";
  std::optional<int> split;
  std::optional<double> mem_scaling;
  std::optional<double> core_scaling;
  bool disable_core_limit = false;
  std::optional<std::string> resource_name;
  std::string decision_key_file;
  std::optional<std::string> trusted_schedulers;
  std::string allocate_protocol = "match-pods";
  // NVIDIA's device plugin's flags: accepted where this build does the same.
  std::string mig_strategy = "none";
  std::string device_list_strategy = "envvar";
  bool pass_device_specs = false, gdrcopy = false, gds = false, mofed = false;
  // CDI (docs/cdi.md): --cdi-annotation-prefix, --nvidia-driver-root,
  // --driver-root-ctr-path, --nvidia-cdi-hook-path, --cdi-spec-dir; the
  // strategy is read from device_list_strategy.
  cdi::Options cdi;
};

// Adds every flag to start.app(); upstream's go in its upstream group.
void add_flags(daemon::StartUp& start, PluginFlags& f);
// Checks the flags, config files and environment; the error names the flag
// or file. `app` tells a default --node-config-file from a given one.
Result<DaemonOptions> settle(const PluginFlags& f, const CLI::App& app);
// What --check-flags prints after "flags ok: ": node, socket, hook path.
std::string summary(const DaemonOptions& o);

}  // namespace hami::deviceplugin
