#include "deviceplugin/discovery.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <thread>

#include "common/log.hpp"
#include "common/small_file.hpp"
#include "nvml/topology.hpp"
#include "protocol/node_register.hpp"

namespace hami::deviceplugin {
namespace {

// NVML's bus id has an 8-digit domain ("00000000:18:00.0"); sysfs a 4-digit
// one, lower case ("0000:18:00.0").
std::optional<int> sysfs_numa(const std::string& sysfs_pci, std::string bus_id) {
  if (bus_id.empty()) return std::nullopt;
  std::transform(bus_id.begin(), bus_id.end(), bus_id.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (const size_t colon = bus_id.find(':'); colon == 8) bus_id = bus_id.substr(4);
  auto text = read_small_file(sysfs_pci + "/" + bus_id + "/numa_node", 64);
  if (!text) return std::nullopt;
  int v = -1;
  const std::string& t = *text;
  const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || v < 0) return std::nullopt;
  return v;
}

// Fills every GPU's peers from NVML's view of each pair.
void read_peers(nvml::Library& nvml, std::vector<Gpu>& gpus) {
  // MIG devices have no peer-to-peer links of their own: whole GPUs only.
  std::vector<int> indices;
  for (const Gpu& g : gpus)
    if (!g.mig) indices.push_back(g.index);
  if (indices.size() < 2) return;
  const nvml::Topology t = nvml::read_topology(nvml, indices);
  for (const std::string& p : t.problems)
    log::warn("GPU topology: %s; that fact counts as unknown", p.c_str());
  auto by_index = [&](int index) -> Gpu& {
    return *std::find_if(gpus.begin(), gpus.end(),
                         [&](const Gpu& g) { return !g.mig && g.index == index; });
  };
  for (const nvml::PairLink& p : t.pairs) {
    Gpu& a = by_index(p.a);
    Gpu& b = by_index(p.b);
    const int32_t score = protocol::pair_score(p.common_ancestor, p.nvlinks);
    const std::optional<int> read = p.p2p[nvml::kP2pRead];
    const std::string p2p = read ? nvml::p2p_status_name(read) : std::string();
    a.peers.push_back({b.uuid, score, p2p});
    b.peers.push_back({a.uuid, score, p2p});
    log::info("GPUs %d-%d: %s, %d NVLink(s)%s, P2P %s: pair score %d", p.a, p.b,
              nvml::topology_level_name(p.common_ancestor).c_str(), p.nvlinks,
              p.via_nvswitch ? " through NVSwitch" : "", nvml::p2p_status_name(read).c_str(),
              static_cast<int>(score));
  }
}

}  // namespace

Result<std::vector<Gpu>> discover_gpus(nvml::Library& nvml, const PluginConfig& cfg,
                                       const DynamicMigSource* dynamic,
                                       const std::string& sysfs_pci) {
  auto count = nvml.device_count();
  if (!count) return Error{"cannot count the GPUs: " + count.error().message};
  std::vector<Gpu> gpus;
  for (int i = 0; i < *count; ++i) {
    auto info = nvml.device(i);
    if (!info) {
      log::error("GPU %d left out: %s", i, info.error().message.c_str());
      continue;
    }
    if (cfg.filtered(info->uuid, i)) {
      log::info("GPU %d (%s) left out: filterdevices in the config", i, info->uuid.c_str());
      continue;
    }
    Gpu g;
    g.index = i;
    g.uuid = info->uuid;
    g.name = info->name;
    g.memory_total = info->memory_total;
    g.numa = info->numa_node ? info->numa_node : sysfs_numa(sysfs_pci, info->pci_bus_id);
    g.mode = cfg.mode_of(g.uuid, i);
    const bool want_mig = cfg.mig_of(g.uuid, i);
    auto mig = nvml.mig_mode(i);
    if (!mig) {
      log::warn("GPU %d (%s): cannot read its MIG mode (%s); taken as MIG off", i, g.uuid.c_str(),
                mig.error().message.c_str());
    } else if (mig->pending != mig->current) {
      log::warn("GPU %d (%s): MIG is %s now and %s after the GPU is reset; served as it is now", i,
                g.uuid.c_str(), mig->current ? "on" : "off", mig->pending ? "on" : "off");
    }
    if (mig && mig->current) {
      auto layout = nvml.mig_devices(i);
      if (!layout) {
        log::error("GPU %d (%s) left out: MIG is on and its MIG devices cannot be read: %s", i,
                   g.uuid.c_str(), layout.error().message.c_str());
        continue;
      }
      bool is_dynamic = want_mig && dynamic != nullptr && layout->empty();
      if (want_mig && dynamic != nullptr && !layout->empty()) {
        auto ours = dynamic->ours(g, *layout);
        if (!ours) {
          return Error{"GPU " + std::to_string(i) + " (" + g.uuid +
                       "): cannot tell whether its MIG devices are dynamic MIG's or the "
                       "operator's: " +
                       ours.error().message};
        }
        is_dynamic = *ours;
      }
      if (is_dynamic) {
        auto reg = dynamic->registration(g);
        if (!reg) {
          log::error("GPU %d (%s) left out: dynamic MIG: %s", i, g.uuid.c_str(),
                     reg.error().message.c_str());
          continue;
        }
        if (reg->profiles.empty() || reg->count <= 0) {
          log::error(
              "GPU %d (%s, %s) left out: dynamic MIG, but migProfileAllowlist allows none of its "
              "MIG profiles; list its model's profiles in the device config",
              i, g.uuid.c_str(), g.name.c_str());
          continue;
        }
        std::string names;
        for (const protocol::MigProfileInfo& p : reg->profiles)
          names += (names.empty() ? "" : ",") + p.name;
        log::info(
            "GPU %d (%s): dynamic MIG, %zu MIG device(s) now; registered with profiles %s, at "
            "most %d instances; MIG devices are made at Allocate",
            i, g.uuid.c_str(), layout->size(), names.c_str(), static_cast<int>(reg->count));
        g.dynamic_mig = std::move(*reg);
        gpus.push_back(std::move(g));
        continue;
      }
      if (!want_mig) {
        log::info("GPU %d (%s) has MIG on: served as its MIG devices whatever its operatingmode", i,
                  g.uuid.c_str());
      }
      if (layout->empty()) {
        log::warn(
            "GPU %d (%s) has MIG on but no MIG devices: nothing of it is advertised; create "
            "them (nvidia-smi mig -cgi <profiles> -C) and restart the plugin",
            i, g.uuid.c_str());
      }
      for (Gpu& m : mig_devices_of(g, *layout, cfg))
        gpus.push_back(std::move(m));
      continue;
    }
    if (want_mig) {
      log::error(
          "GPU %d (%s) left out: its operatingmode is mig but MIG is off on it, and this plugin "
          "does not switch MIG on (that resets the GPU): enable it (nvidia-smi -i %d -mig 1) "
          "for dynamic MIG, and create instances too for static MIG, or give it another "
          "operatingmode",
          i, g.uuid.c_str(), i);
      continue;
    }
    gpus.push_back(std::move(g));
  }
  read_peers(nvml, gpus);
  // A devicemodes entry for a GPU that is not here is a typo or a config for
  // other hardware: said, not fatal, as the GPU may come back.
  for (const GpuModeOverride& o : cfg.gpu_modes) {
    const bool found = std::any_of(gpus.begin(), gpus.end(), [&](const Gpu& g) {
      return o.uuid.empty() ? g.index == o.index : g.uuid == o.uuid;
    });
    if (!found) {
      log::warn("config devicemodes names GPU %s, which is not among this node's GPUs; ignored",
                o.uuid.empty() ? std::to_string(o.index).c_str() : o.uuid.c_str());
    }
  }
  return gpus;
}

std::vector<Gpu> mig_devices_of(const Gpu& parent, const std::vector<nvml::MigDevice>& layout,
                                const PluginConfig& cfg) {
  std::vector<Gpu> out;
  for (const nvml::MigDevice& d : layout) {
    if (cfg.filtered(d.uuid, -1)) {
      log::info("MIG device %s of GPU %d left out: filterdevices in the config", d.uuid.c_str(),
                parent.index);
      continue;
    }
    Gpu m;
    m.index = parent.index;
    m.uuid = d.uuid;
    // The driver's name says the profile ("NVIDIA H200 MIG 3g.71gb"); one
    // that does not is given it, so the registered type always does.
    m.name = d.name.empty() || nvml::mig_profile_from_name(d.name).empty()
                 ? parent.name + " MIG " + d.profile
                 : d.name;
    m.memory_total = d.memory_total;
    m.numa = parent.numa;
    m.healthy = parent.healthy;
    m.mig = MigSlice{parent.uuid, d.profile, d.gpu_instance_id, d.compute_instance_id, d.sm_count};
    log::info("GPU %d MIG device %d: %s %s, %llu MiB, GPU instance %u, compute instance %u, %u SMs",
              parent.index, d.mig_index, m.uuid.c_str(), d.profile.c_str(),
              static_cast<unsigned long long>(d.memory_total >> 20), d.gpu_instance_id,
              d.compute_instance_id, d.sm_count);
    out.push_back(std::move(m));
  }
  return out;
}

bool HealthChecker::watch_xids() {
  log::info("%s", policy_.describe().c_str());
  if (!policy_.watch) return false;
  auto n = nvml_.watch_xid_events();
  if (!n) {
    log::warn("Xid events are not watched, only the periodic NVML checks run: %s",
              n.error().message.c_str());
    return false;
  }
  log::info("watching Xid critical-error events on %d of %zu GPUs", *n, state_.gpus().size());
  watching_ = true;
  return true;
}

void HealthChecker::check() {
  const auto now = Clock::now();
  for (const Gpu& g : state_.gpus()) {
    auto mem = nvml_.memory(g.index);
    if (!mem) {
      if (state_.set_health(g.uuid, false, mem.error().message)) {
        log::error("GPU %d (%s) is unhealthy: %s", g.index, g.uuid.c_str(),
                   mem.error().message.c_str());
      }
      continue;
    }
    if (auto it = xid_until_.find(g.uuid); it != xid_until_.end()) {
      if (now < it->second) continue;  // within its Xid window
      xid_until_.erase(it);
      if (state_.set_health(g.uuid, true, {})) {
        log::info("GPU %d (%s) is healthy again: no critical Xid for %lld ms since Xid %llu",
                  g.index, g.uuid.c_str(), static_cast<long long>(policy_.recovery.count()),
                  static_cast<unsigned long long>(last_xid_[g.uuid]));
      }
      continue;
    }
    if (state_.set_health(g.uuid, true, {}))
      log::info("GPU %d (%s) is healthy again", g.index, g.uuid.c_str());
  }
}

void HealthChecker::on_xid(int index, uint64_t xid, std::optional<unsigned> gpu_instance,
                           std::optional<unsigned> compute_instance) {
  const auto x = static_cast<unsigned long long>(xid);
  if (!policy_.critical(xid)) {
    log::info("GPU %d: Xid %llu ignored (an application error, or --ignore-xids)", index, x);
    return;
  }
  const std::string reason = "Xid " + std::to_string(xid);
  const auto until =
      policy_.recovery.count() == 0 ? Clock::time_point::max() : Clock::now() + policy_.recovery;
  bool known = false;
  for (const Gpu& g : state_.gpus()) {
    if (index >= 0 && g.index != index) continue;
    if (g.mig && gpu_instance &&
        (g.mig->gpu_instance_id != *gpu_instance ||
         (compute_instance && g.mig->compute_instance_id != *compute_instance)))
      continue;
    known = true;
    xid_until_[g.uuid] = until;
    last_xid_[g.uuid] = xid;
    state_.set_health(g.uuid, false, reason);
    if (policy_.recovery.count() == 0) {
      log::error(
          "GPU %d (%s) is unhealthy: critical Xid %llu; it stays so until the plugin "
          "restarts (--xid-recovery 0)",
          g.index, g.uuid.c_str(), x);
    } else {
      log::error(
          "GPU %d (%s) is unhealthy: critical Xid %llu; it may be healthy again in "
          "%lld ms (--xid-recovery)",
          g.index, g.uuid.c_str(), x, static_cast<long long>(policy_.recovery.count()));
    }
  }
  if (!known) log::warn("Xid %llu on GPU %d, which this plugin does not advertise", x, index);
}

void HealthChecker::wait_xids(Clock::time_point deadline) {
  while (true) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return;
    if (!watching_) {
      std::this_thread::sleep_for(left);
      return;
    }
    auto ev = nvml_.wait_xid(left);
    if (!ev) {
      if (!wait_failing_) {
        log::warn("waiting for Xid events: %s; the periodic checks go on",
                  ev.error().message.c_str());
      }
      wait_failing_ = true;
      std::this_thread::sleep_for(left);  // no busy loop on a lasting error
      return;
    }
    wait_failing_ = false;
    if (*ev) {
      on_xid((*ev)->index, (*ev)->xid, (*ev)->gpu_instance_id, (*ev)->compute_instance_id);
    }
  }
}

}  // namespace hami::deviceplugin
