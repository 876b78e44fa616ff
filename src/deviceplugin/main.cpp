// hami-device-plugin: the NVIDIA device plugin of HAMi in C++ (see
// docs/device-plugin.md). Parses the flags and config files, then runs the
// daemon. Takes upstream's (NVIDIA's and HAMi's) flags and environment too
// (common/go_flags.hpp, docs/operations.md); --check-flags stops after
// validating them. Exit codes: 0 after SIGTERM/SIGINT, 1 when it cannot run (NVML,
// Kubernetes API, device-plugins directory), 2 for bad flags or config.
#include <CLI/CLI.hpp>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <functional>
#include <iostream>
#include <optional>
#include <string>

#include "common/duration_flag.hpp"
#include "common/go_flags.hpp"
#include "common/log.hpp"
#include "common/size_parse.hpp"
#include "deviceplugin/daemon.hpp"

namespace {

constexpr int kExitUsage = 2;
constexpr const char* kUpstream =
    "Upstream compatibility (NVIDIA's and HAMi's flags and env, same meaning)";

// An environment variable upstream's chart sets, read as Go's strconv.ParseBool.
bool env_true(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return false;
  const std::string s(v);
  return s == "1" || s == "t" || s == "T" || s == "true" || s == "TRUE" || s == "True";
}

std::chrono::milliseconds to_ms(const std::string& s) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(*hami::parse_duration(s));
}

}  // namespace

int main(int argc, char** argv) try {
  hami::log::set_component("hami-device-plugin");
  CLI::App app{
      "hami-device-plugin: shares each NVIDIA GPU of this node among containers (HAMi-"
      "compatible). Advertises <resource> to kubelet as split-count devices per GPU, registers "
      "the GPUs on the node for the HAMi scheduler, and answers Allocate with the limits the "
      "scheduler chose.\nExit codes: 0 stopped by a signal, 1 cannot run, 2 bad flags or "
      "config."};
  app.set_version_flag("--version", std::string(HAMI_VERSION));
  app.get_formatter()->column_width(34);

  hami::deviceplugin::DaemonOptions o;
  std::string kubeconfig;
  std::string config_file;
  std::string node_config_file = "/config/config.json";
  std::string health_interval = "5s";
  std::string register_interval = "30s";
  std::string ignore_xids;
  std::string xid_recovery = "5m";
  int log_level = 3;
  std::optional<int> split;
  std::optional<double> mem_scaling;
  std::optional<double> core_scaling;
  bool disable_core_limit = false;
  std::optional<std::string> resource_name;

  app.add_option("--node-name", o.node_name, "This node's name in Kubernetes")
      ->envname("NODE_NAME")
      ->required();
  app.add_option("--kubeconfig", kubeconfig,
                 "Kubeconfig file; default $KUBECONFIG, else in-cluster, else ~/.kube/config");
  app.add_option("--device-plugin-path", o.device_plugin_dir,
                 "kubelet's device plugin directory, where our socket goes")
      ->capture_default_str();
  app.add_option("--kubelet-socket", o.kubelet_socket,
                 "kubelet's Registration socket; default <device-plugin-path>/kubelet.sock");
  app.add_option("--socket-name", o.socket_name,
                 "Our socket's file name; default nvidia-<resource name after '/'>.sock");
  app.add_option("--hook-path", o.hook_path,
                 "Host prefix of the library files: libvgpu.so, ld.so.preload, containers/ and "
                 "limits/ are under <hook-path>/vgpu")
      ->envname("HOOK_PATH")
      ->capture_default_str();
  app.add_option("--lock-dir", o.lock_dir,
                 "Host directory mounted at /tmp/vgpulock (upstream HAMi-core's lock directory)")
      ->capture_default_str();
  app.add_option("--nvml-library", o.nvml_library, "NVML library to dlopen")->capture_default_str();
  app.add_option("--config-file", config_file,
                 "Device config YAML (upstream's, the scheduler's ConfigMap): the nvidia: block "
                 "and an optional nodeconfig: list")
      ->envname("CONFIG_FILE");
  app.add_option("--node-config-file", node_config_file,
                 "Per-node overrides, upstream's {\"nodeconfig\":[{\"name\":...}]}; skipped when "
                 "the default is absent")
      ->capture_default_str();
  app.add_option("--health-interval", health_interval, "How often NVML is asked about each GPU")
      ->check(hami::duration_flag())
      ->capture_default_str();
  app.add_option("--register-interval", register_interval,
                 "How often the node annotation is checked and refreshed")
      ->check(hami::duration_flag())
      ->capture_default_str();
  app.add_option("--ignore-xids", ignore_xids,
                 "Xid errors that do not make a GPU unhealthy, comma-separated, on top of the "
                 "application errors 13,31,43,45,68,109; 'all' watches no Xid events. Env "
                 "DP_DISABLE_HEALTHCHECKS as NVIDIA's plugin ('xids' = all)")
      ->envname("DP_DISABLE_HEALTHCHECKS");
  app.add_option("--xid-recovery", xid_recovery,
                 "How long a critical Xid keeps its GPU unhealthy before NVML checks may mark "
                 "it healthy again; 0: until the plugin restarts")
      ->check(hami::duration_flag(/*allow_zero=*/true))
      ->capture_default_str();
  app.add_option("--device-split-count", split,
                 "Devices advertised per GPU (default 10; the config file wins)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--device-memory-scaling", mem_scaling,
                 "Memory registered per GPU, as a multiple of its real memory (default 1)")
      ->check(CLI::Range(0.01, 100.0));
  app.add_option("--device-cores-scaling", core_scaling,
                 "Cores registered per GPU, as a multiple of 100 (default 1)")
      ->check(CLI::Range(0.01, 100.0));
  app.add_flag("--disable-core-limit", disable_core_limit,
               "Set GPU_CORE_UTILIZATION_POLICY=disable in every container");
  app.add_option("--resource-name", resource_name,
                 "Resource advertised to kubelet (default nvidia.com/gpu)");
  app.add_option("--log-level", log_level,
                 "0 silent, 1 errors, 2 + warnings, 3 + what happened, 4 + debug")
      ->check(CLI::Range(0, 4))
      ->capture_default_str();
  bool check_flags = false;
  app.add_flag("--check-flags", check_flags,
               "Validate the flags, config files and environment, print the effective config, "
               "exit 0 (2 if bad); contacts nothing");

  // NVIDIA's device plugin's flags (each with its environment variable, as
  // there) and klog's -v, which upstream's chart passes.
  int klog_v = 0;
  std::string mig_strategy = "none";
  std::string device_list_strategy = "envvar";
  bool pass_device_specs = false, gdrcopy = false, gds = false, mofed = false;
  std::string driver_root = "/", cdi_hook_path;
  app.add_option("-v,--v", klog_v, "klog verbosity: 0-3 log as --log-level=3, 4 and more as 4")
      ->check(CLI::Range(0, 1000))
      ->group(kUpstream);
  app.add_option("--mig-strategy", mig_strategy, "Only none: MIG is not in this build")
      ->envname("MIG_STRATEGY")
      ->check(CLI::IsMember({"none", "single", "mixed"}))
      ->capture_default_str()
      ->group(kUpstream);
  app.add_option("--device-list-strategy", device_list_strategy,
                 "Only envvar (NVIDIA_VISIBLE_DEVICES), what this build does")
      ->envname("DEVICE_LIST_STRATEGY")
      ->capture_default_str()
      ->group(kUpstream);
  app.add_flag("--pass-device-specs", pass_device_specs,
               "Only false: the container runtime adds the device nodes")
      ->envname("PASS_DEVICE_SPECS")
      ->group(kUpstream);
  app.add_flag("--gdrcopy-enabled", gdrcopy, "Only false")
      ->envname("GDRCOPY_ENABLED")
      ->group(kUpstream);
  app.add_flag("--gds-enabled", gds, "Only false")->envname("GDS_ENABLED")->group(kUpstream);
  app.add_flag("--mofed-enabled", mofed, "Only false")->envname("MOFED_ENABLED")->group(kUpstream);
  app.add_option("--nvidia-driver-root", driver_root,
                 "Accepted; used only for device specs and CDI, which this build does not do")
      ->envname("NVIDIA_DRIVER_ROOT")
      ->group(kUpstream);
  app.add_option("--nvidia-cdi-hook-path", cdi_hook_path, "Accepted; CDI only, not used")
      ->envname("NVIDIA_CDI_HOOK_PATH")
      ->group(kUpstream);

  try {
    hami::goflags::Argv args(argc, argv);
    app.parse(args.argc(), args.argv());
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : kExitUsage;
  }
  auto level = static_cast<hami::log::Level>(log_level);
  if (app.count("--v") > 0) {
    level = hami::goflags::most_verbose(level, hami::goflags::klog_level(klog_v));
  }
  hami::log::set_level(level);
  auto usage = [](const std::string& m) {
    std::cerr << "hami-device-plugin: " << m << "\n";
    return kExitUsage;
  };
  using hami::goflags::not_supported;
  if (mig_strategy != "none") {
    return usage(not_supported("--mig-strategy=" + mig_strategy,
                               "MIG is not implemented; use --mig-strategy=none (upstream's "
                               "chart: devicePlugin.migStrategy=none)"));
  }
  for (size_t start = 0; start <= device_list_strategy.size();) {
    const size_t comma = device_list_strategy.find(',', start);
    const std::string one = device_list_strategy.substr(start, comma - start);
    if (one != "envvar") {
      return usage(not_supported("--device-list-strategy=" + one,
                                 "only envvar (NVIDIA_VISIBLE_DEVICES) is implemented"));
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (pass_device_specs) {
    return usage(not_supported("--pass-device-specs=true (PASS_DEVICE_SPECS)",
                               "Allocate returns no device nodes; the NVIDIA container runtime "
                               "adds them"));
  }
  for (auto [on, name] : {std::pair{gdrcopy, "--gdrcopy-enabled=true (GDRCOPY_ENABLED)"},
                          std::pair{gds, "--gds-enabled=true (GDS_ENABLED)"},
                          std::pair{mofed, "--mofed-enabled=true (MOFED_ENABLED)"}}) {
    if (on) return usage(not_supported(name, "GDRCopy, GDS and MOFED are not implemented"));
  }
  if (env_true("ENABLE_TOPOLOGY_SCORE")) {
    hami::log::warn(
        "ENABLE_TOPOLOGY_SCORE=true: this build publishes no NVLink topology score; the "
        "scheduler's topology-aware policy orders GPUs as spread (docs/comparison.md)");
  }

  hami::deviceplugin::PluginConfig& cfg = o.config;
  if (split) cfg.device_split_count = *split;
  if (mem_scaling) cfg.device_memory_scaling = *mem_scaling;
  if (core_scaling) cfg.device_core_scaling = *core_scaling;
  if (disable_core_limit) cfg.disable_core_limit = true;
  if (resource_name) cfg.resource_count_name = *resource_name;
  if (!config_file.empty()) {
    if (auto r = apply_config_file(cfg, config_file, o.node_name); !r)
      return usage(r.error().message);
  }
  const bool default_node_config = app.count("--node-config-file") == 0;
  if (!node_config_file.empty() &&
      !(default_node_config && !std::filesystem::exists(node_config_file))) {
    if (auto r = apply_config_file(cfg, node_config_file, o.node_name); !r) {
      std::cerr << "hami-device-plugin: " << r.error().message << "\n";
      return kExitUsage;
    }
  }
  const std::string& res = cfg.resource_count_name;
  if (res.find('/') == std::string::npos || res.back() == '/') {
    std::cerr << "hami-device-plugin: resource name '" << res
              << "' is not of the form <domain>/<name>\n";
    return kExitUsage;
  }
  if (o.socket_name.empty()) o.socket_name = "nvidia-" + res.substr(res.rfind('/') + 1) + ".sock";
  if (!kubeconfig.empty()) o.kubeconfig = kubeconfig;
  o.health_interval = to_ms(health_interval);
  o.register_interval = to_ms(register_interval);
  if (auto r = hami::deviceplugin::parse_ignore_xids(ignore_xids, o.xids); !r) {
    std::cerr << "hami-device-plugin: " << r.error().message << "\n";
    return kExitUsage;
  }
  o.xids.recovery = to_ms(xid_recovery);
  if (check_flags) {
    std::cout << "hami-device-plugin: flags ok: node " << o.node_name << ", socket "
              << o.device_plugin_dir << "/" << o.socket_name << ", hook path " << o.hook_path
              << ", log level " << static_cast<int>(level) << "\n"
              << cfg.describe() << "\n";
    for (const auto& w : cfg.warnings)
      std::cout << "warning: " << w << "\n";
    return 0;
  }
  return hami::deviceplugin::run_daemon(o);
} catch (const std::exception& e) {
  // Daemon code may throw (gRPC, the standard library); it ends here, said plainly.
  std::cerr << "hami-device-plugin: " << e.what() << "\n";
  return 1;
}
