#include "deviceplugin/device_state.hpp"

namespace hami::deviceplugin {

std::vector<Gpu> DeviceState::gpus() const {
  std::lock_guard lk(mu_);
  std::vector<Gpu> out = gpus_;
  for (Gpu& g : out) {
    const auto down = mps_down_.find(g.uuid);
    if (down == mps_down_.end()) continue;
    g.unhealthy_reason = g.healthy ? down->second : g.unhealthy_reason + "; " + down->second;
    g.healthy = false;
  }
  return out;
}

bool DeviceState::set_mps_health(const std::string& uuid, bool up, const std::string& reason) {
  {
    std::lock_guard lk(mu_);
    const auto it = mps_down_.find(uuid);
    if (up) {
      if (it == mps_down_.end()) return false;
      mps_down_.erase(it);
    } else if (it == mps_down_.end()) {
      mps_down_.emplace(uuid, reason);
    } else {
      // A new reason alone changes nothing kubelet sees.
      it->second = reason;
      return false;
    }
    ++version_;
  }
  cv_.notify_all();
  return true;
}

uint64_t DeviceState::version() const {
  std::lock_guard lk(mu_);
  return version_;
}

bool DeviceState::set_health(int index, bool healthy, const std::string& reason) {
  return set_health_where([&](const Gpu& g) { return g.index == index; }, healthy, reason);
}

bool DeviceState::set_health(const std::string& uuid, bool healthy, const std::string& reason) {
  return set_health_where([&](const Gpu& g) { return g.uuid == uuid; }, healthy, reason);
}

bool DeviceState::set_health_where(const std::function<bool(const Gpu&)>& which, bool healthy,
                                   const std::string& reason) {
  {
    std::lock_guard lk(mu_);
    bool changed = false;
    for (Gpu& g : gpus_) {
      if (!which(g)) continue;
      if (g.healthy != healthy) changed = true;
      g.healthy = healthy;
      g.unhealthy_reason = healthy ? std::string() : reason;
    }
    if (!changed) return false;
    ++version_;
  }
  cv_.notify_all();
  return true;
}

uint64_t DeviceState::wait_change(uint64_t seen, std::chrono::milliseconds timeout) const {
  std::unique_lock lk(mu_);
  const uint64_t wakes = wakes_;
  cv_.wait_for(lk, timeout, [&] { return version_ != seen || wakes_ != wakes; });
  return version_;
}

void DeviceState::wake_all() {
  {
    std::lock_guard lk(mu_);
    ++wakes_;
  }
  cv_.notify_all();
}

}  // namespace hami::deviceplugin
