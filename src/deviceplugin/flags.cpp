#include "deviceplugin/flags.hpp"

#include <cstdlib>
#include <filesystem>

#include "common/duration_flag.hpp"
#include "common/go_flags.hpp"
#include "common/log.hpp"
#include "common/size_parse.hpp"

namespace hami::deviceplugin {

namespace {

// An environment variable upstream's chart sets, read as Go's strconv.ParseBool.
bool env_true(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return false;
  const std::string s(v);
  return s == "1" || s == "t" || s == "T" || s == "true" || s == "TRUE" || s == "True";
}

std::chrono::milliseconds to_ms(const std::string& s) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(*parse_duration(s));
}

}  // namespace

void add_flags(daemon::StartUp& start, PluginFlags& f) {
  CLI::App& app = start.app();
  DaemonOptions& o = f.options;
  app.add_option("--node-name", o.node_name, "This node's name in Kubernetes")
      ->envname("NODE_NAME")
      ->required();
  app.add_option("--kubeconfig", f.kubeconfig,
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
  app.add_option("--config-file", f.config_file,
                 "Device config YAML (upstream's, the scheduler's ConfigMap): the nvidia: block "
                 "and an optional nodeconfig: list")
      ->envname("CONFIG_FILE");
  app.add_option("--node-config-file", f.node_config_file,
                 "Per-node overrides, upstream's {\"nodeconfig\":[{\"name\":...}]}; skipped when "
                 "the default is absent")
      ->capture_default_str();
  app.add_option("--health-interval", f.health_interval, "How often NVML is asked about each GPU")
      ->check(duration_flag())
      ->capture_default_str();
  app.add_option("--register-interval", f.register_interval,
                 "How often the node annotation is checked and refreshed")
      ->check(duration_flag())
      ->capture_default_str();
  app.add_option("--mig-cleanup-interval", f.mig_cleanup_interval,
                 "Dynamic MIG: how often the MIG instances no running pod names are removed "
                 "(also once at start)")
      ->check(duration_flag())
      ->capture_default_str();
  app.add_option("--mig-apply-lock", o.mig_apply_lock,
                 "Dynamic MIG's apply lock file, upstream's; health checks, registration and "
                 "the node agent wait while it is held (give the node agent the same path)")
      ->capture_default_str();
  app.add_option("--ignore-xids", f.ignore_xids,
                 "Xid errors that do not make a GPU unhealthy, comma-separated, on top of the "
                 "application errors 13,31,43,45,68,109; 'all' watches no Xid events. Env "
                 "DP_DISABLE_HEALTHCHECKS as NVIDIA's plugin ('xids' = all)")
      ->envname("DP_DISABLE_HEALTHCHECKS");
  app.add_option("--xid-recovery", f.xid_recovery,
                 "How long a critical Xid keeps its GPU unhealthy before NVML checks may mark "
                 "it healthy again; 0: until the plugin restarts")
      ->check(duration_flag(/*allow_zero=*/true))
      ->capture_default_str();
  app.add_option("--device-split-count", f.split,
                 "Devices advertised per GPU (default 10; the config file wins)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--device-memory-scaling", f.mem_scaling,
                 "Memory registered per GPU, as a multiple of its real memory (default 1)")
      ->check(CLI::Range(0.01, 100.0));
  app.add_option("--device-cores-scaling", f.core_scaling,
                 "Cores registered per GPU, as a multiple of 100 (default 1)")
      ->check(CLI::Range(0.01, 100.0));
  app.add_flag("--disable-core-limit", f.disable_core_limit,
               "Set GPU_CORE_UTILIZATION_POLICY=disable in every container");
  app.add_option("--resource-name", f.resource_name,
                 "Resource advertised to kubelet (default nvidia.com/gpu)");
  app.add_option("--allocate-protocol", f.allocate_protocol,
                 "match-pods: the node is registered as matching each Allocate to its pod, and "
                 "our scheduler binds here without the node lock (docs/scheduler-protocol.md); "
                 "lock: our scheduler takes upstream's node lock for each pod bound here")
      ->check(CLI::IsMember({"lock", "match-pods"}))
      ->capture_default_str();

  app.add_option(
      "--decision-key-file", f.decision_key_file,
      "The scheduler's decision key(s), one per line: Allocate serves only pods "
      "whose GPU decision it signed (unset: only --trusted-schedulers' pods, unchecked)");
  app.add_option("--trusted-schedulers", f.trusted_schedulers,
                 "Comma-separated schedulerName values whose unsigned decisions Allocate serves "
                 "(upstream HAMi's scheduler). Default: none with --decision-key-file, else "
                 "hami-scheduler")
      ->type_name("NAMES");

  // NVIDIA's device plugin's flags, each with its environment variable as there.
  const std::string& upstream = start.upstream_group();
  app.add_option("--mig-strategy", f.mig_strategy,
                 "none or single: the MIG devices of MIG-enabled GPUs are nvidia.com/gpu "
                 "devices placed by the scheduler (docs/mig.md); mixed is not in this build (a "
                 "node's migstrategy in the config is applied too)")
      ->envname("MIG_STRATEGY")
      ->check(CLI::IsMember({"none", "single", "mixed"}))
      ->capture_default_str()
      ->group(upstream);
  app.add_option("--device-list-strategy", f.device_list_strategy,
                 "How Allocate names the GPUs to the runtime, comma-separated: envvar "
                 "(NVIDIA_VISIBLE_DEVICES), cdi-annotations, cdi-cri (CDI, docs/cdi.md)")
      ->envname("DEVICE_LIST_STRATEGY")
      ->capture_default_str()
      ->group(upstream);
  app.add_option("--cdi-annotation-prefix", f.cdi.annotation_prefix,
                 "Key prefix of the cdi-annotations annotation")
      ->envname("CDI_ANNOTATION_PREFIX")
      ->capture_default_str()
      ->group(upstream);
  app.add_option("--driver-root-ctr-path", f.cdi.driver_root_ctr_path,
                 "Where this container sees --nvidia-driver-root, read for the CDI spec "
                 "(absent: --nvidia-driver-root itself)")
      ->envname("DRIVER_ROOT_CTR_PATH")
      ->capture_default_str()
      ->group(upstream);
  app.add_option("--cdi-spec-dir", f.cdi.spec_dir,
                 "Where the CDI spec is written (cdi-* strategies)")
      ->capture_default_str();
  app.add_flag("--pass-device-specs", f.pass_device_specs,
               "Only false: the container runtime adds the device nodes")
      ->envname("PASS_DEVICE_SPECS")
      ->group(upstream);
  app.add_flag("--gdrcopy-enabled", f.gdrcopy, "Only false")
      ->envname("GDRCOPY_ENABLED")
      ->group(upstream);
  app.add_flag("--gds-enabled", f.gds, "Only false")->envname("GDS_ENABLED")->group(upstream);
  app.add_flag("--mofed-enabled", f.mofed, "Only false")->envname("MOFED_ENABLED")->group(upstream);
  app.add_option("--nvidia-driver-root", f.cdi.driver_root,
                 "The driver's root on the host: prefix of the CDI spec's host paths")
      ->envname("NVIDIA_DRIVER_ROOT")
      ->capture_default_str()
      ->group(upstream);
  app.add_option("--nvidia-cdi-hook-path", f.cdi.hook_path,
                 "nvidia-cdi-hook on the host: the CDI spec runs its update-ldcache (unset: no "
                 "hook)")
      ->envname("NVIDIA_CDI_HOOK_PATH")
      ->group(upstream);
}

Result<DaemonOptions> settle(const PluginFlags& f, const CLI::App& app) {
  using goflags::not_supported;
  auto strategy = cdi::parse_strategy(f.device_list_strategy);
  if (!strategy) return strategy.error();
  if (auto r = cdi::check_annotation_prefix(f.cdi.annotation_prefix); !r) return r.error();
  for (auto [path, name] : {std::pair{&f.cdi.driver_root, "--nvidia-driver-root"},
                            std::pair{&f.cdi.driver_root_ctr_path, "--driver-root-ctr-path"},
                            std::pair{&f.cdi.spec_dir, "--cdi-spec-dir"}}) {
    if (path->empty() || (*path)[0] != '/')
      return Error{std::string(name) + " '" + *path + "' is not an absolute path"};
  }
  if (!f.cdi.hook_path.empty() && f.cdi.hook_path[0] != '/')
    return Error{"--nvidia-cdi-hook-path '" + f.cdi.hook_path + "' is not an absolute path"};
  if (f.pass_device_specs) {
    return Error{not_supported("--pass-device-specs=true (PASS_DEVICE_SPECS)",
                               "Allocate returns no device nodes; the NVIDIA container runtime "
                               "adds them")};
  }
  for (auto [on, name] : {std::pair{f.gdrcopy, "--gdrcopy-enabled=true (GDRCOPY_ENABLED)"},
                          std::pair{f.gds, "--gds-enabled=true (GDS_ENABLED)"},
                          std::pair{f.mofed, "--mofed-enabled=true (MOFED_ENABLED)"}}) {
    if (on) return Error{not_supported(name, "GDRCopy, GDS and MOFED are not implemented")};
  }
  if (env_true("ENABLE_TOPOLOGY_SCORE")) {
    log::info(
        "ENABLE_TOPOLOGY_SCORE=true: this build always publishes the GPU pair scores "
        "(hami.io/node-nvidia-score) on nodes of two GPUs or more; the variable changes nothing");
  }

  DaemonOptions o = f.options;
  o.cdi = f.cdi;
  o.cdi.strategy = *strategy;
  PluginConfig& cfg = o.config;
  if (f.split) cfg.device_split_count = *f.split;
  if (f.mem_scaling) cfg.device_memory_scaling = *f.mem_scaling;
  if (f.core_scaling) cfg.device_core_scaling = *f.core_scaling;
  cfg.mig_strategy = f.mig_strategy == "single"  ? MigStrategy::kSingle
                     : f.mig_strategy == "mixed" ? MigStrategy::kMixed
                                                 : MigStrategy::kNone;
  if (f.disable_core_limit) cfg.disable_core_limit = true;
  if (f.resource_name) cfg.resource_count_name = *f.resource_name;
  if (!f.config_file.empty()) {
    if (auto r = apply_config_file(cfg, f.config_file, o.node_name); !r) return r.error();
  }
  const bool default_node_config = app.count("--node-config-file") == 0;
  if (!f.node_config_file.empty() &&
      !(default_node_config && !std::filesystem::exists(f.node_config_file))) {
    if (auto r = apply_config_file(cfg, f.node_config_file, o.node_name); !r) return r.error();
  }
  // The flag or this node's migstrategy (a node's none, as in upstream's
  // example config.json, does not hide a mixed flag).
  if (f.mig_strategy == "mixed" || cfg.mig_strategy == MigStrategy::kMixed) {
    return Error{not_supported("--mig-strategy=mixed",
                               "nvidia.com/mig-<profile> resources are not in this build; "
                               "single (or none) serves the MIG devices as nvidia.com/gpu, "
                               "placed by gpumem (docs/mig.md)")};
  }
  const std::string& res = cfg.resource_count_name;
  if (res.find('/') == std::string::npos || res.back() == '/') {
    return Error{"resource name '" + res + "' is not of the form <domain>/<name>"};
  }
  if (o.socket_name.empty()) o.socket_name = "nvidia-" + res.substr(res.rfind('/') + 1) + ".sock";
  if (!f.kubeconfig.empty()) o.kubeconfig = f.kubeconfig;
  o.health_interval = to_ms(f.health_interval);
  o.register_interval = to_ms(f.register_interval);
  o.mig_cleanup_interval = to_ms(f.mig_cleanup_interval);
  if (o.mig_apply_lock.empty() || o.mig_apply_lock[0] != '/')
    return Error{"--mig-apply-lock '" + o.mig_apply_lock + "' is not an absolute path"};
  o.match_pods = f.allocate_protocol == "match-pods";
  if (auto r = parse_ignore_xids(f.ignore_xids, o.xids); !r) return r.error();
  if (!f.decision_key_file.empty()) {
    auto keys = protocol::DecisionKeys::load(f.decision_key_file);
    if (!keys) return Error{"--decision-key-file: " + keys.error().message};
    o.decisions.keys = std::move(*keys);
  }
  if (f.trusted_schedulers) {
    o.decisions.unsigned_schedulers = protocol::parse_name_list(*f.trusted_schedulers);
  } else if (o.decisions.keys) {
    o.decisions.unsigned_schedulers.clear();
  }
  o.xids.recovery = to_ms(f.xid_recovery);
  return o;
}

std::string summary(const DaemonOptions& o) {
  std::string list;
  for (auto [on, name] : {std::pair{o.cdi.strategy.envvar, "envvar"},
                          std::pair{o.cdi.strategy.annotations, "cdi-annotations"},
                          std::pair{o.cdi.strategy.cri, "cdi-cri"}}) {
    if (on) list += (list.empty() ? "" : ",") + std::string(name);
  }
  if (o.cdi.strategy.cdi()) list += " (CDI spec in " + o.cdi.spec_dir + ")";
  return "node " + o.node_name + ", socket " + o.device_plugin_dir + "/" + o.socket_name +
         ", hook path " + o.hook_path + ", device list " + list;
}

}  // namespace hami::deviceplugin
