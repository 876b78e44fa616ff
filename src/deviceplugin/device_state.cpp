#include "deviceplugin/device_state.hpp"

namespace hami::deviceplugin {

std::vector<Gpu> DeviceState::gpus() const {
  std::lock_guard lk(mu_);
  return gpus_;
}

uint64_t DeviceState::version() const {
  std::lock_guard lk(mu_);
  return version_;
}

bool DeviceState::set_health(int index, bool healthy, const std::string& reason) {
  {
    std::lock_guard lk(mu_);
    bool changed = false;
    for (Gpu& g : gpus_) {
      if (g.index != index) continue;
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
