// libvgpu.so inside a MIG device (docs/mig.md): a container given
// NVIDIA_VISIBLE_DEVICES=MIG-<uuid> sees one CUDA device, the slice, whose
// UUID the driver reports with the MIG device's bytes. The limits file names
// the device by its MIG-<uuid>, as the device plugin writes it: the memory
// limit holds within the slice, and CUDA (cuDeviceTotalMem, cuMemGetInfo) and
// NVML (the GPU the slice is on) show the limit, or the slice where the limit
// is larger. The simulated node: an H100 80GB partitioned 3g.40gb, 1g.10gb.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "nvml/nvml_abi.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"
#include "vgpu/client_env.hpp"
#include "vgpu/client_output.hpp"

namespace hami::vgpu {
namespace {

using namespace hami::nvml::abi;  // NOLINT: nvml.h's names
using test::find_op;
using test::num;
using test::rc_of;

constexpr uint64_t MiB = 1ull << 20;
constexpr const char* kGpu = "GPU-7c3e0000-0000-4000-8000-0000000000a0";

class MigContainer : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("SIMGPU_STATE", dir_.file("gpu.state").c_str(), 1);
    ::setenv("SIMGPU_DEVICES", (std::string(kGpu) + ":80g").c_str(), 1);
    ::setenv("SIMGPU_NAMES", "NVIDIA H100 80GB HBM3", 1);
    ::setenv("SIMGPU_MIG", "0:3g.40gb,1g.10gb", 1);
    ::setenv("SIMGPU_CONTEXT_SIZE", "0", 1);  // read when the state file is made, here
    migs_ = mig_uuids();
    ASSERT_EQ(migs_.size(), 2u);
  }

  // The GPU's MIG devices, as the device plugin reads them.
  static std::vector<std::string> mig_uuids() {
    void* lib = ::dlopen((std::string(SIMGPU_LIB_DIR) + "/libnvidia-ml.so.1").c_str(),
                         RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(lib, nullptr) << ::dlerror();
    if (lib == nullptr) return {};
    auto sym = [&](const char* n) { return ::dlsym(lib, n); };
    auto init = reinterpret_cast<nvmlReturn_t (*)()>(sym("nvmlInit_v2"));
    auto by_index = reinterpret_cast<nvmlReturn_t (*)(unsigned, nvmlDevice_t*)>(
        sym("nvmlDeviceGetHandleByIndex_v2"));
    auto mig = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, unsigned, nvmlDevice_t*)>(
        sym("nvmlDeviceGetMigDeviceHandleByIndex"));
    auto uuid =
        reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned)>(sym("nvmlDeviceGetUUID"));
    auto shutdown = reinterpret_cast<nvmlReturn_t (*)()>(sym("nvmlShutdown"));
    std::vector<std::string> out;
    nvmlDevice_t gpu = nullptr;
    if (init() == NVML_SUCCESS && by_index(0, &gpu) == NVML_SUCCESS) {
      for (unsigned i = 0; i < 7; ++i) {
        nvmlDevice_t m = nullptr;
        char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
        if (mig(gpu, i, &m) != NVML_SUCCESS || uuid(m, buf, sizeof buf) != NVML_SUCCESS) break;
        out.emplace_back(buf);
      }
      shutdown();
    }
    ::dlclose(lib);
    return out;
  }

  // The limits file the device plugin writes for one MIG device.
  std::string limits(const std::string& memory, const std::string& uuid) const {
    const std::string path = dir_.file("limits");
    std::ofstream(path) << "# test\nCUDA_DEVICE_MEMORY_LIMIT_0=" << memory
                        << "\nCUDA_DEVICE_MEMORY_SHARED_CACHE=" << dir_.file("vgpu.cache")
                        << "\nVGPU_DEVICE_UUID_0=" << uuid << "\n";
    return path;
  }

  test::ProcessResult run(std::vector<std::string> ops, const std::string& limits_file,
                          const std::string& visible) const {
    ops.insert(ops.begin(), CUDA_CLIENT);
    return test::run_process(ops, test::client_env(dir_, {{"VGPU_LIMITS_FILE", limits_file},
                                                          {"CUDA_VISIBLE_DEVICES", visible}}));
  }

  test::TempDir dir_;
  std::vector<std::string> migs_;
};

TEST_F(MigContainer, TheLimitHoldsWithinTheSliceAndEveryViewShowsIt) {
  const std::string small = migs_[1];  // 1g.10gb: 9984 MiB
  const auto r = run({"init", "ctx:0", "totalmem:0", "meminfo", "nvml:0", "alloc:3000m",
                      "alloc:900m", "meminfo", "nvml:0", "alloc:200m"},
                     limits("4000m", small), small);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(num(find_op(r.out, "totalmem:0"), "total"), 4000 * MiB);
  EXPECT_EQ(num(find_op(r.out, "meminfo", 0), "total"), 4000 * MiB);
  // NVML lists the GPU the slice is on; it shows the container's limit.
  EXPECT_EQ(num(find_op(r.out, "nvml:0", 0), "total"), 4000 * MiB) << r.out;
  EXPECT_EQ(rc_of(r.out, "alloc:3000m"), 0);
  EXPECT_EQ(rc_of(r.out, "alloc:900m"), 0);
  EXPECT_EQ(num(find_op(r.out, "meminfo", 1), "free"), 100 * MiB);
  EXPECT_EQ(num(find_op(r.out, "nvml:0", 1), "used"), 3900 * MiB);
  EXPECT_EQ(rc_of(r.out, "alloc:200m"), 2) << "past the 4000 MiB limit, inside the slice";
}

TEST_F(MigContainer, ALimitLargerThanTheSliceShowsTheSlice) {
  const std::string small = migs_[1];
  const auto r = run({"init", "ctx:0", "totalmem:0", "meminfo", "alloc:9000m", "alloc:1000m"},
                     limits("20000m", small), small);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(num(find_op(r.out, "totalmem:0"), "total"), 9984 * MiB);
  EXPECT_EQ(num(find_op(r.out, "meminfo", 0), "total"), 9984 * MiB);
  EXPECT_EQ(rc_of(r.out, "alloc:9000m"), 0);
  EXPECT_EQ(rc_of(r.out, "alloc:1000m"), 2) << "the slice itself is full";
}

}  // namespace
}  // namespace hami::vgpu
