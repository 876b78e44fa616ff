#pragma once
// The GpuSampler of a real node: NVML (loaded with dlopen by src/nvml), asked
// once per period for every GPU's memory and utilisation, its processes'
// memory, and their SM utilisation samples since the previous period. A GPU
// that fails to answer is reported with its error and the others still are.
// A MIG-enabled GPU is followed by a sample per MIG device (docs/mig.md).
//
//   auto s = hami::monitor::NvmlSampler::open("libnvidia-ml.so.1");
//   if (!s) die(s.error().message);
//   std::vector<GpuSample> now = (*s)->sample();

#include <memory>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "monitor/gpu_sampler.hpp"

namespace hami::nvml {
class Library;
}

namespace hami::monitor {

class NvmlSampler final : public GpuSampler {
 public:
  static Result<std::unique_ptr<NvmlSampler>> open(const std::string& library_path);
  ~NvmlSampler() override;
  std::vector<GpuSample> sample() override;

 private:
  explicit NvmlSampler(std::unique_ptr<nvml::Library> lib);
  // The MIG devices of MIG-enabled GPU `index`, each a sample of its own.
  void add_mig_devices(int index, const std::string& parent, std::vector<GpuSample>& out);
  std::unique_ptr<nvml::Library> lib_;
  std::vector<uint64_t> last_seen_us_;      // per GPU: newest process sample taken
  std::vector<std::string> logged_errors_;  // per GPU: last error logged
};

}  // namespace hami::monitor
