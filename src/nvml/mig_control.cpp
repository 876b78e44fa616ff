#include "nvml/mig_control.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <utility>

#include "nvml/nvml.hpp"
#include "nvml/nvml_abi.hpp"

namespace hami::nvml {

using namespace abi;  // NOLINT: the NVML names, as nvml.h spells them

namespace {

template <class F>
F lookup(void* dl, const char* name) {
  return reinterpret_cast<F>(::dlsym(dl, name));
}

// The compute-instance profile that covers a GPU instance of `slices`
// compute slices, the one `nvidia-smi mig -C` makes; COUNT when none.
unsigned full_ci_profile(unsigned slices) {
  switch (slices) {
    case 1:
      return NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE;
    case 2:
      return NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE;
    case 3:
      return NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE;
    case 4:
      return NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE;
    case 6:
      return NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE;
    case 7:
      return NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE;
    case 8:
      return NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE;
    default:
      return NVML_COMPUTE_INSTANCE_PROFILE_COUNT;
  }
}

// Most instances of one profile a GPU can hold (seven 1g on an H100); a
// buffer this large never comes back INSUFFICIENT_SIZE.
constexpr unsigned kMaxInstances = 8;

}  // namespace

struct MigControl::Api {
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*handle_by_index)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*gi_profile_v)(nvmlDevice_t, unsigned, nvmlGpuInstanceProfileInfo_v2_t*) = nullptr;
  nvmlReturn_t (*placements)(nvmlDevice_t, unsigned, nvmlGpuInstancePlacement_t*,
                             unsigned*) = nullptr;
  nvmlReturn_t (*create_gi)(nvmlDevice_t, unsigned, const nvmlGpuInstancePlacement_t*,
                            nvmlGpuInstance_t*) = nullptr;
  nvmlReturn_t (*destroy_gi)(nvmlGpuInstance_t) = nullptr;
  nvmlReturn_t (*gis)(nvmlDevice_t, unsigned, nvmlGpuInstance_t*, unsigned*) = nullptr;
  nvmlReturn_t (*gi_by_id)(nvmlDevice_t, unsigned, nvmlGpuInstance_t*) = nullptr;
  nvmlReturn_t (*gi_info)(nvmlGpuInstance_t, nvmlGpuInstanceInfo_t*) = nullptr;
  nvmlReturn_t (*create_ci)(nvmlGpuInstance_t, unsigned, nvmlComputeInstance_t*) = nullptr;
  nvmlReturn_t (*destroy_ci)(nvmlComputeInstance_t) = nullptr;
  nvmlReturn_t (*cis)(nvmlGpuInstance_t, unsigned, nvmlComputeInstance_t*, unsigned*) = nullptr;
  nvmlReturn_t (*ci_info)(nvmlComputeInstance_t, nvmlComputeInstanceInfo_t*) = nullptr;
  nvmlReturn_t (*max_mig)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*mig_by_index)(nvmlDevice_t, unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*gi_id)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*ci_id)(nvmlDevice_t, unsigned*) = nullptr;

  // The first symbol the library lacks, or nullptr: every one is needed.
  const char* resolve(void* dl) {
    struct Want {
      const char* name;
      void** slot;
    };
    const Want wants[] = {
        {"nvmlInit_v2", reinterpret_cast<void**>(&init)},
        {"nvmlShutdown", reinterpret_cast<void**>(&shutdown)},
        {"nvmlDeviceGetHandleByIndex_v2", reinterpret_cast<void**>(&handle_by_index)},
        {"nvmlDeviceGetUUID", reinterpret_cast<void**>(&uuid)},
        {"nvmlDeviceGetGpuInstanceProfileInfoV", reinterpret_cast<void**>(&gi_profile_v)},
        {"nvmlDeviceGetGpuInstancePossiblePlacements_v2", reinterpret_cast<void**>(&placements)},
        {"nvmlDeviceCreateGpuInstanceWithPlacement", reinterpret_cast<void**>(&create_gi)},
        {"nvmlGpuInstanceDestroy", reinterpret_cast<void**>(&destroy_gi)},
        {"nvmlDeviceGetGpuInstances", reinterpret_cast<void**>(&gis)},
        {"nvmlDeviceGetGpuInstanceById", reinterpret_cast<void**>(&gi_by_id)},
        {"nvmlGpuInstanceGetInfo", reinterpret_cast<void**>(&gi_info)},
        {"nvmlGpuInstanceCreateComputeInstance", reinterpret_cast<void**>(&create_ci)},
        {"nvmlComputeInstanceDestroy", reinterpret_cast<void**>(&destroy_ci)},
        {"nvmlGpuInstanceGetComputeInstances", reinterpret_cast<void**>(&cis)},
        {"nvmlComputeInstanceGetInfo_v2", reinterpret_cast<void**>(&ci_info)},
        {"nvmlDeviceGetMaxMigDeviceCount", reinterpret_cast<void**>(&max_mig)},
        {"nvmlDeviceGetMigDeviceHandleByIndex", reinterpret_cast<void**>(&mig_by_index)},
        {"nvmlDeviceGetGpuInstanceId", reinterpret_cast<void**>(&gi_id)},
        {"nvmlDeviceGetComputeInstanceId", reinterpret_cast<void**>(&ci_id)},
    };
    for (const Want& w : wants) {
      *w.slot = ::dlsym(dl, w.name);
      if (*w.slot == nullptr) return w.name;
    }
    return nullptr;
  }
};

Result<std::unique_ptr<MigControl>> MigControl::open(const std::string& path) {
  void* dl = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (dl == nullptr) {
    const char* why = ::dlerror();
    return Error{"cannot load " + path + ": " + (why != nullptr ? why : "unknown")};
  }
  auto api = std::make_unique<Api>();
  if (const char* missing = api->resolve(dl)) {
    ::dlclose(dl);
    return Error{path + " has no " + missing + ": a driver without MIG management (too old)"};
  }
  if (const nvmlReturn_t rc = api->init(); rc != NVML_SUCCESS) {
    ::dlclose(dl);
    return Error{"nvmlInit_v2: " + Library::code_name(rc)};
  }
  return std::unique_ptr<MigControl>(new MigControl(dl, std::move(api)));
}

MigControl::MigControl(void* dl, std::unique_ptr<Api> api) : dl_(dl), api_(std::move(api)) {}

MigControl::~MigControl() {
  api_->shutdown();
  ::dlclose(dl_);
}

Error MigControl::fail(const char* call, int gpu, int rc) {
  last_error_ = rc;
  return Error{std::string(call) + "(device " + std::to_string(gpu) +
               "): " + Library::code_name(rc) + " (" + std::to_string(rc) + ")"};
}

Result<void*> MigControl::device(int gpu) {
  nvmlDevice_t h = nullptr;
  if (gpu < 0) return Error{"device " + std::to_string(gpu) + ": out of range"};
  if (const nvmlReturn_t rc = api_->handle_by_index(static_cast<unsigned>(gpu), &h);
      rc != NVML_SUCCESS)
    return fail("nvmlDeviceGetHandleByIndex_v2", gpu, rc);
  return static_cast<void*>(h);
}

Result<std::vector<GiProfile>> MigControl::profiles(int gpu) {
  auto dev = device(gpu);
  if (!dev) return dev.error();
  auto* h = static_cast<nvmlDevice_t>(*dev);
  std::vector<GiProfile> out;
  for (unsigned p = 0; p < NVML_GPU_INSTANCE_PROFILE_COUNT; ++p) {
    nvmlGpuInstanceProfileInfo_v2_t info{};
    info.version = nvmlGpuInstanceProfileInfo_v2;
    const nvmlReturn_t rc = api_->gi_profile_v(h, p, &info);
    // NOT_SUPPORTED: this GPU has no such profile (or no MIG at all);
    // INVALID_ARGUMENT: a driver that predates the profile index.
    if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_INVALID_ARGUMENT) continue;
    if (rc != NVML_SUCCESS) return fail("nvmlDeviceGetGpuInstanceProfileInfoV", gpu, rc);
    GiProfile g;
    g.profile = p;
    g.id = info.id;
    info.name[sizeof info.name - 1] = '\0';
    g.name = info.name;
    if (g.name.rfind("MIG ", 0) == 0) g.name.erase(0, 4);
    g.slices = info.sliceCount;
    g.instances = info.instanceCount;
    g.sms = info.multiprocessorCount;
    g.memory_mib = info.memorySizeMB;
    nvmlGpuInstancePlacement_t pl[kMaxInstances];
    unsigned n = kMaxInstances;
    if (const nvmlReturn_t prc = api_->placements(h, info.id, pl, &n); prc != NVML_SUCCESS)
      return fail("nvmlDeviceGetGpuInstancePossiblePlacements_v2", gpu, prc);
    for (unsigned i = 0; i < n && i < kMaxInstances; ++i)
      g.placements.push_back({pl[i].start, pl[i].size});
    std::sort(g.placements.begin(), g.placements.end(),
              [](const GiPlacement& a, const GiPlacement& b) { return a.start < b.start; });
    out.push_back(std::move(g));
  }
  return out;
}

Result<std::vector<void*>> MigControl::compute_instances_of(void* gi, int gpu) {
  std::vector<void*> out;
  for (unsigned p = 0; p < NVML_COMPUTE_INSTANCE_PROFILE_COUNT; ++p) {
    nvmlComputeInstance_t list[kMaxInstances];
    unsigned n = 0;
    const nvmlReturn_t rc = api_->cis(static_cast<nvmlGpuInstance_t>(gi), p, list, &n);
    if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_INVALID_ARGUMENT) continue;
    if (rc != NVML_SUCCESS) return fail("nvmlGpuInstanceGetComputeInstances", gpu, rc);
    for (unsigned i = 0; i < n && i < kMaxInstances; ++i)
      out.push_back(list[i]);
  }
  return out;
}

Result<std::vector<GpuInstance>> MigControl::instances(int gpu) {
  auto profs = profiles(gpu);
  if (!profs) return profs.error();
  auto dev = device(gpu);
  if (!dev) return dev.error();
  auto* h = static_cast<nvmlDevice_t>(*dev);
  std::vector<GpuInstance> out;
  for (const GiProfile& p : *profs) {
    nvmlGpuInstance_t list[kMaxInstances];
    unsigned n = 0;
    const nvmlReturn_t rc = api_->gis(h, p.id, list, &n);
    // NOT_SUPPORTED: MIG is off, so there is no instance of any profile.
    if (rc == NVML_ERROR_NOT_SUPPORTED) return out;
    if (rc != NVML_SUCCESS) return fail("nvmlDeviceGetGpuInstances", gpu, rc);
    for (unsigned i = 0; i < n && i < kMaxInstances; ++i) {
      nvmlGpuInstanceInfo_t info{};
      if (const nvmlReturn_t irc = api_->gi_info(list[i], &info); irc != NVML_SUCCESS)
        return fail("nvmlGpuInstanceGetInfo", gpu, irc);
      GpuInstance g{info.id, info.profileId, {info.placement.start, info.placement.size}, {}};
      auto cis = compute_instances_of(list[i], gpu);
      if (!cis) return cis.error();
      for (void* c : *cis) {
        nvmlComputeInstanceInfo_t ci{};
        if (const nvmlReturn_t crc = api_->ci_info(static_cast<nvmlComputeInstance_t>(c), &ci);
            crc != NVML_SUCCESS)
          return fail("nvmlComputeInstanceGetInfo_v2", gpu, crc);
        g.compute_instances.push_back(ci.id);
      }
      std::sort(g.compute_instances.begin(), g.compute_instances.end());
      out.push_back(std::move(g));
    }
  }
  std::sort(out.begin(), out.end(),
            [](const GpuInstance& a, const GpuInstance& b) { return a.id < b.id; });
  return out;
}

Result<std::string> MigControl::mig_uuid_of(void* dev, int gpu, unsigned gi_id, unsigned ci_id) {
  auto* h = static_cast<nvmlDevice_t>(dev);
  unsigned max = 0;
  if (const nvmlReturn_t rc = api_->max_mig(h, &max); rc != NVML_SUCCESS)
    return fail("nvmlDeviceGetMaxMigDeviceCount", gpu, rc);
  for (unsigned i = 0; i < max; ++i) {
    nvmlDevice_t m = nullptr;
    const nvmlReturn_t rc = api_->mig_by_index(h, i, &m);
    if (rc == NVML_ERROR_NOT_FOUND) continue;
    if (rc != NVML_SUCCESS) return fail("nvmlDeviceGetMigDeviceHandleByIndex", gpu, rc);
    unsigned g = 0, c = 0;
    if (const nvmlReturn_t grc = api_->gi_id(m, &g); grc != NVML_SUCCESS)
      return fail("nvmlDeviceGetGpuInstanceId", gpu, grc);
    if (const nvmlReturn_t crc = api_->ci_id(m, &c); crc != NVML_SUCCESS)
      return fail("nvmlDeviceGetComputeInstanceId", gpu, crc);
    if (g != gi_id || c != ci_id) continue;
    char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (const nvmlReturn_t urc = api_->uuid(m, buf, sizeof buf); urc != NVML_SUCCESS)
      return fail("nvmlDeviceGetUUID", gpu, urc);
    return std::string(buf);
  }
  last_error_ = NVML_ERROR_NOT_FOUND;
  return Error{"device " + std::to_string(gpu) + ": no MIG device for GPU instance " +
               std::to_string(gi_id) + ", compute instance " + std::to_string(ci_id)};
}

Result<MadeInstance> MigControl::create(int gpu, unsigned profile_id, GiPlacement placement) {
  auto profs = profiles(gpu);
  if (!profs) return profs.error();
  auto prof = std::find_if(profs->begin(), profs->end(),
                           [&](const GiProfile& p) { return p.id == profile_id; });
  if (prof == profs->end())
    return Error{"device " + std::to_string(gpu) + ": no GPU-instance profile " +
                 std::to_string(profile_id)};
  const unsigned ci_profile = full_ci_profile(prof->slices);
  if (ci_profile == NVML_COMPUTE_INSTANCE_PROFILE_COUNT)
    return Error{"device " + std::to_string(gpu) + ": no compute-instance profile of " +
                 std::to_string(prof->slices) + " slices for " + prof->name};
  auto dev = device(gpu);
  if (!dev) return dev.error();
  auto* h = static_cast<nvmlDevice_t>(*dev);

  const nvmlGpuInstancePlacement_t pl{placement.start, placement.size};
  nvmlGpuInstance_t gi = nullptr;
  if (const nvmlReturn_t rc = api_->create_gi(h, profile_id, &pl, &gi); rc != NVML_SUCCESS)
    return Error{fail("nvmlDeviceCreateGpuInstanceWithPlacement", gpu, rc).message + " making " +
                 prof->name + " at slice " + std::to_string(placement.start)};

  // From here on a failure undoes what was made, so the GPU is as it was.
  nvmlComputeInstance_t ci = nullptr;
  auto undo = [&](Error why) -> Error {
    const int cause = last_error_;
    std::string m = std::move(why.message);
    if (ci != nullptr) {
      if (const nvmlReturn_t rc = api_->destroy_ci(ci); rc != NVML_SUCCESS)
        m += "; undoing it, nvmlComputeInstanceDestroy: " + Library::code_name(rc);
    }
    if (const nvmlReturn_t rc = api_->destroy_gi(gi); rc != NVML_SUCCESS) {
      nvmlGpuInstanceInfo_t info{};
      const bool known = api_->gi_info(gi, &info) == NVML_SUCCESS;
      m += "; undoing it, nvmlGpuInstanceDestroy: " + Library::code_name(rc) + ": GPU instance " +
           (known ? std::to_string(info.id) : std::string("?")) + " is left on device " +
           std::to_string(gpu);
    } else {
      m += "; the GPU instance it made was destroyed";
    }
    last_error_ = cause;
    return Error{std::move(m)};
  };

  nvmlGpuInstanceInfo_t gi_info{};
  if (const nvmlReturn_t rc = api_->gi_info(gi, &gi_info); rc != NVML_SUCCESS)
    return undo(fail("nvmlGpuInstanceGetInfo", gpu, rc));
  if (const nvmlReturn_t rc = api_->create_ci(gi, ci_profile, &ci); rc != NVML_SUCCESS) {
    ci = nullptr;
    return undo(fail("nvmlGpuInstanceCreateComputeInstance", gpu, rc));
  }
  nvmlComputeInstanceInfo_t ci_info{};
  if (const nvmlReturn_t rc = api_->ci_info(ci, &ci_info); rc != NVML_SUCCESS)
    return undo(fail("nvmlComputeInstanceGetInfo_v2", gpu, rc));
  auto uuid = mig_uuid_of(*dev, gpu, gi_info.id, ci_info.id);
  if (!uuid) return undo(uuid.error());
  return MadeInstance{gi_info.id, ci_info.id, std::move(*uuid)};
}

Result<void*> MigControl::gi_by_id(void* dev, int gpu, unsigned id) {
  nvmlGpuInstance_t gi = nullptr;
  const nvmlReturn_t rc = api_->gi_by_id(static_cast<nvmlDevice_t>(dev), id, &gi);
  if (rc != NVML_SUCCESS) return fail("nvmlDeviceGetGpuInstanceById", gpu, rc);
  return static_cast<void*>(gi);
}

Result<void> MigControl::destroy(int gpu, unsigned gpu_instance_id) {
  auto dev = device(gpu);
  if (!dev) return dev.error();
  auto gi = gi_by_id(*dev, gpu, gpu_instance_id);
  if (!gi) {
    // Already gone (or MIG off: nothing to destroy).
    if (last_error_ == NVML_ERROR_NOT_FOUND || last_error_ == NVML_ERROR_NOT_SUPPORTED) return {};
    return gi.error();
  }
  auto cis = compute_instances_of(*gi, gpu);
  if (!cis) return cis.error();
  for (void* c : *cis) {
    if (const nvmlReturn_t rc = api_->destroy_ci(static_cast<nvmlComputeInstance_t>(c));
        rc != NVML_SUCCESS)
      return Error{fail("nvmlComputeInstanceDestroy", gpu, rc).message + " in GPU instance " +
                   std::to_string(gpu_instance_id) +
                   (rc == NVML_ERROR_IN_USE ? ": a process still uses it" : "")};
  }
  if (const nvmlReturn_t rc = api_->destroy_gi(static_cast<nvmlGpuInstance_t>(*gi));
      rc != NVML_SUCCESS)
    return Error{fail("nvmlGpuInstanceDestroy", gpu, rc).message + " for GPU instance " +
                 std::to_string(gpu_instance_id)};
  return {};
}

}  // namespace hami::nvml
