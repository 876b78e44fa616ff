#pragma once
// Dynamic MIG's hands on the driver: the GPU-instance profiles a GPU offers
// with their placements, the GPU and compute instances it holds, and making
// or removing one MIG device (a GPU instance at a given placement holding one
// compute instance of all its slices, as `nvidia-smi mig -cgi <p> -C` makes).
// libnvidia-ml.so.1 is dlopen'ed on its own, beside nvml::Library (which only
// reads), so the device plugin's MIG manager owns this handle and its thread.
//
// create() never leaves half an instance behind: when a step after the GPU
// instance fails it destroys what it made, and says so; if even that fails
// the Error names the GPU instance left, for the caller's cleanup to retry.
//
//   auto mig = hami::nvml::MigControl::open();
//   auto profiles = (*mig)->profiles(0);   // 1g.10gb … 7g.80gb with placements
//   auto made = (*mig)->create(0, (*profiles)[2].id, {4, 4});  // a 3g at slice 4
//   if (made) use(made->mig_uuid, made->gpu_instance_id, made->compute_instance_id);
//   (*mig)->destroy(0, made->gpu_instance_id);  // its compute instances, then it
//
// Not thread-safe: one thread owns a MigControl.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace hami::nvml {

// Memory slices a GPU instance covers (nvmlGpuInstancePlacement_t).
struct GiPlacement {
  unsigned start = 0;
  unsigned size = 0;
  bool operator==(const GiPlacement&) const = default;
};

// One GPU-instance profile of a GPU (nvmlDeviceGetGpuInstanceProfileInfoV).
struct GiProfile {
  unsigned profile = 0;    // NVML_GPU_INSTANCE_PROFILE_* index
  unsigned id = 0;         // the profile ID create() and the instance lists take
  std::string name;        // "3g.40gb" (NVML's "MIG 3g.40gb" without "MIG ")
  unsigned slices = 0;     // compute slices
  unsigned instances = 0;  // how many fit an empty GPU
  unsigned sms = 0;
  uint64_t memory_mib = 0;
  std::vector<GiPlacement> placements;  // every placement NVML allows, by start
};

// A GPU instance the GPU holds now, with its compute instances' IDs.
struct GpuInstance {
  unsigned id = 0;
  unsigned profile_id = 0;
  GiPlacement placement;
  std::vector<unsigned> compute_instances;
};

// What create() made.
struct MadeInstance {
  unsigned gpu_instance_id = 0;
  unsigned compute_instance_id = 0;
  std::string mig_uuid;  // "MIG-…"
};

class MigControl {
 public:
  static Result<std::unique_ptr<MigControl>> open(const std::string& path = "libnvidia-ml.so.1");
  ~MigControl();
  MigControl(const MigControl&) = delete;
  MigControl& operator=(const MigControl&) = delete;

  // The GPU's GPU-instance profiles, by profile index; empty for a GPU
  // without MIG. NVML describes them with MIG off too.
  Result<std::vector<GiProfile>> profiles(int gpu);
  // The GPU instances the GPU holds, by ID; empty with MIG off.
  Result<std::vector<GpuInstance>> instances(int gpu);
  // A GPU instance of profile `profile_id` at `placement` and one compute
  // instance of all its slices; its MIG device's UUID.
  Result<MadeInstance> create(int gpu, unsigned profile_id, GiPlacement placement);
  // The GPU instance's compute instances, then the instance. One already gone
  // is not an error, so a cleanup may run twice.
  Result<void> destroy(int gpu, unsigned gpu_instance_id);

  // The raw nvmlReturn_t behind the last Error (0 if none yet).
  int last_error() const { return last_error_; }

 private:
  struct Api;
  MigControl(void* dl, std::unique_ptr<Api> api);
  Result<void*> device(int gpu);
  Result<void*> gi_by_id(void* dev, int gpu, unsigned id);
  Result<std::vector<void*>> compute_instances_of(void* gi, int gpu);
  Result<std::string> mig_uuid_of(void* dev, int gpu, unsigned gi_id, unsigned ci_id);
  Error fail(const char* call, int gpu, int rc);

  void* dl_ = nullptr;
  std::unique_ptr<Api> api_;
  int last_error_ = 0;
};

}  // namespace hami::nvml
