// Simulated MIG (tests/support/simgpu/sim_mig.cpp) through the real MIG API,
// as the device plugin will call it: MIG mode per GPU, GPU- and compute-
// instance profiles of an H100 80GB (NVIDIA's table) and an H200 (our
// recorded nvidia-smi mig -lgip), placements, creating, listing and
// destroying instances and their errors, MIG device handles, UUIDs and
// memory, one partitioning seen by another process (the MIG probe), and
// CUDA_VISIBLE_DEVICES=MIG-<uuid> in the simulated driver.
//
// The node: GPU 0 an H100 partitioned by SIMGPU_MIG (3g, 2g, two 1g), GPU 1
// an H200 with MIG on and empty (tests create there and clean up), GPU 2 an
// H100 with MIG off, GPU 3 a T4 without MIG.
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "nvml/nvml_abi.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"
#include "vgpu/cuda_abi.hpp"

namespace {

using namespace hami::nvml::abi;  // NOLINT: nvml.h's names
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr unsigned long long kMiB = 1ull << 20;

struct SimEnv {
  hami::test::TempDir dir;
  SimEnv() {
    ::setenv("SIMGPU_STATE", dir.file("gpu.state").c_str(), 1);
    ::setenv(
        "SIMGPU_DEVICES",
        "GPU-5a3e0000-0000-4000-8000-0000000000a0:80g,GPU-5a3e0000-0000-4000-8000-0000000000a1:"
        "141g,GPU-5a3e0000-0000-4000-8000-0000000000a2:80g,GPU-5a3e0000-0000-4000-8000-"
        "0000000000a3:16g",
        1);
    ::setenv("SIMGPU_NAMES", "NVIDIA H100 80GB HBM3,NVIDIA H200,NVIDIA H100 80GB HBM3,Tesla T4", 1);
    ::setenv("SIMGPU_MIG", "0:3g.40gb@4,2g.20gb,1g.10gb,1g.10gb;1:on", 1);
    for (const char* v : {"SIMGPU_NVML_SCRIPT", "SIMGPU_FAIL", "CUDA_VISIBLE_DEVICES"})
      ::unsetenv(v);
  }
};

SimEnv& sim() {
  static SimEnv env;
  return env;
}

// The simulated NVML, loaded once, with its functions by name.
class Nvml {
 public:
  static Nvml& get() {
    static Nvml n;
    return n;
  }
  template <class F>
  F fn(const char* name) {
    void* p = ::dlsym(lib_, name);
    EXPECT_NE(p, nullptr) << name;
    return reinterpret_cast<F>(p);
  }
  nvmlDevice_t gpu(unsigned i) {
    nvmlDevice_t h = nullptr;
    EXPECT_EQ(fn<nvmlReturn_t (*)(unsigned, nvmlDevice_t*)>("nvmlDeviceGetHandleByIndex_v2")(i, &h),
              NVML_SUCCESS);
    return h;
  }

 private:
  Nvml() {
    sim();
    lib_ = ::dlopen(SIMNVML, RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(lib_, nullptr) << ::dlerror();
    EXPECT_EQ(fn<nvmlReturn_t (*)()>("nvmlInit_v2")(), NVML_SUCCESS);
  }
  void* lib_ = nullptr;
};

#define NVML(name) Nvml::get().fn<decltype(&name)>(#name)

// The MIG API as nvml.h declares it, for decltype.
extern "C" {
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t, unsigned*, unsigned*);
nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t, unsigned, nvmlReturn_t*);
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t, unsigned*);
nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t, unsigned,
                                                 nvmlGpuInstanceProfileInfo_t*);
nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t, unsigned,
                                                  nvmlGpuInstanceProfileInfo_v2_t*);
nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t, unsigned,
                                                           nvmlGpuInstancePlacement_t*, unsigned*);
nvmlReturn_t nvmlDeviceGetGpuInstanceRemainingCapacity(nvmlDevice_t, unsigned, unsigned*);
nvmlReturn_t nvmlDeviceCreateGpuInstance(nvmlDevice_t, unsigned, nvmlGpuInstance_t*);
nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t, unsigned,
                                                      const nvmlGpuInstancePlacement_t*,
                                                      nvmlGpuInstance_t*);
nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t);
nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t, unsigned, nvmlGpuInstance_t*, unsigned*);
nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t, unsigned, nvmlGpuInstance_t*);
nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t, nvmlGpuInstanceInfo_t*);
nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfoV(nvmlGpuInstance_t, unsigned, unsigned,
                                                           nvmlComputeInstanceProfileInfo_v2_t*);
nvmlReturn_t nvmlGpuInstanceGetComputeInstanceRemainingCapacity(nvmlGpuInstance_t, unsigned,
                                                                unsigned*);
nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t, unsigned,
                                                  nvmlComputeInstance_t*);
nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t);
nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t, unsigned, nvmlComputeInstance_t*,
                                                unsigned*);
nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t, nvmlComputeInstanceInfo_t*);
nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t, unsigned*);
nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t, unsigned*);
nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t, unsigned*);
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t, unsigned, nvmlDevice_t*);
nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t, nvmlDevice_t*);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t, char*, unsigned);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t, char*, unsigned);
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char*, nvmlDevice_t*);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t, nvmlMemory_t*);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t, unsigned*, nvmlProcessInfo_t*);
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t, nvmlPciInfo_t*);
}

// "MIG-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", lower-case hex. (No std::regex:
// GCC 12 warns inside it under the sanitizer build.)
bool is_mig_uuid(const std::string& u) {
  if (u.size() != 40 || u.rfind("MIG-", 0) != 0) return false;
  for (size_t i = 4; i < u.size(); ++i) {
    const bool dash = i == 12 || i == 17 || i == 22 || i == 27;
    if (dash ? u[i] != '-' : std::string("0123456789abcdef").find(u[i]) == std::string::npos)
      return false;
  }
  return true;
}

// The words of a table line of nvidia-smi, without its '|' borders.
std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) {
    if (w != "|") out.push_back(w);
  }
  return out;
}

std::string uuid_of(nvmlDevice_t h) {
  char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  EXPECT_EQ(NVML(nvmlDeviceGetUUID)(h, buf, sizeof buf), NVML_SUCCESS);
  return buf;
}
std::string name_of(nvmlDevice_t h) {
  char buf[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
  EXPECT_EQ(NVML(nvmlDeviceGetName)(h, buf, sizeof buf), NVML_SUCCESS);
  return buf;
}

// The GPU's MIG devices, by index.
std::vector<nvmlDevice_t> mig_devices(nvmlDevice_t gpu) {
  std::vector<nvmlDevice_t> out;
  for (unsigned i = 0; i < 7; ++i) {
    nvmlDevice_t m = nullptr;
    if (NVML(nvmlDeviceGetMigDeviceHandleByIndex)(gpu, i, &m) == NVML_SUCCESS) out.push_back(m);
  }
  return out;
}

nvmlGpuInstanceInfo_t gi_info(nvmlGpuInstance_t gi) {
  nvmlGpuInstanceInfo_t info{};
  EXPECT_EQ(NVML(nvmlGpuInstanceGetInfo)(gi, &info), NVML_SUCCESS);
  return info;
}

// A GI of profile ID `id` with one CI of all its slices, as nvidia-smi mig -cgi <id> -C makes.
struct Slice {
  nvmlGpuInstance_t gi = nullptr;
  nvmlComputeInstance_t ci = nullptr;
  nvmlDevice_t device = nullptr;
  std::string uuid;
};
Slice make_slice(nvmlDevice_t gpu, unsigned id, unsigned ci_profile) {
  Slice s;
  EXPECT_EQ(NVML(nvmlDeviceCreateGpuInstance)(gpu, id, &s.gi), NVML_SUCCESS);
  EXPECT_EQ(NVML(nvmlGpuInstanceCreateComputeInstance)(s.gi, ci_profile, &s.ci), NVML_SUCCESS);
  for (nvmlDevice_t m : mig_devices(gpu)) {
    unsigned gi_id = 0;
    EXPECT_EQ(NVML(nvmlDeviceGetGpuInstanceId)(m, &gi_id), NVML_SUCCESS);
    if (gi_id == gi_info(s.gi).id) s.device = m;
  }
  EXPECT_NE(s.device, nullptr);
  if (s.device != nullptr) s.uuid = uuid_of(s.device);
  return s;
}

// Leaves GPU 1 as it started: MIG on, no instances.
class MigTest : public ::testing::Test {
 protected:
  void TearDown() override {
    nvmlDevice_t gpu = Nvml::get().gpu(1);
    for (unsigned id : {19u, 20u, 15u, 14u, 9u, 5u, 0u}) {
      nvmlGpuInstance_t gis[7] = {};
      unsigned n = 0;
      ASSERT_EQ(NVML(nvmlDeviceGetGpuInstances)(gpu, id, gis, &n), NVML_SUCCESS);
      for (unsigned i = 0; i < n; ++i) {
        for (unsigned ci_profile = 0; ci_profile < NVML_COMPUTE_INSTANCE_PROFILE_COUNT;
             ++ci_profile) {
          nvmlComputeInstance_t cis[7] = {};
          unsigned m = 0;
          if (NVML(nvmlGpuInstanceGetComputeInstances)(gis[i], ci_profile, cis, &m) != NVML_SUCCESS)
            continue;
          for (unsigned k = 0; k < m; ++k)
            EXPECT_EQ(NVML(nvmlComputeInstanceDestroy)(cis[k]), NVML_SUCCESS);
        }
        EXPECT_EQ(NVML(nvmlGpuInstanceDestroy)(gis[i]), NVML_SUCCESS);
      }
    }
  }
};

TEST_F(MigTest, ModePerGpu) {
  const unsigned want[][2] = {{1, 1}, {1, 1}, {0, 0}};
  for (unsigned i = 0; i < 3; ++i) {
    unsigned cur = 9;
    unsigned pending = 9;
    ASSERT_EQ(NVML(nvmlDeviceGetMigMode)(Nvml::get().gpu(i), &cur, &pending), NVML_SUCCESS);
    EXPECT_EQ(cur, want[i][0]) << "GPU " << i;
    EXPECT_EQ(pending, want[i][1]) << "GPU " << i;
    unsigned max = 99;
    ASSERT_EQ(NVML(nvmlDeviceGetMaxMigDeviceCount)(Nvml::get().gpu(i), &max), NVML_SUCCESS);
    EXPECT_EQ(max, want[i][0] == 1 ? 7u : 0u) << "GPU " << i;
  }
  unsigned cur = 0;
  unsigned pending = 0;
  EXPECT_EQ(NVML(nvmlDeviceGetMigMode)(Nvml::get().gpu(3), &cur, &pending),
            NVML_ERROR_NOT_SUPPORTED);
  unsigned max = 99;
  EXPECT_EQ(NVML(nvmlDeviceGetMaxMigDeviceCount)(Nvml::get().gpu(3), &max), NVML_SUCCESS);
  EXPECT_EQ(max, 0u);
}

TEST_F(MigTest, SetModeAppliesWhenIdleAndStaysPendingOtherwise) {
  nvmlReturn_t activation = NVML_ERROR_UNKNOWN;
  nvmlDevice_t off = Nvml::get().gpu(2);
  ASSERT_EQ(NVML(nvmlDeviceSetMigMode)(off, NVML_DEVICE_MIG_ENABLE, &activation), NVML_SUCCESS);
  EXPECT_EQ(activation, NVML_SUCCESS);
  unsigned cur = 0;
  unsigned pending = 0;
  ASSERT_EQ(NVML(nvmlDeviceGetMigMode)(off, &cur, &pending), NVML_SUCCESS);
  EXPECT_EQ(cur, NVML_DEVICE_MIG_ENABLE);
  ASSERT_EQ(NVML(nvmlDeviceSetMigMode)(off, NVML_DEVICE_MIG_DISABLE, &activation), NVML_SUCCESS);
  ASSERT_EQ(NVML(nvmlDeviceGetMigMode)(off, &cur, &pending), NVML_SUCCESS);
  EXPECT_EQ(cur, NVML_DEVICE_MIG_DISABLE);

  // GPU 0 has instances: disabling waits for them.
  nvmlDevice_t busy = Nvml::get().gpu(0);
  ASSERT_EQ(NVML(nvmlDeviceSetMigMode)(busy, NVML_DEVICE_MIG_DISABLE, &activation), NVML_SUCCESS);
  EXPECT_EQ(activation, NVML_ERROR_IN_USE);
  ASSERT_EQ(NVML(nvmlDeviceGetMigMode)(busy, &cur, &pending), NVML_SUCCESS);
  EXPECT_EQ(cur, NVML_DEVICE_MIG_ENABLE);
  EXPECT_EQ(pending, NVML_DEVICE_MIG_DISABLE);
  ASSERT_EQ(NVML(nvmlDeviceSetMigMode)(busy, NVML_DEVICE_MIG_ENABLE, &activation), NVML_SUCCESS);
  ASSERT_EQ(NVML(nvmlDeviceGetMigMode)(busy, &cur, &pending), NVML_SUCCESS);
  EXPECT_EQ(pending, NVML_DEVICE_MIG_ENABLE);
  EXPECT_EQ(NVML(nvmlDeviceSetMigMode)(Nvml::get().gpu(3), 1, &activation),
            NVML_ERROR_NOT_SUPPORTED);
}

// NVIDIA's published H100 80GB table: profile constant, profile ID, instances,
// SMs, memory in MiB (nvidia-smi's GiB x 1024), name.
struct Row {
  unsigned profile, id, slices, instances, sms;
  unsigned long long mib;
  const char* name;
};
const Row kH100[] = {
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, 1, 7, 16, 9984, "1g.10gb"},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, 1, 1, 16, 9984, "1g.10gb+me"},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, 1, 4, 26, 20224, "1g.20gb"},
    {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, 2, 3, 32, 20224, "2g.20gb"},
    {NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, 3, 2, 60, 40192, "3g.40gb"},
    {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, 4, 1, 64, 40192, "4g.40gb"},
    {NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, 7, 1, 132, 81152, "7g.80gb"},
};

TEST_F(MigTest, H100ProfilesAreNvidiasTable) {
  nvmlDevice_t gpu = Nvml::get().gpu(0);
  for (const Row& r : kH100) {
    nvmlGpuInstanceProfileInfo_t info{};
    ASSERT_EQ(NVML(nvmlDeviceGetGpuInstanceProfileInfo)(gpu, r.profile, &info), NVML_SUCCESS);
    EXPECT_EQ(info.id, r.id) << r.name;
    EXPECT_EQ(info.sliceCount, r.slices) << r.name;
    EXPECT_EQ(info.instanceCount, r.instances) << r.name;
    EXPECT_EQ(info.multiprocessorCount, r.sms) << r.name;
    EXPECT_EQ(info.memorySizeMB, r.mib) << r.name;
    nvmlGpuInstanceProfileInfo_v2_t v2{};
    v2.version = nvmlGpuInstanceProfileInfo_v2;
    ASSERT_EQ(NVML(nvmlDeviceGetGpuInstanceProfileInfoV)(gpu, r.profile, &v2), NVML_SUCCESS);
    EXPECT_EQ(std::string(v2.name), std::string("MIG ") + r.name);
    EXPECT_EQ(v2.memorySizeMB, r.mib);
    nvmlGpuInstanceProfileInfo_v3_t v3{};
    v3.version = nvmlGpuInstanceProfileInfo_v3;
    ASSERT_EQ(NVML(nvmlDeviceGetGpuInstanceProfileInfoV)(
                  gpu, r.profile, reinterpret_cast<nvmlGpuInstanceProfileInfo_v2_t*>(&v3)),
              NVML_SUCCESS);
    EXPECT_EQ(v3.id, r.id);
    EXPECT_EQ(v3.multiprocessorCount, r.sms);
    EXPECT_EQ(std::string(v3.name), std::string("MIG ") + r.name);
  }
  nvmlGpuInstanceProfileInfo_t info{};
  EXPECT_EQ(
      NVML(nvmlDeviceGetGpuInstanceProfileInfo)(gpu, NVML_GPU_INSTANCE_PROFILE_8_SLICE, &info),
      NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(NVML(nvmlDeviceGetGpuInstanceProfileInfo)(gpu, NVML_GPU_INSTANCE_PROFILE_COUNT, &info),
            NVML_ERROR_INVALID_ARGUMENT);
  nvmlGpuInstanceProfileInfo_v2_t bad{};
  bad.version = 7;
  EXPECT_EQ(NVML(nvmlDeviceGetGpuInstanceProfileInfoV)(gpu, 0, &bad), NVML_ERROR_INVALID_ARGUMENT);
  // MIG off: the profiles are still described, and every instance is free,
  // as driver 580 answered on an H200 (tests/gpu/results/mig-probe-h200.txt);
  // no MIG at all: NOT_SUPPORTED.
  ASSERT_EQ(NVML(nvmlDeviceGetGpuInstanceProfileInfo)(Nvml::get().gpu(2), 0, &info), NVML_SUCCESS);
  EXPECT_EQ(info.id, 19u);
  unsigned left = 0;
  ASSERT_EQ(NVML(nvmlDeviceGetGpuInstanceRemainingCapacity)(Nvml::get().gpu(2), 19, &left),
            NVML_SUCCESS);
  EXPECT_EQ(left, 7u);
  EXPECT_EQ(NVML(nvmlDeviceGetGpuInstanceProfileInfo)(Nvml::get().gpu(3), 0, &info),
            NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(NVML(nvmlDeviceGetGpuInstanceRemainingCapacity)(Nvml::get().gpu(3), 19, &left),
            NVML_ERROR_NOT_SUPPORTED);
}

// Every profile line of our recorded nvidia-smi mig -lgip of an H200
// (tests/gpu/results/mig-profiles-h200.txt) against the simulated H200.
TEST_F(MigTest, H200ProfilesMatchTheRecordedGpu) {
  std::ifstream in(MIG_H200_FIXTURE);
  ASSERT_TRUE(in) << MIG_H200_FIXTURE;
  std::map<unsigned, nvmlGpuInstanceProfileInfo_v2_t> sim;
  nvmlDevice_t gpu = Nvml::get().gpu(1);
  for (unsigned p = 0; p < NVML_GPU_INSTANCE_PROFILE_COUNT; ++p) {
    nvmlGpuInstanceProfileInfo_v2_t info{};
    info.version = nvmlGpuInstanceProfileInfo_v2;
    if (NVML(nvmlDeviceGetGpuInstanceProfileInfoV)(gpu, p, &info) == NVML_SUCCESS)
      sim[info.id] = info;
  }
  std::string line;
  int rows = 0;
  // "|   0  MIG 1g.18gb  19  7/7  16.00  No  16  1  0   |" (GPU, name, ID,
  // free/total, GiB, P2P, SM, DEC, ENC), then "|  1  1  0  |" (CE, JPEG, OFA).
  while (std::getline(in, line)) {
    const std::vector<std::string> m = words(line);
    if (m.size() != 10 || m[1] != "MIG") continue;
    std::string next;
    ASSERT_TRUE(std::getline(in, next));
    const std::vector<std::string> e = words(next);
    ASSERT_EQ(e.size(), 3u) << next;
    ++rows;
    const std::string& name = m[2];
    const unsigned id = static_cast<unsigned>(std::stoul(m[3]));
    ASSERT_EQ(sim.count(id), 1u) << "profile ID " << id;
    const nvmlGpuInstanceProfileInfo_v2_t& s = sim[id];
    EXPECT_EQ(std::string(s.name), "MIG " + name);
    EXPECT_EQ(s.instanceCount, std::stoul(m[4].substr(m[4].find('/') + 1))) << name;
    EXPECT_EQ(std::lround(static_cast<double>(s.memorySizeMB) / 1024 * 100),
              std::lround(std::stod(m[5]) * 100))
        << name;
    EXPECT_EQ(s.multiprocessorCount, std::stoul(m[7])) << name;
    EXPECT_EQ(s.decoderCount, std::stoul(m[8])) << name;
    EXPECT_EQ(s.encoderCount, std::stoul(m[9])) << name;
    EXPECT_EQ(s.copyEngineCount, std::stoul(e[0])) << name;
    EXPECT_EQ(s.jpegCount, std::stoul(e[1])) << name;
    EXPECT_EQ(s.ofaCount, std::stoul(e[2])) << name;
  }
  EXPECT_EQ(rows, 7);
  EXPECT_EQ(sim.size(), 7u);
}

TEST_F(MigTest, PossiblePlacementsWithMigOnOrOff) {
  nvmlDevice_t gpu = Nvml::get().gpu(2);  // MIG off: placements still answer
  unsigned n = 0;
  ASSERT_EQ(NVML(nvmlDeviceGetGpuInstancePossiblePlacements_v2)(gpu, 15, nullptr, &n),
            NVML_SUCCESS);
  ASSERT_EQ(n, 4u);
  nvmlGpuInstancePlacement_t p[8] = {};
  unsigned small = 2;
  EXPECT_EQ(NVML(nvmlDeviceGetGpuInstancePossiblePlacements_v2)(gpu, 15, p, &small),
            NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(small, 4u);
  n = 8;
  ASSERT_EQ(NVML(nvmlDeviceGetGpuInstancePossiblePlacements_v2)(gpu, 15, p, &n), NVML_SUCCESS);
  std::vector<std::pair<unsigned, unsigned>> got;
  for (unsigned i = 0; i < n; ++i)
    got.emplace_back(p[i].start, p[i].size);
  EXPECT_EQ(got, (std::vector<std::pair<unsigned, unsigned>>{{0, 2}, {2, 2}, {4, 2}, {6, 2}}));
  const std::map<unsigned, std::vector<unsigned>> starts = {
      {19, {0, 1, 2, 3, 4, 5, 6}}, {14, {0, 2, 4}}, {9, {0, 4}}, {5, {0}}, {0, {0}}};
  const std::map<unsigned, unsigned> sizes = {{19, 1}, {14, 2}, {9, 4}, {5, 4}, {0, 8}};
  for (const auto& [id, want] : starts) {
    n = 8;
    ASSERT_EQ(NVML(nvmlDeviceGetGpuInstancePossiblePlacements_v2)(Nvml::get().gpu(1), id, p, &n),
              NVML_SUCCESS);
    std::vector<unsigned> s;
    for (unsigned i = 0; i < n; ++i) {
      s.push_back(p[i].start);
      EXPECT_EQ(p[i].size, sizes.at(id)) << "profile ID " << id;
    }
    EXPECT_EQ(s, want) << "profile ID " << id;
  }
  EXPECT_EQ(NVML(nvmlDeviceGetGpuInstancePossiblePlacements_v2)(gpu, 99, nullptr, &n),
            NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(
      NVML(nvmlDeviceGetGpuInstancePossiblePlacements_v2)(Nvml::get().gpu(3), 19, nullptr, &n),
      NVML_ERROR_NOT_SUPPORTED);
}

TEST_F(MigTest, CreateListInspectAndDestroyInstances) {
  nvmlDevice_t gpu = Nvml::get().gpu(1);
  nvmlGpuInstance_t one = nullptr;
  ASSERT_EQ(NVML(nvmlDeviceCreateGpuInstance)(gpu, 19, &one), NVML_SUCCESS);
  nvmlGpuInstanceInfo_t info = gi_info(one);
  EXPECT_EQ(info.device, gpu);
  EXPECT_EQ(info.profileId, 19u);
  EXPECT_EQ(info.placement.start, 0u);  // the first free placement
  EXPECT_EQ(info.placement.size, 1u);

  const nvmlGpuInstancePlacement_t at4{4, 4};
  nvmlGpuInstance_t three = nullptr;
  ASSERT_EQ(NVML(nvmlDeviceCreateGpuInstanceWithPlacement)(gpu, 9, &at4, &three), NVML_SUCCESS);
  EXPECT_EQ(gi_info(three).placement.start, 4u);
  EXPECT_NE(gi_info(three).id, info.id);
  nvmlGpuInstance_t by_id = nullptr;
  ASSERT_EQ(NVML(nvmlDeviceGetGpuInstanceById)(gpu, gi_info(three).id, &by_id), NVML_SUCCESS);
  EXPECT_EQ(by_id, three);
  EXPECT_EQ(NVML(nvmlDeviceGetGpuInstanceById)(gpu, 77, &by_id), NVML_ERROR_NOT_FOUND);

  // Slice 4 is taken; 3 is no 3g placement; a 2-slice placement is no 3g's.
  nvmlGpuInstance_t no = nullptr;
  const nvmlGpuInstancePlacement_t at_4_1{4, 1};
  EXPECT_EQ(NVML(nvmlDeviceCreateGpuInstanceWithPlacement)(gpu, 19, &at_4_1, &no),
            NVML_ERROR_INSUFFICIENT_RESOURCES);
  const nvmlGpuInstancePlacement_t at3{3, 4};
  EXPECT_EQ(NVML(nvmlDeviceCreateGpuInstanceWithPlacement)(gpu, 9, &at3, &no),
            NVML_ERROR_INVALID_ARGUMENT);
  const nvmlGpuInstancePlacement_t at0_2{0, 2};
  EXPECT_EQ(NVML(nvmlDeviceCreateGpuInstanceWithPlacement)(gpu, 9, &at0_2, &no),
            NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(NVML(nvmlDeviceCreateGpuInstance)(gpu, 0, &no), NVML_ERROR_INSUFFICIENT_RESOURCES);
  EXPECT_EQ(NVML(nvmlDeviceCreateGpuInstance)(gpu, 99, &no), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(NVML(nvmlDeviceCreateGpuInstance)(Nvml::get().gpu(2), 19, &no),
            NVML_ERROR_NOT_SUPPORTED);

  nvmlGpuInstance_t listed[7] = {};
  unsigned n = 0;
  ASSERT_EQ(NVML(nvmlDeviceGetGpuInstances)(gpu, 9, listed, &n), NVML_SUCCESS);
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(listed[0], three);

  // Compute instances of the 3g: three 1c, one 2c, one 3g.
  nvmlComputeInstanceProfileInfo_v2_t ci{};
  ci.version = nvmlComputeInstanceProfileInfo_v2;
  ASSERT_EQ(NVML(nvmlGpuInstanceGetComputeInstanceProfileInfoV)(
                three, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE,
                NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &ci),
            NVML_SUCCESS);
  EXPECT_EQ(ci.instanceCount, 3u);
  EXPECT_EQ(ci.multiprocessorCount, 16u);
  EXPECT_EQ(std::string(ci.name), "MIG 1c.3g.71gb");
  ASSERT_EQ(NVML(nvmlGpuInstanceGetComputeInstanceProfileInfoV)(
                three, NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE,
                NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &ci),
            NVML_SUCCESS);
  EXPECT_EQ(ci.multiprocessorCount, 60u);
  EXPECT_EQ(std::string(ci.name), "MIG 3g.71gb");
  EXPECT_EQ(NVML(nvmlGpuInstanceGetComputeInstanceProfileInfoV)(
                three, NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE,
                NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &ci),
            NVML_ERROR_NOT_SUPPORTED);

  nvmlComputeInstance_t c0 = nullptr;
  nvmlComputeInstance_t c1 = nullptr;
  ASSERT_EQ(NVML(nvmlGpuInstanceCreateComputeInstance)(three, 0, &c0), NVML_SUCCESS);
  ASSERT_EQ(NVML(nvmlGpuInstanceCreateComputeInstance)(three, 0, &c1), NVML_SUCCESS);
  unsigned left = 9;
  ASSERT_EQ(NVML(nvmlGpuInstanceGetComputeInstanceRemainingCapacity)(three, 0, &left),
            NVML_SUCCESS);
  EXPECT_EQ(left, 1u);
  ASSERT_EQ(NVML(nvmlGpuInstanceGetComputeInstanceRemainingCapacity)(three, 2, &left),
            NVML_SUCCESS);
  EXPECT_EQ(left, 0u);  // the 3-slice CI overlaps the two made
  nvmlComputeInstanceInfo_t c1_info{};
  ASSERT_EQ(NVML(nvmlComputeInstanceGetInfo_v2)(c1, &c1_info), NVML_SUCCESS);
  EXPECT_EQ(c1_info.device, gpu);
  EXPECT_EQ(c1_info.gpuInstance, three);
  EXPECT_EQ(c1_info.id, 1u);
  EXPECT_EQ(c1_info.profileId, 0u);
  EXPECT_EQ(c1_info.placement.start, 1u);
  EXPECT_EQ(c1_info.placement.size, 1u);
  nvmlComputeInstance_t cis[7] = {};
  ASSERT_EQ(NVML(nvmlGpuInstanceGetComputeInstances)(three, 0, cis, &n), NVML_SUCCESS);
  ASSERT_EQ(n, 2u);
  EXPECT_EQ(cis[0], c0);
  EXPECT_EQ(cis[1], c1);

  // Two MIG devices on the 3g.
  EXPECT_EQ(mig_devices(gpu).size(), 2u);
  EXPECT_EQ(NVML(nvmlGpuInstanceDestroy)(three), NVML_ERROR_IN_USE);
  ASSERT_EQ(NVML(nvmlComputeInstanceDestroy)(c0), NVML_SUCCESS);
  EXPECT_EQ(NVML(nvmlComputeInstanceGetInfo_v2)(c0, &c1_info), NVML_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(NVML(nvmlComputeInstanceDestroy)(c1), NVML_SUCCESS);
  ASSERT_EQ(NVML(nvmlGpuInstanceDestroy)(three), NVML_SUCCESS);
  EXPECT_EQ(NVML(nvmlGpuInstanceGetInfo)(three, &info), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(NVML(nvmlGpuInstanceDestroy)(three), NVML_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(NVML(nvmlGpuInstanceDestroy)(one), NVML_SUCCESS);
  EXPECT_TRUE(mig_devices(gpu).empty());
}

TEST_F(MigTest, SeventhOneSliceInstanceFillsTheGpu) {
  nvmlDevice_t gpu = Nvml::get().gpu(1);
  unsigned left = 0;
  ASSERT_EQ(NVML(nvmlDeviceGetGpuInstanceRemainingCapacity)(gpu, 19, &left), NVML_SUCCESS);
  EXPECT_EQ(left, 7u);
  std::set<unsigned> ids;
  for (int i = 0; i < 7; ++i) {
    nvmlGpuInstance_t gi = nullptr;
    ASSERT_EQ(NVML(nvmlDeviceCreateGpuInstance)(gpu, 19, &gi), NVML_SUCCESS) << i;
    ids.insert(gi_info(gi).id);
  }
  EXPECT_EQ(ids.size(), 7u);
  nvmlGpuInstance_t eighth = nullptr;
  EXPECT_EQ(NVML(nvmlDeviceCreateGpuInstance)(gpu, 19, &eighth), NVML_ERROR_INSUFFICIENT_RESOURCES);
  for (unsigned id : {19u, 15u, 14u, 0u}) {
    ASSERT_EQ(NVML(nvmlDeviceGetGpuInstanceRemainingCapacity)(gpu, id, &left), NVML_SUCCESS);
    EXPECT_EQ(left, 0u) << "profile ID " << id;
  }
  // The +me profile is one instance per GPU, and slice 7 is no 1g placement.
  nvmlGpuInstance_t gis[7] = {};
  unsigned n = 0;
  ASSERT_EQ(NVML(nvmlDeviceGetGpuInstances)(gpu, 19, gis, &n), NVML_SUCCESS);
  ASSERT_EQ(n, 7u);
  ASSERT_EQ(NVML(nvmlGpuInstanceDestroy)(gis[6]), NVML_SUCCESS);
  ASSERT_EQ(NVML(nvmlDeviceGetGpuInstanceRemainingCapacity)(gpu, 20, &left), NVML_SUCCESS);
  EXPECT_EQ(left, 1u);
  nvmlGpuInstance_t me = nullptr;
  ASSERT_EQ(NVML(nvmlDeviceCreateGpuInstance)(gpu, 20, &me), NVML_SUCCESS);
  EXPECT_EQ(NVML(nvmlDeviceGetGpuInstanceRemainingCapacity)(gpu, 20, &left), NVML_SUCCESS);
  EXPECT_EQ(left, 0u);
  // MIG off: nothing is made, so all seven fit (as the real driver answers).
  ASSERT_EQ(NVML(nvmlDeviceGetGpuInstanceRemainingCapacity)(Nvml::get().gpu(2), 19, &left),
            NVML_SUCCESS);
  EXPECT_EQ(left, 7u);
}

TEST_F(MigTest, PrePartitionedGpuEnumeratesItsMigDevices) {
  nvmlDevice_t gpu = Nvml::get().gpu(0);
  const std::vector<nvmlDevice_t> devs = mig_devices(gpu);
  ASSERT_EQ(devs.size(), 4u);
  nvmlDevice_t h = nullptr;
  EXPECT_EQ(NVML(nvmlDeviceGetMigDeviceHandleByIndex)(gpu, 4, &h), NVML_ERROR_NOT_FOUND);
  EXPECT_EQ(NVML(nvmlDeviceGetMigDeviceHandleByIndex)(gpu, 7, &h), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(NVML(nvmlDeviceGetMigDeviceHandleByIndex)(Nvml::get().gpu(2), 0, &h),
            NVML_ERROR_NOT_SUPPORTED);
  // By GI ID: 3g at slices 4-7, 2g at 0-1, 1g at 2 and 3.
  const char* names[] = {"NVIDIA H100 80GB HBM3 MIG 3g.40gb", "NVIDIA H100 80GB HBM3 MIG 2g.20gb",
                         "NVIDIA H100 80GB HBM3 MIG 1g.10gb", "NVIDIA H100 80GB HBM3 MIG 1g.10gb"};
  const unsigned long long mib[] = {40192, 20224, 9984, 9984};
  std::set<std::string> uuids;
  unsigned last_gi = 0;
  for (size_t i = 0; i < devs.size(); ++i) {
    unsigned is_mig = 0;
    ASSERT_EQ(NVML(nvmlDeviceIsMigDeviceHandle)(devs[i], &is_mig), NVML_SUCCESS);
    EXPECT_EQ(is_mig, 1u);
    const std::string uuid = uuid_of(devs[i]);
    EXPECT_TRUE(is_mig_uuid(uuid)) << uuid;
    uuids.insert(uuid);
    EXPECT_EQ(name_of(devs[i]), names[i]);
    nvmlMemory_t m{};
    ASSERT_EQ(NVML(nvmlDeviceGetMemoryInfo)(devs[i], &m), NVML_SUCCESS);
    EXPECT_EQ(m.total, mib[i] * kMiB) << names[i];
    EXPECT_EQ(m.used + m.free, m.total);
    unsigned gi = 0;
    unsigned ci = 9;
    ASSERT_EQ(NVML(nvmlDeviceGetGpuInstanceId)(devs[i], &gi), NVML_SUCCESS);
    ASSERT_EQ(NVML(nvmlDeviceGetComputeInstanceId)(devs[i], &ci), NVML_SUCCESS);
    EXPECT_EQ(ci, 0u);
    if (i > 0) {
      EXPECT_GT(gi, last_gi);
    }
    last_gi = gi;
    nvmlDevice_t parent = nullptr;
    ASSERT_EQ(NVML(nvmlDeviceGetDeviceHandleFromMigDeviceHandle)(devs[i], &parent), NVML_SUCCESS);
    EXPECT_EQ(parent, gpu);
    nvmlDevice_t by_uuid = nullptr;
    ASSERT_EQ(NVML(nvmlDeviceGetHandleByUUID)(uuid.c_str(), &by_uuid), NVML_SUCCESS);
    EXPECT_EQ(by_uuid, devs[i]);
  }
  EXPECT_EQ(uuids.size(), 4u);
  unsigned is_mig = 9;
  ASSERT_EQ(NVML(nvmlDeviceIsMigDeviceHandle)(gpu, &is_mig), NVML_SUCCESS);
  EXPECT_EQ(is_mig, 0u);
  unsigned id = 0;
  EXPECT_EQ(NVML(nvmlDeviceGetGpuInstanceId)(gpu, &id), NVML_ERROR_NOT_SUPPORTED);
  nvmlDevice_t parent = nullptr;
  EXPECT_EQ(NVML(nvmlDeviceGetDeviceHandleFromMigDeviceHandle)(gpu, &parent),
            NVML_ERROR_INVALID_ARGUMENT);
  nvmlPciInfo_t pci{};
  EXPECT_EQ(NVML(nvmlDeviceGetPciInfo_v3)(devs[0], &pci), NVML_ERROR_NOT_SUPPORTED);
}

// Another process (the MIG probe, mapping the state file itself) sees the
// instances this one made.
TEST_F(MigTest, AnotherProcessSeesTheSameInstances) {
  const Slice s = make_slice(Nvml::get().gpu(1), 14, NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE);
  auto r = hami::test::run_process({MIG_PROBE, "--nvml-library", SIMNVML});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr(s.uuid + " \"NVIDIA H200 MIG 2g.35gb\""));
  EXPECT_THAT(r.out, HasSubstr("GPU 2: mig mode current=disabled pending=disabled"));
}

// A child process that uses the simulated CUDA driver with `visible` as
// CUDA_VISIBLE_DEVICES and reports one line; it holds what it allocated
// until release().
class CudaChild {
 public:
  explicit CudaChild(const std::string& visible) {
    int up[2];
    int down[2];
    EXPECT_EQ(::pipe(up), 0);
    EXPECT_EQ(::pipe(down), 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(up[0]);
      ::close(down[1]);
      const std::string line = run(visible) + "\n";
      if (::write(up[1], line.data(), line.size()) < 0) ::_exit(3);
      char c;
      while (::read(down[0], &c, 1) > 0) {
      }
      ::_exit(0);
    }
    ::close(up[1]);
    ::close(down[0]);
    release_fd_ = down[1];
    char buf[512];
    ssize_t n;
    while ((n = ::read(up[0], buf, sizeof buf)) > 0) {
      report_.append(buf, static_cast<size_t>(n));
      if (report_.find('\n') != std::string::npos) break;
    }
    ::close(up[0]);
  }
  ~CudaChild() { release(); }
  const std::string& report() const { return report_; }
  // "key=value" of the report.
  std::string get(const std::string& key) const {
    const std::string line = " " + report_.substr(0, report_.find('\n'));
    const size_t at = line.find(" " + key + "=");
    if (at == std::string::npos) return "";
    const size_t from = at + key.size() + 2;
    return line.substr(from, line.find(' ', from) - from);
  }
  void release() {
    if (pid_ <= 0) return;
    ::close(release_fd_);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    pid_ = 0;
  }

 private:
  // In the child: what the driver shows, then 1 GiB allocations until refused.
  static std::string run(const std::string& visible) {
    using namespace hami::cuda;  // NOLINT
    if (visible.empty()) {
      ::unsetenv("CUDA_VISIBLE_DEVICES");
    } else {
      ::setenv("CUDA_VISIBLE_DEVICES", visible.c_str(), 1);
    }
    void* lib = ::dlopen(SIMCUDA, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return "error=dlopen";
    auto sym = [&](const char* n) { return ::dlsym(lib, n); };
    auto init = reinterpret_cast<CUresult (*)(unsigned)>(sym("cuInit"));
    auto count = reinterpret_cast<CUresult (*)(int*)>(sym("cuDeviceGetCount"));
    auto total = reinterpret_cast<CUresult (*)(size_t*, CUdevice)>(sym("cuDeviceTotalMem_v2"));
    auto attr = reinterpret_cast<CUresult (*)(int*, int, CUdevice)>(sym("cuDeviceGetAttribute"));
    auto name = reinterpret_cast<CUresult (*)(char*, int, CUdevice)>(sym("cuDeviceGetName"));
    auto uuid = reinterpret_cast<CUresult (*)(CUuuid*, CUdevice)>(sym("cuDeviceGetUuid_v2"));
    auto retain =
        reinterpret_cast<CUresult (*)(CUcontext*, CUdevice)>(sym("cuDevicePrimaryCtxRetain"));
    auto current = reinterpret_cast<CUresult (*)(CUcontext)>(sym("cuCtxSetCurrent"));
    auto info = reinterpret_cast<CUresult (*)(size_t*, size_t*)>(sym("cuMemGetInfo_v2"));
    auto alloc = reinterpret_cast<CUresult (*)(CUdeviceptr*, size_t)>(sym("cuMemAlloc_v2"));
    int n = 0;
    if (init(0) != CUDA_SUCCESS || count(&n) != CUDA_SUCCESS) return "error=init";
    std::ostringstream out;
    out << "count=" << n;
    if (n == 0) return out.str();
    size_t bytes = 0;
    int sms = 0;
    char model[128] = {};
    CUuuid id{};
    total(&bytes, 0);
    attr(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0);
    name(model, sizeof model, 0);
    uuid(&id, 0);
    std::string model_name = model;
    for (char& c : model_name) {
      if (c == ' ') c = '_';
    }
    char hex[8];
    std::snprintf(hex, sizeof hex, "%02x%02x", static_cast<unsigned char>(id.bytes[0]),
                  static_cast<unsigned char>(id.bytes[1]));
    out << " total_mib=" << (bytes >> 20) << " sms=" << sms << " name=" << model_name
        << " uuid4=" << hex;
    CUcontext ctx = nullptr;
    if (retain(&ctx, 0) != CUDA_SUCCESS || current(ctx) != CUDA_SUCCESS)
      return out.str() + " error=ctx";
    size_t free = 0;
    size_t t = 0;
    info(&free, &t);
    out << " info_total_mib=" << (t >> 20);
    int got = 0;
    CUdeviceptr p = 0;
    while (got < 1000 && alloc(&p, 1ull << 30) == CUDA_SUCCESS)
      ++got;
    out << " gib=" << got;
    return out.str();
  }

  pid_t pid_ = -1;
  int release_fd_ = -1;
  std::string report_;
};

TEST_F(MigTest, CudaSeesAMigDeviceAsItsSlice) {
  Nvml::get();
  const Slice s = make_slice(Nvml::get().gpu(1), 19, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE);
  {
    CudaChild child(s.uuid);
    EXPECT_EQ(child.get("count"), "1") << child.report();
    EXPECT_EQ(child.get("total_mib"), "16384");  // the H200's 1g.18gb
    EXPECT_EQ(child.get("info_total_mib"), "16384");
    EXPECT_EQ(child.get("sms"), "16");
    EXPECT_EQ(child.get("name"), "NVIDIA_H200_MIG_1g.18gb");
    EXPECT_EQ(child.get("uuid4"), s.uuid.substr(4, 4));
    // 16 GiB less the 300 MiB context: 15 whole GiB, however free the GPU.
    EXPECT_EQ(child.get("gib"), "15");

    // NVML sees the slice's memory taken, on the MIG device and on its GPU.
    nvmlMemory_t m{};
    ASSERT_EQ(NVML(nvmlDeviceGetMemoryInfo)(s.device, &m), NVML_SUCCESS);
    EXPECT_EQ(m.used, (15ull << 30) + (300ull << 20));
    nvmlMemory_t g{};
    ASSERT_EQ(NVML(nvmlDeviceGetMemoryInfo)(Nvml::get().gpu(1), &g), NVML_SUCCESS);
    EXPECT_EQ(g.used, m.used);
    nvmlProcessInfo_t procs[4] = {};
    unsigned n = 4;
    ASSERT_EQ(NVML(nvmlDeviceGetComputeRunningProcesses_v3)(s.device, &n, procs), NVML_SUCCESS);
    ASSERT_EQ(n, 1u);
    EXPECT_EQ(procs[0].usedGpuMemory, m.used);
    EXPECT_EQ(procs[0].gpuInstanceId, gi_info(s.gi).id);
    EXPECT_EQ(procs[0].computeInstanceId, 0u);
    EXPECT_EQ(NVML(nvmlComputeInstanceDestroy)(s.ci), NVML_ERROR_IN_USE);
  }
  // Its memory went with it.
  EXPECT_EQ(NVML(nvmlComputeInstanceDestroy)(s.ci), NVML_SUCCESS);
}

TEST_F(MigTest, CudaEnumeratesOneMigDeviceAtMost) {
  const std::vector<nvmlDevice_t> gpu0 = mig_devices(Nvml::get().gpu(0));
  ASSERT_EQ(gpu0.size(), 4u);
  {
    // Two MIG devices named: the first only.
    CudaChild child(uuid_of(gpu0[2]) + "," + uuid_of(gpu0[0]));
    EXPECT_EQ(child.get("count"), "1") << child.report();
    EXPECT_EQ(child.get("total_mib"), "9984");
    EXPECT_EQ(child.get("sms"), "16");
    EXPECT_EQ(child.get("gib"), "9");
  }
  {
    // Nothing named: GPU 0 as its first MIG device (the 3g), GPU 1 (no MIG
    // devices) not at all, GPUs 2 and 3 whole.
    CudaChild child("");
    EXPECT_EQ(child.get("count"), "3") << child.report();
    EXPECT_EQ(child.get("total_mib"), "40192");
    EXPECT_EQ(child.get("sms"), "60");
    EXPECT_EQ(child.get("name"), "NVIDIA_H100_80GB_HBM3_MIG_3g.40gb");
  }
  {
    CudaChild child("MIG-00000000-0000-4000-8000-000000000000");
    EXPECT_EQ(child.get("count"), "0") << child.report();
  }
}

}  // namespace
