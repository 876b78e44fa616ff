#pragma once
// What the node agent learns from the GPUs each period, and the interface of
// whoever asks them: NVML in production (nvml_sampler.hpp), a synthetic node in
// benchmarks. One sampler per node, so NVML is asked once per period however
// many containers there are (upstream asked from every process).
//
//   std::unique_ptr<GpuSampler> s = ...;
//   for (const GpuSample& g : s->sample())
//     for (const GpuProcess& p : g.processes) use(g.uuid, p.pid, p.used_bytes, p.sm);

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hami::monitor {

struct GpuProcess {
  uint32_t pid = 0;  // host PID, as NVML reports it
  uint64_t used_bytes = 0;
  unsigned sm = 0;  // SM utilisation over the last period, percent
};

// What makes a sample a MIG device's (docs/mig.md): the GPU it is on and
// which instance it is.
struct MigOf {
  std::string parent_uuid;
  std::string profile;  // "3g.40gb"
  unsigned gpu_instance_id = 0;
  unsigned compute_instance_id = 0;
};

// A GPU, or a MIG device of a MIG-enabled GPU (mig set: listed after its
// GPU, with the GPU's index, its own UUID, memory and processes; NVML gives
// no utilisation for it).
struct GpuSample {
  int index = 0;
  std::string uuid;
  std::string name;  // e.g. "NVIDIA H200"
  uint64_t memory_total = 0;
  uint64_t memory_used = 0;
  unsigned utilization = 0;         // percent
  unsigned memory_utilization = 0;  // memory controller, percent
  std::vector<GpuProcess> processes;
  std::string error;  // non-empty: this GPU could not be sampled this period
  std::optional<MigOf> mig;
};

class GpuSampler {
 public:
  virtual ~GpuSampler() = default;
  virtual std::vector<GpuSample> sample() = 0;
};

}  // namespace hami::monitor
