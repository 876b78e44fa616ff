// What NVML answers to the read-only MIG queries the device plugin makes,
// for every GPU: MIG mode, the maximum MIG device count, every GPU-instance
// profile (unversioned and V, v2 and v3) with its possible placements, the
// remaining capacity, and with MIG on, each MIG device (UUID, name, memory,
// GI and CI IDs). It changes nothing: no nvmlDeviceSetMigMode, no instance
// created or destroyed.
//
//   mig-probe [--nvml-library PATH]      # default libnvidia-ml.so.1
//
// Each answer is checked against the outcomes nvml.h documents for it (and
// that the plugin must handle): an answer outside them, or one that
// contradicts another (MIG off but MIG devices, a profile with no memory),
// prints "FAIL ..." and makes the exit status 1. A function the driver lacks
// is reported, not failed. tests/gpu/mig_probe.sh builds and runs it on a GPU
// machine; CI runs it on the simulated NVML (tests/CMakeLists.txt).
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <string>

#include "nvml/nvml_abi.hpp"

namespace {

using namespace hami::nvml::abi;  // NOLINT: nvml.h's names

void* g_lib = nullptr;
int g_failures = 0;

template <class F>
F sym(const char* name) {
  return reinterpret_cast<F>(::dlsym(g_lib, name));
}

const char* code(nvmlReturn_t rc) {
  switch (rc) {
    case NVML_SUCCESS:
      return "SUCCESS";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case NVML_ERROR_NOT_SUPPORTED:
      return "NOT_SUPPORTED";
    case NVML_ERROR_NO_PERMISSION:
      return "NO_PERMISSION";
    case NVML_ERROR_NOT_FOUND:
      return "NOT_FOUND";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "INSUFFICIENT_SIZE";
    case NVML_ERROR_IN_USE:
      return "IN_USE";
    case NVML_ERROR_UNKNOWN:
      return "UNKNOWN";
    default:
      return "other";
  }
}

// Whether `rc` is one of `allowed`; prints FAIL otherwise.
bool expect(const char* what, nvmlReturn_t rc, std::initializer_list<nvmlReturn_t> allowed) {
  for (nvmlReturn_t a : allowed) {
    if (rc == a) return rc == NVML_SUCCESS;
  }
  std::printf("FAIL %s: unexpected %s (%d)\n", what, code(rc), rc);
  ++g_failures;
  return false;
}

void fail(const std::string& what) {
  std::printf("FAIL %s\n", what.c_str());
  ++g_failures;
}

using GetMigMode = nvmlReturn_t (*)(nvmlDevice_t, unsigned*, unsigned*);
using GetMax = nvmlReturn_t (*)(nvmlDevice_t, unsigned*);
using ProfileInfo = nvmlReturn_t (*)(nvmlDevice_t, unsigned, nvmlGpuInstanceProfileInfo_t*);
using ProfileInfoV = nvmlReturn_t (*)(nvmlDevice_t, unsigned, nvmlGpuInstanceProfileInfo_v2_t*);
using Placements = nvmlReturn_t (*)(nvmlDevice_t, unsigned, nvmlGpuInstancePlacement_t*, unsigned*);
using Capacity = nvmlReturn_t (*)(nvmlDevice_t, unsigned, unsigned*);
using MigByIndex = nvmlReturn_t (*)(nvmlDevice_t, unsigned, nvmlDevice_t*);
using IsMig = nvmlReturn_t (*)(nvmlDevice_t, unsigned*);
using InstanceId = nvmlReturn_t (*)(nvmlDevice_t, unsigned*);
using Text = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned);
using Memory = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*);

// One profile constant: the unversioned call, V at v2 and v3, which must
// agree, then the profile ID's placements and what remains of it.
void probe_profile(int gpu, nvmlDevice_t dev, unsigned profile) {
  char what[96];
  std::snprintf(what, sizeof what, "GPU %d profile %u", gpu, profile);
  nvmlGpuInstanceProfileInfo_t info{};
  nvmlReturn_t rc = NVML_ERROR_FUNCTION_NOT_FOUND;
  if (auto f = sym<ProfileInfo>("nvmlDeviceGetGpuInstanceProfileInfo")) rc = f(dev, profile, &info);
  nvmlGpuInstanceProfileInfo_v2_t v2{};
  v2.version = nvmlGpuInstanceProfileInfo_v2;
  nvmlGpuInstanceProfileInfo_v3_t v3{};
  v3.version = nvmlGpuInstanceProfileInfo_v3;
  nvmlReturn_t rc2 = NVML_ERROR_FUNCTION_NOT_FOUND;
  nvmlReturn_t rc3 = NVML_ERROR_FUNCTION_NOT_FOUND;
  if (auto f = sym<ProfileInfoV>("nvmlDeviceGetGpuInstanceProfileInfoV")) {
    rc2 = f(dev, profile, &v2);
    rc3 = f(dev, profile, reinterpret_cast<nvmlGpuInstanceProfileInfo_v2_t*>(&v3));
  }
  std::printf("  profile %2u: info=%s V2=%s V3=%s", profile, code(rc), code(rc2), code(rc3));
  const std::initializer_list<nvmlReturn_t> ok = {NVML_SUCCESS, NVML_ERROR_NOT_SUPPORTED,
                                                  NVML_ERROR_NO_PERMISSION,
                                                  NVML_ERROR_FUNCTION_NOT_FOUND};
  const bool have = expect(what, rc, ok);
  const bool have2 = expect(what, rc2, ok);
  expect(what, rc3, ok);
  if (!have && !have2) {
    std::printf("\n");
    return;
  }
  const nvmlGpuInstanceProfileInfo_t& i = info;
  if (have) {
    std::printf(" id=%u slices=%u instances=%u sms=%u ce=%u dec=%u enc=%u jpeg=%u ofa=%u mib=%llu",
                i.id, i.sliceCount, i.instanceCount, i.multiprocessorCount, i.copyEngineCount,
                i.decoderCount, i.encoderCount, i.jpegCount, i.ofaCount, i.memorySizeMB);
  }
  if (have2) std::printf(" name=\"%s\"", v2.name);
  std::printf("\n");
  const unsigned id = have ? i.id : v2.id;
  if ((have && (i.memorySizeMB == 0 || i.sliceCount == 0 || i.instanceCount == 0)) ||
      (have2 && (v2.memorySizeMB == 0 || std::strncmp(v2.name, "MIG ", 4) != 0)) ||
      (have && have2 && (v2.id != i.id || v2.memorySizeMB != i.memorySizeMB)) ||
      (rc3 == NVML_SUCCESS && (v3.id != id || v3.multiprocessorCount == 0)))
    fail(std::string(what) + ": inconsistent profile info");
  if (auto f = sym<Placements>("nvmlDeviceGetGpuInstancePossiblePlacements_v2")) {
    unsigned n = 0;
    rc = f(dev, id, nullptr, &n);
    std::printf("    placements(id %u): %s", id, code(rc));
    if (expect(what, rc, {NVML_SUCCESS, NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NO_PERMISSION}) &&
        n > 0 && n <= 16) {
      nvmlGpuInstancePlacement_t p[16] = {};
      rc = f(dev, id, p, &n);
      if (expect(what, rc, {NVML_SUCCESS})) {
        for (unsigned k = 0; k < n; ++k)
          std::printf(" %u:%u", p[k].start, p[k].size);
      }
    }
    std::printf("\n");
  }
  if (auto f = sym<Capacity>("nvmlDeviceGetGpuInstanceRemainingCapacity")) {
    unsigned left = 0;
    rc = f(dev, id, &left);
    std::printf("    remaining capacity: %s", code(rc));
    if (rc == NVML_SUCCESS) std::printf(" %u", left);
    std::printf("\n");
    // With MIG off the driver (580, H200) still answers, with every instance
    // free; NOT_SUPPORTED is what nvml.h's wording suggests. Both are handled.
    expect(what, rc, {NVML_SUCCESS, NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NO_PERMISSION});
  }
}

void probe_mig_devices(int gpu, nvmlDevice_t dev, unsigned max) {
  auto by_index = sym<MigByIndex>("nvmlDeviceGetMigDeviceHandleByIndex");
  if (by_index == nullptr) {
    std::printf("  nvmlDeviceGetMigDeviceHandleByIndex: missing\n");
    return;
  }
  char what[64];
  std::snprintf(what, sizeof what, "GPU %d MIG device", gpu);
  for (unsigned k = 0; k < max; ++k) {
    nvmlDevice_t m = nullptr;
    const nvmlReturn_t rc = by_index(dev, k, &m);
    if (!expect(what, rc, {NVML_SUCCESS, NVML_ERROR_NOT_FOUND})) continue;
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
    nvmlMemory_t mem{};
    unsigned gi = 0;
    unsigned ci = 0;
    unsigned is_mig = 0;
    expect(what, sym<Text>("nvmlDeviceGetUUID")(m, uuid, sizeof uuid), {NVML_SUCCESS});
    expect(what, sym<Text>("nvmlDeviceGetName")(m, name, sizeof name), {NVML_SUCCESS});
    expect(what, sym<Memory>("nvmlDeviceGetMemoryInfo")(m, &mem), {NVML_SUCCESS});
    if (auto f = sym<IsMig>("nvmlDeviceIsMigDeviceHandle"))
      expect(what, f(m, &is_mig), {NVML_SUCCESS});
    if (auto f = sym<InstanceId>("nvmlDeviceGetGpuInstanceId"))
      expect(what, f(m, &gi), {NVML_SUCCESS});
    if (auto f = sym<InstanceId>("nvmlDeviceGetComputeInstanceId"))
      expect(what, f(m, &ci), {NVML_SUCCESS});
    std::printf("  MIG device %u: %s \"%s\" memory=%llu MiB gi=%u ci=%u\n", k, uuid, name,
                mem.total >> 20, gi, ci);
    if (std::strncmp(uuid, "MIG-", 4) != 0 || mem.total == 0 || is_mig != 1)
      fail(std::string(what) + ": not a MIG device's answers");
  }
}

void probe_gpu(int gpu) {
  nvmlDevice_t dev = nullptr;
  char what[32];
  std::snprintf(what, sizeof what, "GPU %d", gpu);
  if (!expect(what,
              sym<nvmlReturn_t (*)(unsigned, nvmlDevice_t*)>("nvmlDeviceGetHandleByIndex_v2")(
                  static_cast<unsigned>(gpu), &dev),
              {NVML_SUCCESS}))
    return;
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
  char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  sym<Text>("nvmlDeviceGetName")(dev, name, sizeof name);
  sym<Text>("nvmlDeviceGetUUID")(dev, uuid, sizeof uuid);
  std::printf("GPU %d: %s %s\n", gpu, name, uuid);

  bool enabled = false;
  auto get_mode = sym<GetMigMode>("nvmlDeviceGetMigMode");
  if (get_mode == nullptr) {
    std::printf("GPU %d: nvmlDeviceGetMigMode missing (a driver before MIG)\n", gpu);
    return;
  }
  unsigned cur = 0;
  unsigned pending = 0;
  const nvmlReturn_t rc = get_mode(dev, &cur, &pending);
  if (rc == NVML_ERROR_NOT_SUPPORTED) {
    std::printf("GPU %d: mig mode not supported\n", gpu);
  } else if (expect(what, rc, {NVML_SUCCESS})) {
    std::printf("GPU %d: mig mode current=%s pending=%s\n", gpu,
                cur == NVML_DEVICE_MIG_ENABLE ? "enabled" : "disabled",
                pending == NVML_DEVICE_MIG_ENABLE ? "enabled" : "disabled");
    if (cur > NVML_DEVICE_MIG_ENABLE || pending > NVML_DEVICE_MIG_ENABLE)
      fail(std::string(what) + ": MIG mode out of range");
    enabled = cur == NVML_DEVICE_MIG_ENABLE;
  }
  unsigned max = 0;
  if (auto f = sym<GetMax>("nvmlDeviceGetMaxMigDeviceCount")) {
    const nvmlReturn_t r = f(dev, &max);
    std::printf("  max MIG devices: %s %u\n", code(r), max);
    // nvml.h: zero when MIG is not supported or not enabled.
    if (expect(what, r, {NVML_SUCCESS, NVML_ERROR_NOT_SUPPORTED}) && (max > 0) != enabled)
      fail(std::string(what) + ": max MIG device count disagrees with the MIG mode");
  }
  unsigned is_mig = 9;
  if (auto f = sym<IsMig>("nvmlDeviceIsMigDeviceHandle")) {
    const nvmlReturn_t r = f(dev, &is_mig);
    std::printf("  GPU handle is a MIG device: %s %u\n", code(r), is_mig);
    if (expect(what, r, {NVML_SUCCESS, NVML_ERROR_NOT_SUPPORTED}) && is_mig != 0)
      fail(std::string(what) + ": the GPU's handle called a MIG device");
  }
  if (rc == NVML_ERROR_NOT_SUPPORTED) return;
  for (unsigned p = 0; p < NVML_GPU_INSTANCE_PROFILE_COUNT; ++p)
    probe_profile(gpu, dev, p);
  if (enabled) probe_mig_devices(gpu, dev, max);
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = "libnvidia-ml.so.1";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--nvml-library") == 0 && i + 1 < argc) {
      path = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--nvml-library PATH]\n", argv[0]);
      return 2;
    }
  }
  g_lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (g_lib == nullptr) {
    std::printf("FAIL open %s: %s\n", path.c_str(), ::dlerror());
    return 1;
  }
  auto init = sym<nvmlReturn_t (*)()>("nvmlInit_v2");
  auto count = sym<nvmlReturn_t (*)(unsigned*)>("nvmlDeviceGetCount_v2");
  unsigned n = 0;
  if (init == nullptr || count == nullptr || init() != NVML_SUCCESS || count(&n) != NVML_SUCCESS) {
    std::printf("FAIL NVML init or device count\n");
    return 1;
  }
  char driver[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = "unknown";
  if (auto f = sym<nvmlReturn_t (*)(char*, unsigned)>("nvmlSystemGetDriverVersion"))
    f(driver, sizeof driver);
  std::printf("# MIG probe: NVML %s, driver %s, %u GPU(s)\n", path.c_str(), driver, n);
  for (unsigned i = 0; i < n; ++i)
    probe_gpu(static_cast<int>(i));
  std::printf("%s: %d unexpected answer(s)\n", g_failures == 0 ? "PASS" : "FAIL", g_failures);
  if (auto f = sym<nvmlReturn_t (*)()>("nvmlShutdown")) f();
  return g_failures == 0 ? 0 : 1;
}
