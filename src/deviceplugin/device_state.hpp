#pragma once
// The GPUs the plugin advertises and their health, shared by the health
// checker (writer), the ListAndWatch streams, the node registrar and Allocate
// (readers). Every change bumps a version that waiters block on, so a stream
// resends the list as soon as health changes, without polling.
//
//   DeviceState state(discovered);
//   if (state.set_health(1, false, "NVML_ERROR_GPU_IS_LOST")) log(...);
//   uint64_t seen = state.version();
//   seen = state.wait_change(seen, 1s);        // returns early on a change or wake_all()
//   for (const Gpu& g : state.gpus()) ...

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "deviceplugin/gpu.hpp"

namespace hami::deviceplugin {

class DeviceState {
 public:
  explicit DeviceState(std::vector<Gpu> gpus) : gpus_(std::move(gpus)) {}

  std::vector<Gpu> gpus() const;
  uint64_t version() const;
  // True when the GPU's health changed (and the version moved). By NVML
  // index: the GPU, or every MIG device of it; by UUID: that device alone.
  bool set_health(int index, bool healthy, const std::string& reason);
  bool set_health(const std::string& uuid, bool healthy, const std::string& reason);
  // The second source of health, for a GPU shared through MPS: its control
  // daemon (MpsSupervisor). gpus() reports a GPU healthy only when NVML and
  // its daemon both say so. True when that changed what gpus() reports.
  bool set_mps_health(const std::string& uuid, bool up, const std::string& reason);
  // Waits until the version differs from `seen`, wake_all() is called or
  // `timeout` passes; returns the version then.
  uint64_t wait_change(uint64_t seen, std::chrono::milliseconds timeout) const;
  // Wakes every waiter, e.g. so streams notice a server shutting down.
  void wake_all();

 private:
  bool set_health_where(const std::function<bool(const Gpu&)>& which, bool healthy,
                        const std::string& reason);

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::vector<Gpu> gpus_;                        // health as NVML sees it
  std::map<std::string, std::string> mps_down_;  // uuid -> why its MPS daemon is down
  uint64_t version_ = 1;
  uint64_t wakes_ = 0;
};

}  // namespace hami::deviceplugin
