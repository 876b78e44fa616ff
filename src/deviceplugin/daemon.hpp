#pragma once
// The device plugin daemon, put together: NVML discovery and health checks,
// the DevicePlugin server on its socket, registration with kubelet (again
// whenever kubelet's socket is recreated or ours disappears), the node
// registration annotation and Allocate through the Kubernetes API. Runs until
// SIGTERM or SIGINT; SIGHUP restarts the server and registers again.
//
//   DaemonOptions o;  o.node_name = "node-1";  ...   // flags (main.cpp)
//   return run_daemon(o);                           // exit code; logs say why

#include <chrono>
#include <optional>
#include <string>

#include "deviceplugin/cdi.hpp"
#include "deviceplugin/config.hpp"
#include "deviceplugin/mig_manager.hpp"
#include "protocol/decision.hpp"

namespace hami::deviceplugin {

struct DaemonOptions {
  std::string node_name;
  std::optional<std::string> kubeconfig;  // else $KUBECONFIG, in-cluster, ~/.kube/config
  std::string device_plugin_dir = "/var/lib/kubelet/device-plugins/";
  std::string kubelet_socket;  // default: <device_plugin_dir>/kubelet.sock
  std::string socket_name;     // default: nvidia-<resource name after '/'>.sock
  std::string hook_path = "/usr/local";
  std::string lock_dir = protocol::kContainerLockDir;
  std::string nvml_library = "libnvidia-ml.so.1";
  std::chrono::milliseconds health_interval{5000};
  std::chrono::milliseconds register_interval{30000};
  // Dynamic MIG (docs/mig-dynamic.md): upstream's apply lock, and how often
  // instances no running pod names are removed.
  std::string mig_apply_lock = kMigApplyLock;
  std::chrono::milliseconds mig_cleanup_interval{30000};
  // --allocate-protocol match-pods: register hami.io/node-allocate-protocol,
  // so our scheduler binds here without the node lock (pod_match.hpp).
  bool match_pods = false;
  XidPolicy xids;       // --ignore-xids, --xid-recovery
  PluginConfig config;  // flags and config files already applied
  // Whose GPU decisions Allocate serves (--decision-key-file, --trusted-schedulers).
  protocol::DecisionTrust decisions;
  // --device-list-strategy and the CDI spec's settings: with a cdi-*
  // strategy the spec is written at start and on SIGHUP (cdi.hpp).
  cdi::Options cdi;
};

int run_daemon(const DaemonOptions& options);

}  // namespace hami::deviceplugin
