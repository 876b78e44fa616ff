#pragma once
// GpuTimeRates: a container's SM utilisation from the GPU time its processes
// publish. libvgpu charges every launch of a process with an SM share the GPU
// time its kernels take, and adds it to a counter in the process's state-file
// slot (SlotSnapshot::gpu_time_ns); the growth of a container's counters
// between two passes, over the wall time between them, is the share of the
// GPU its kernels held, exactly what its share limits. NVML's per-process
// samples misattribute time-sliced work and are only the fallback, for
// processes that publish nothing (upstream's library, or no share).
//
//   GpuTimeRates rates;
//   rates.begin_pass(std::chrono::steady_clock::now());
//   if (auto pct = rates.percent(path, snapshot, dev)) show(*pct);
//   rates.end_pass();   // forgets the processes and files not seen
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "region/snapshot.hpp"

namespace hami::monitor {

class GpuTimeRates {
 public:
  void begin_pass(std::chrono::steady_clock::time_point now);
  // Percent of the GPU's time the live processes of the container at `path`
  // held device `dev` since the previous pass (capped at 100); nullopt when
  // none of them publishes GPU time there, or on the first pass.
  std::optional<double> percent(const std::string& path, const region::RegionSnapshot& snap,
                                int dev);
  void end_pass();
  size_t tracked() const { return last_.size(); }

 private:
  struct Seen {
    uint64_t value = 0;
    uint64_t pass = 0;
  };
  std::unordered_map<std::string, Seen> last_;  // key: path, slot, owner, device
  uint64_t pass_ = 0;
  std::optional<std::chrono::steady_clock::time_point> prev_;
  std::chrono::steady_clock::time_point now_{};
};

}  // namespace hami::monitor
