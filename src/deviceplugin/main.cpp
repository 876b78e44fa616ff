// hami-device-plugin: the NVIDIA device plugin of HAMi in C++ (see
// docs/device-plugin.md). Parses the flags and config files, then runs the
// daemon. Takes upstream's (NVIDIA's and HAMi's) flags and environment too
// (common/go_flags.hpp, docs/operations.md); --check-flags stops after
// validating them. Exit codes: 0 after SIGTERM/SIGINT, 1 when it cannot run (NVML,
// Kubernetes API, device-plugins directory), 2 for bad flags or config.
#include "common/daemon_main.hpp"
#include "deviceplugin/daemon.hpp"
#include "deviceplugin/flags.hpp"

int main(int argc, char** argv) {
  using namespace hami;  // NOLINT
  return daemon::guarded("hami-device-plugin", [&] {
    // Parse the command line.
    daemon::StartUp start({
        .name = "hami-device-plugin",
        .description =
            "hami-device-plugin: shares each NVIDIA GPU of this node among containers (HAMi-"
            "compatible). Advertises <resource> to kubelet as split-count devices per GPU, "
            "registers the GPUs on the node for the HAMi scheduler, and answers Allocate with "
            "the limits the scheduler chose.\nExit codes: 0 stopped by a signal, 1 cannot run, "
            "2 bad flags or config.",
        .upstream_group = "Upstream compatibility (NVIDIA's and HAMi's flags and env, same "
                          "meaning)",
        .check_flags_help = "Validate the flags, config files and environment, print the "
                            "effective config, exit 0 (2 if bad); contacts nothing",
        .help_column = 34,
    });
    deviceplugin::PluginFlags flags;
    deviceplugin::add_flags(start, flags);
    if (auto rc = start.parse(argc, argv)) return *rc;

    // Settle: every flag, config file and variable checked before anything starts.
    auto options = deviceplugin::settle(flags, start.app());
    if (!options) return start.usage(options.error().message);
    if (start.check_flags()) {
      std::string more = options->config.describe() + "\n";
      for (const auto& w : options->config.warnings)
        more += "warning: " + w + "\n";
      return start.flags_ok(deviceplugin::summary(*options), more);
    }

    // Run until SIGTERM/SIGINT (SIGHUP: serve and register again), then shut down.
    return deviceplugin::run_daemon(*options);
  });
}
