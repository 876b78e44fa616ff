#pragma once
// Simulated MIG (part of libsimgpu_core.so): the GPU-instance geometry of an
// H100 80GB and an H200, and the GPU and compute instances of every GPU in
// the shared state (sim_core.hpp's Mig), changed under MigLock so every
// process sees one partitioning. sim_nvml.cpp's MIG calls and sim_cuda.cpp's
// MIG devices are built on these; the rules they follow are the real
// driver's where it is documented (nvml.h) and stated here where it is not.
//
//   const simgpu::mig::GiProfile* p = simgpu::mig::gi_profile(gpu,
//   NVML_GPU_INSTANCE_PROFILE_1_SLICE); int slot = -1; if (p && simgpu::mig::create_gi(gpu, p->id,
//   nullptr, &slot) == NVML_SUCCESS) ...
//
// Functions that return int return an NVML code.

#include <cstdint>
#include <string>
#include <vector>

#include "sim_core.hpp"

namespace simgpu::mig {

// One GPU-instance profile, as nvmlDeviceGetGpuInstanceProfileInfo and
// nvidia-smi mig -lgip give it.
struct GiProfile {
  unsigned profile;  // NVML_GPU_INSTANCE_PROFILE_* (what the info calls take)
  unsigned id;       // profile ID (what create, list and placements take)
  const char* name;  // "1g.10gb"
  unsigned slices;   // compute slices
  unsigned instances;
  unsigned sms;
  unsigned copy_engines, decoders, encoders, jpegs, ofas;
  unsigned long long memory_mib;
  unsigned placement_size;  // memory slices
  std::vector<unsigned> starts;
};

// One compute-instance profile within a GPU instance of a given profile.
struct CiProfile {
  unsigned profile;  // NVML_COMPUTE_INSTANCE_PROFILE_*; also its ID
  unsigned slices;
  unsigned instances;
  unsigned sms;
  std::string name;  // "1c.3g.40gb", or "3g.40gb" for the whole GI
};

// Geometry by model name: "H200" in it picks the H200's, "H100" with "80GB"
// the H100 80GB's; anything else has no MIG (0).
uint32_t geometry_for(const char* model_name);
// The GPU's profiles (empty: no MIG), and one by NVML_GPU_INSTANCE_PROFILE_*
// index or by profile ID (nullptr: not on this GPU).
const std::vector<GiProfile>& gi_profiles(int gpu);
const GiProfile* gi_profile(int gpu, unsigned profile);
const GiProfile* gi_profile_by_id(int gpu, unsigned id);
// NVML_COMPUTE_INSTANCE_PROFILE_* `profile` within a GI of profile `gi`;
// false when that GI has no such CI profile.
bool ci_profile(const GiProfile& gi, unsigned profile, CiProfile* out);

bool capable(int gpu);
bool enabled(int gpu);
// nvmlDeviceSetMigMode: applied at once when the GPU is idle (no GPU
// instance, no memory in use); otherwise left pending, *activation IN_USE.
int set_mode(int gpu, unsigned mode, int* activation);

// How many more GIs of profile `id` fit now.
unsigned gi_remaining(int gpu, const GiProfile& p);
// Creates a GI of profile ID `id` at `start` (any free placement when
// nullptr). NOT_SUPPORTED with MIG off; INSUFFICIENT_RESOURCES when it does
// not fit; INVALID_ARGUMENT for a start the profile has no placement at.
int create_gi(int gpu, unsigned id, const unsigned* start, int* slot);
// IN_USE while it has compute instances.
int destroy_gi(int gpu, int slot);

unsigned ci_remaining(int gpu, int gi_slot, const CiProfile& p);
int create_ci(int gpu, int gi_slot, unsigned profile, const unsigned* start, int* slot);
// IN_USE while a process has memory on it.
int destroy_ci(int gpu, int slot);

// Compute instance slots of the GPU's MIG devices, by GI ID then CI ID (the
// order nvmlDeviceGetMigDeviceHandleByIndex enumerates them in).
std::vector<int> mig_devices(int gpu);
// The device id (sim_core.hpp) of MIG-<uuid>, or -1.
int find_mig_device(const char* uuid);
// "<GPU name> MIG 1g.10gb"
std::string device_name(int dev);
// Multiprocessors of a device id: 132 for a GPU (an H100/H200), its CI's otherwise.
unsigned sm_count(int dev);
// The GI profile of a MIG device id's GPU instance.
const GiProfile* gi_profile_of(int dev);

// Partitions the GPUs as SIMGPU_MIG says (sim_core.hpp); called when the
// state is configured, with nobody else attached yet.
void configure(State& st);

}  // namespace simgpu::mig
