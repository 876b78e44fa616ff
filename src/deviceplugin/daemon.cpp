#include "deviceplugin/daemon.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "common/log.hpp"
#include "common/stop_signals.hpp"
#include "common/unique_fd.hpp"
#include "deviceplugin/allocator.hpp"
#include "deviceplugin/dir_watcher.hpp"
#include "deviceplugin/discovery.hpp"
#include "deviceplugin/dynamic_mig.hpp"
#include "deviceplugin/limits_follower.hpp"
#include "deviceplugin/mps_supervisor.hpp"
#include "deviceplugin/node_registrar.hpp"
#include "deviceplugin/plugin_server.hpp"
#include "k8s/client.hpp"
#include "k8s/config.hpp"
#include "k8s/paths.hpp"
#include "k8s/reflector.hpp"
#include "mps/control_daemon.hpp"
#include "nvml/mig_control.hpp"
#include "nvml/nvml.hpp"
#include "protocol/annotations.hpp"
#include "protocol/node_register.hpp"

namespace hami::deviceplugin {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string join(const std::string& dir, const std::string& name) {
  return (std::filesystem::path(dir) / name).string();
}

// The MPS GPUs whose compute mode lets MPS run. The others stay Unhealthy
// with the fix in the reason; the mode is read once, so the plugin must be
// restarted after it is changed.
std::vector<std::string> mps_capable(nvml::Library& nvml, DeviceState& state,
                                     const std::vector<std::string>& uuids) {
  std::vector<std::string> out;
  for (const std::string& uuid : uuids) {
    std::optional<int> mode;
    for (const Gpu& g : state.gpus()) {
      if (g.uuid != uuid) continue;
      if (auto info = nvml.device(g.index)) mode = info->compute_mode;
    }
    const auto refusal = mode ? mps::compute_mode_refusal(*mode, uuid) : std::nullopt;
    if (!refusal) {
      out.push_back(uuid);
      continue;
    }
    log::error("%s; then restart the device plugin. The GPU stays unhealthy until then",
               refusal->c_str());
    state.set_mps_health(uuid, false, *refusal);
  }
  return out;
}

// The CDI spec's GPUs: each one's device node from NVML (read before the
// health thread owns it). MIG devices are refused: their spec entries would
// need the MIG capability nodes this build does not describe.
Result<std::vector<cdi::SpecGpu>> cdi_gpus(nvml::Library& nvml, const std::vector<Gpu>& gpus) {
  std::vector<cdi::SpecGpu> out;
  for (const Gpu& g : gpus) {
    if (g.uuid.rfind("MIG-", 0) == 0 || g.dynamic_mig) {
      return Error{"CDI: " + g.uuid +
                   (g.dynamic_mig ? " is in dynamic MIG mode" : " is a MIG device") +
                   ", which this build's CDI spec does not describe; use "
                   "--device-list-strategy=envvar on nodes with MIG"};
    }
    auto info = nvml.device(g.index);
    if (!info || !info->minor) {
      return Error{"CDI: NVML does not say GPU " + std::to_string(g.index) + "'s minor number " +
                   "(/dev/nvidia<minor>)" + (info ? "" : ": " + info.error().message)};
    }
    out.push_back({g.uuid, *info->minor});
  }
  return out;
}

bool write_cdi_spec(const cdi::Options& c, const std::vector<cdi::SpecGpu>& gpus) {
  auto path = cdi::refresh_spec(c, gpus);
  if (!path) {
    log::error("%s", path.error().message.c_str());
    return false;
  }
  log::info("CDI spec for %zu GPUs written to %s (kind %s)", gpus.size(), path->c_str(),
            cdi::kind().c_str());
  return true;
}

// Allocate's plans with the CDI device list strategies applied. A failure
// here cannot happen for a GPU the spec was written for (the same name rules).
Result<std::vector<ContainerPlan>> with_device_list(Result<std::vector<ContainerPlan>> plans,
                                                    const cdi::Options& c) {
  if (!plans || !c.strategy.cdi()) return plans;
  for (ContainerPlan& p : *plans) {
    if (auto r = cdi::apply_device_list(p, c.strategy, c.annotation_prefix); !r) return r.error();
  }
  return plans;
}

// Whether a `mig` GPU's MIG devices are dynamic MIG's, made before this
// start (a restart while pods run on them), or the operator's: the GPUs the
// node's registration last listed with MIG profiles are dynamic MIG's, and so
// are MIG devices that trusted pods' hami.io/vgpu-mig-allocations all name.
// Read from the API once, when the first such GPU is met.
class MigOwnership {
 public:
  MigOwnership(k8s::Client& client, const DaemonOptions& o) : client_(client), o_(o) {}

  Result<bool> ours(const Gpu& g, const std::vector<nvml::MigDevice>& layout) {
    if (!loaded_) {
      if (auto r = load(); !r) return r.error();
      loaded_ = true;
    }
    if (registered_.count(g.uuid) != 0) {
      log::info(
          "GPU %d (%s): its %zu MIG device(s) are dynamic MIG's: the node's registration "
          "lists it with MIG profiles",
          g.index, g.uuid.c_str(), layout.size());
      return true;
    }
    for (const nvml::MigDevice& d : layout) {
      if (named_.count({g.uuid, d.gpu_instance_id}) == 0) {
        log::info(
            "GPU %d (%s): MIG device %s (GPU instance %u) is no pod's dynamic MIG "
            "device: the GPU is served as the operator partitioned it (static MIG)",
            g.index, g.uuid.c_str(), d.uuid.c_str(), d.gpu_instance_id);
        return false;
      }
    }
    log::info("GPU %d (%s): its %zu MIG device(s) are pods' dynamic MIG devices", g.index,
              g.uuid.c_str(), layout.size());
    return true;
  }

 private:
  Result<void> load() {
    auto node = client_.get(k8s::node_path(o_.node_name));
    if (!node && !node.error().not_found())
      return Error{"cannot read node " + o_.node_name + ": " + node.error().message};
    if (node) {
      const auto md = node->value("metadata", nlohmann::json::object());
      const auto an = md.value("annotations", nlohmann::json::object());
      if (auto reg = protocol::decode_node_devices(an.value(protocol::kNodeRegister, "[]"))) {
        for (const protocol::NodeDevice& d : *reg)
          if (!d.mig_profiles.empty()) registered_.insert(d.id);
      }
    }
    k8s::ListOptions lo;
    lo.field_selector = "spec.nodeName=" + o_.node_name;
    auto pods = client_.list(k8s::pod_path(""), lo);
    if (!pods)
      return Error{"cannot list the pods on " + o_.node_name + ": " + pods.error().message};
    for (const protocol::MigAllocation& a : mig_allocations_of(pods->items, o_.decisions, false))
      named_.emplace(a.gpu_uuid, *a.gpu_instance_id);
    return {};
  }

  k8s::Client& client_;
  const DaemonOptions& o_;
  bool loaded_ = false;
  std::set<std::string> registered_;
  std::set<std::pair<std::string, unsigned>> named_;
};

// What cleanup removed and could not, said; true when it ran.
bool clean_mig(DynamicMigService& mig, const k8s::Reflector& pods,
               const protocol::DecisionTrust& trust) {
  auto r = mig.cleanup(mig_allocations_of(pods.items(), trust, /*live_only=*/true));
  if (!r) {
    log::debug("MIG cleanup skipped: %s; trying again next round", r.error().message.c_str());
    return false;
  }
  for (const RemovedInstance& gi : r->removed) {
    log::info(
        "MIG cleanup: removed GPU instance %u of %s: no running pod's "
        "hami.io/vgpu-mig-allocations names it",
        gi.gpu_instance_id, gi.gpu_uuid.c_str());
  }
  for (const Error& e : r->errors)
    log::warn("MIG cleanup: %s; trying again next round", e.message.c_str());
  return true;
}

// Serves, registers and re-registers until a terminating signal.
class Supervisor {
 public:
  Supervisor(const DaemonOptions& o, PluginServer& server, int signal_fd,
             std::function<void()> on_reload)
      : o_(o), server_(server), signal_fd_(signal_fd), on_reload_(std::move(on_reload)) {
    socket_name_ = o.socket_name;
    socket_path_ = join(o.device_plugin_dir, socket_name_);
    kubelet_socket_ =
        o.kubelet_socket.empty() ? join(o.device_plugin_dir, "kubelet.sock") : o.kubelet_socket;
  }

  int run() {
    const std::string plugin_dir = std::filesystem::path(socket_path_).parent_path().string();
    const std::string kubelet_dir = std::filesystem::path(kubelet_socket_).parent_path().string();
    for (const std::string& dir : {plugin_dir, kubelet_dir}) {
      if (!watchers_.empty() && dir == plugin_dir) continue;
      auto w = DirWatcher::open(dir);
      if (!w) {
        log::error("%s (does kubelet's device-plugins directory exist? see --device-plugin-path)",
                   w.error().message.c_str());
        return 1;
      }
      watchers_.push_back(std::move(*w));
    }
    const std::string kubelet_name = std::filesystem::path(kubelet_socket_).filename().string();
    while (true) {
      step();
      std::vector<pollfd> fds{{signal_fd_, POLLIN, 0}};
      for (auto& w : watchers_)
        fds.push_back({w.fd(), POLLIN, 0});
      int timeout = -1;
      if (need_start_ || need_register_) {
        const auto left = std::chrono::duration_cast<milliseconds>(next_try_ - Clock::now());
        timeout = static_cast<int>(std::max<int64_t>(0, left.count()));
      }
      if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) {
        log::error("poll: %s", std::strerror(errno));
        return 1;
      }
      if (fds[0].revents & POLLIN) {
        signalfd_siginfo si{};
        if (::read(signal_fd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
          if (si.ssi_signo == SIGHUP) {
            log::info("SIGHUP: serving and registering again");
            if (on_reload_) on_reload_();
            need_start_ = need_register_ = true;
            retry_now();
          } else {
            log::info("signal %u: shutting down", si.ssi_signo);
            return 0;
          }
        }
      }
      for (auto& w : watchers_) {
        for (const DirEvent& e : w.read()) {
          if (e.name.empty()) {
            log::error(
                "the device-plugins directory was removed or moved; exiting so that "
                "the next start watches the new one");
            return 1;
          }
          if (e.name == kubelet_name && e.created) {
            log::info("%s was created: kubelet (re)started; registering again",
                      kubelet_socket_.c_str());
            need_register_ = true;
            if (!exists(socket_path_)) need_start_ = true;
            retry_now();
          } else if (e.name == socket_name_ && !e.created && !exists(socket_path_)) {
            log::info("%s was removed (kubelet restarting?); serving on a new socket",
                      socket_path_.c_str());
            need_start_ = need_register_ = true;
            retry_now();
          }
        }
      }
    }
  }

 private:
  void retry_now() {
    next_try_ = Clock::now();
    backoff_ = milliseconds(250);
  }

  void fail_later() {
    next_try_ = Clock::now() + backoff_;
    backoff_ = std::min(backoff_ * 2, milliseconds(30000));
  }

  void step() {
    if (Clock::now() < next_try_) return;
    if (need_start_) {
      if (auto r = server_.start(socket_path_); !r) {
        log::error("%s; trying again in %lld ms", r.error().message.c_str(),
                   static_cast<long long>(backoff_.count()));
        fail_later();
        return;
      }
      need_start_ = false;
      need_register_ = true;
    }
    if (need_register_) {
      auto r = register_with_kubelet(kubelet_socket_, socket_name_, o_.config.resource_count_name,
                                     o_.config.enable_get_preferred_allocation, milliseconds(5000));
      if (!r) {
        log::warn("%s; trying again in %lld ms (and as soon as kubelet's socket appears)",
                  r.error().message.c_str(), static_cast<long long>(backoff_.count()));
        fail_later();
        return;
      }
      log::info("registered with kubelet at %s: resource %s, endpoint %s", kubelet_socket_.c_str(),
                o_.config.resource_count_name.c_str(), socket_name_.c_str());
      need_register_ = false;
      backoff_ = milliseconds(250);
    }
  }

  const DaemonOptions& o_;
  PluginServer& server_;
  int signal_fd_;
  std::function<void()> on_reload_;
  std::string socket_name_;
  std::string socket_path_;
  std::string kubelet_socket_;
  std::vector<DirWatcher> watchers_;
  bool need_start_ = true;
  bool need_register_ = true;
  Clock::time_point next_try_ = Clock::now();
  milliseconds backoff_{250};
};

}  // namespace

int run_daemon(const DaemonOptions& o) {
  // Before any thread exists, so every thread inherits the mask and the
  // signals reach only the signalfd.
  const daemon::StopSignals signals(/*reload=*/true);
  auto signal_fd = signals.signal_fd();
  if (!signal_fd) {
    log::error("%s", signal_fd.error().message.c_str());
    return 1;
  }
  UniqueFd sfd = std::move(*signal_fd);

  const PluginConfig& cfg = o.config;
  log::info("node %s; config: %s", o.node_name.c_str(), cfg.describe().c_str());
  for (const auto& s : cfg.sources)
    log::info("config applied from %s", s.c_str());
  for (const auto& w : cfg.warnings)
    log::warn("config: %s", w.c_str());

  auto nvml = nvml::Library::open(o.nvml_library);
  if (!nvml) {
    log::error("cannot use NVML: %s", nvml.error().message.c_str());
    return 1;
  }
  auto kcfg = k8s::Config::auto_detect(o.kubeconfig);
  if (!kcfg) {
    log::error("Kubernetes API: %s", kcfg.error().message.c_str());
    return 1;
  }
  auto client = k8s::Client::from_config(*kcfg);
  if (!client) {
    log::error("Kubernetes API (%s): %s", kcfg->source.c_str(), client.error().message.c_str());
    return 1;
  }
  log::info("Kubernetes API at %s (%s)", kcfg->server.c_str(), kcfg->source.c_str());

  // Dynamic MIG (docs/mig-dynamic.md) needs NVML's hands to make instances;
  // opened only where some GPU's operatingmode is mig.
  std::unique_ptr<nvml::MigControl> mig_control;
  const bool any_mig = cfg.mig_mode || std::any_of(cfg.gpu_modes.begin(), cfg.gpu_modes.end(),
                                                   [](const GpuModeOverride& m) { return m.mig; });
  if (any_mig) {
    auto c = nvml::MigControl::open(o.nvml_library);
    if (c) {
      mig_control = std::move(*c);
    } else {
      log::error("dynamic MIG is off: %s; only GPUs already partitioned are served",
                 c.error().message.c_str());
    }
  }
  MigOwnership ownership(*client, o);
  DynamicMigSource dynamic_source{
      [&](const Gpu& g, const std::vector<nvml::MigDevice>& layout) {
        return ownership.ours(g, layout);
      },
      [&](const Gpu& g) -> Result<DynamicMig> {
        auto profiles = mig_control->profiles(g.index);
        if (!profiles) return Error{"its MIG profiles cannot be read: " + profiles.error().message};
        MigRegistration reg = mig_registration(g.name, *profiles, cfg.mig_profile_allowlist);
        return DynamicMig{std::move(reg.profiles), reg.count};
      }};
  auto gpus = discover_gpus(**nvml, cfg, mig_control ? &dynamic_source : nullptr);
  if (!gpus) {
    log::error("%s", gpus.error().message.c_str());
    return 1;
  }
  if (gpus->empty()) log::warn("no GPUs found: advertising none");
  for (const Gpu& g : *gpus) {
    log::info("GPU %d: %s %s, %llu MiB, NUMA node %s, advertised as %d devices, sharing: %s",
              g.index, g.uuid.c_str(), g.name.c_str(),
              static_cast<unsigned long long>(g.memory_total >> 20),
              g.numa ? std::to_string(*g.numa).c_str() : "unknown",
              g.dynamic_mig ? g.dynamic_mig->count : cfg.device_split_count,
              g.mig           ? "mig"
              : g.dynamic_mig ? "dynamic mig"
                              : sharing_mode_name(g.mode));
  }
  MigGpus mig_gpus;
  for (const Gpu& g : *gpus)
    if (g.dynamic_mig) mig_gpus.emplace(g.uuid, g.index);
  std::unique_ptr<DynamicMigService> mig;
  if (!mig_gpus.empty()) {
    mig = std::make_unique<DynamicMigService>(std::move(mig_control), o.mig_apply_lock,
                                              std::move(mig_gpus));
  }
  DeviceState state(std::move(*gpus));
  std::vector<cdi::SpecGpu> spec_gpus;
  if (o.cdi.strategy.cdi()) {
    auto sg = cdi_gpus(**nvml, state.gpus());
    if (!sg) {
      log::error("%s", sg.error().message.c_str());
      return 1;
    }
    spec_gpus = std::move(*sg);
    if (!write_cdi_spec(o.cdi, spec_gpus)) return 1;
  }

  if (!o.decisions.keys) {
    log::warn(
        "no --decision-key-file: Allocate serves the pod the node lock names when its "
        "schedulerName is trusted, without checking that its hami.io annotations are the "
        "scheduler's; the chart sets a key");
  }
  Allocator allocator(
      *client, cfg,
      {o.node_name, o.hook_path, o.lock_dir, {o.decisions, cfg.resource_count_name}, mig.get()},
      [&state] { return state.gpus(); });
  // While dynamic MIG changes instances, NVML answers oddly: registration
  // and health checks wait for the apply lock.
  const std::string apply_lock = mig ? o.mig_apply_lock : std::string();
  NodeRegistrar registrar(*client, cfg, state, o.node_name, o.match_pods, apply_lock);
  PluginServer server(
      state, cfg,
      {[&](const auto& r) { return with_device_list(allocator.allocate(r), o.cdi); },
       [&allocator](const auto& r) { return allocator.preferred(r); }});

  // One MPS control daemon per GPU in MPS mode, in <hook-path>/vgpu/mps/<uuid>
  // (Allocate mounts the pipe directory from there); the GPU is Unhealthy
  // while its daemon is down. The compute modes are read here, before the
  // health thread owns NVML.
  MpsSupervisorOptions mps_options;
  mps_options.root = join(o.hook_path, "vgpu");
  std::vector<std::string> mps_gpus;
  for (const Gpu& g : state.gpus())
    if (g.mode == SharingMode::kMps && !g.mig) mps_gpus.push_back(g.uuid);
  mps_options.gpu_uuids = mps_capable(**nvml, state, mps_gpus);
  MpsSupervisor mps(std::move(mps_options),
                    [&state](const std::string& uuid, bool up, const std::string& reason) {
                      state.set_mps_health(uuid, up, reason);
                    });
  mps.start();

  // NVML belongs to this thread alone from here on (the library is not thread-safe).
  std::jthread health([&](std::stop_token st) {
    HealthChecker checker(**nvml, state, o.xids);
    checker.watch_xids();
    bool told = false;  // the first pause at info, the rest at debug: one per Allocate
    while (!st.stop_requested()) {
      if (!apply_lock.empty() && MigApplyLock::held(apply_lock)) {
        log::write(told ? log::Level::kDebug : log::Level::kInfo,
                   "health check skipped: %s is held (MIG instances are being changed)",
                   apply_lock.c_str());
        told = true;
      } else {
        checker.check();
      }
      // Until the next check: Xid events as they come, in slices short
      // enough to notice the stop.
      const auto next = Clock::now() + o.health_interval;
      while (!st.stop_requested() && Clock::now() < next)
        checker.wait_xids(std::min(next, Clock::now() + milliseconds(200)));
    }
  });
  std::jthread reg([&](std::stop_token st) { registrar.run(st, o.register_interval); });
  // Live resizes: a running pod's new allocation (the scheduler's, signed)
  // replaces its containers' limits files.
  LimitsFollower follower(o.node_name, o.hook_path, o.decisions);
  k8s::Reflector pods(*client, k8s::core_path("pods"),
                      {.field_selector = "spec.nodeName=" + o.node_name},
                      {.on_add = [&](const nlohmann::json& p) { follower.pod_changed(p); },
                       .on_update = [&](const nlohmann::json&,
                                        const nlohmann::json& p) { follower.pod_changed(p); }});
  pods.start();
  // Instances no running pod names go: at start once the pods are listed,
  // then every --mig-cleanup-interval.
  std::jthread cleanup([&](std::stop_token st) {
    if (!mig) return;
    auto sleep = [&](milliseconds d) {
      const auto until = Clock::now() + d;
      while (!st.stop_requested() && Clock::now() < until)
        std::this_thread::sleep_for(
            std::min<Clock::duration>(until - Clock::now(), milliseconds(100)));
    };
    while (!st.stop_requested() && !pods.has_synced())
      sleep(milliseconds(100));
    while (!st.stop_requested()) {
      clean_mig(*mig, pods, o.decisions);
      sleep(o.mig_cleanup_interval);
    }
  });

  // SIGHUP writes the spec again: one removed or edited by hand comes back.
  auto rewrite_spec = [&] {
    if (o.cdi.strategy.cdi()) write_cdi_spec(o.cdi, spec_gpus);
  };
  const int rc = Supervisor(o, server, sfd.get(), rewrite_spec).run();
  pods.stop();
  mps.stop();
  server.stop();
  health.request_stop();
  reg.request_stop();
  cleanup.request_stop();
  return rc;
}

}  // namespace hami::deviceplugin
