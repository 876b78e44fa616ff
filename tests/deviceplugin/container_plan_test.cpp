// What one container is given (env, mounts) and the host files behind it.
#include "deviceplugin/container_plan.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "deviceplugin/host_files.hpp"
#include "region/control_file.hpp"
#include "support/object_text.hpp"
#include "support/temp_dir.hpp"

namespace hami::deviceplugin {
namespace {

using test::slurp;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

PlanInput input(const std::string& hook) {
  PlanInput in;
  in.hook_path = hook;
  in.lock_dir = hook + "/vgpulock";
  in.pod_uid = "0b5c8e7e-1111-4222-8333-444455556666";
  in.container = "main";
  in.gpus = {{"GPU-b", 3000, 30}, {"GPU-c", 3000, 30}};
  in.cache_name = "x.cache";
  return in;
}

TEST(ContainerPlan, EnvIsWhatTheLibraryReads) {
  PluginConfig cfg;
  PlanInput in = input("/usr/local");
  in.priority = 0;
  auto p = plan_container(in, cfg);
  ASSERT_TRUE(p) << p.error().message;
  const std::map<std::string, std::string> want = {
      {"NVIDIA_VISIBLE_DEVICES", "GPU-b,GPU-c"},
      {"CUDA_DEVICE_MEMORY_LIMIT_0", "3000m"},
      {"CUDA_DEVICE_MEMORY_LIMIT_1", "3000m"},
      {"CUDA_DEVICE_SM_LIMIT", "30"},
      {"CUDA_TASK_PRIORITY", "0"},
      {"CUDA_DEVICE_MEMORY_SHARED_CACHE", "/usr/local/vgpu/x.cache"}};
  EXPECT_EQ(p->envs, want);
  EXPECT_EQ(p->limits_text,
            "# written by hami-device-plugin for pod 0b5c8e7e-1111-4222-8333-444455556666, "
            "container main\n"
            "CUDA_DEVICE_MEMORY_LIMIT_0=3000m\nCUDA_DEVICE_MEMORY_LIMIT_1=3000m\n"
            "CUDA_DEVICE_SM_LIMIT=30\nCUDA_TASK_PRIORITY=0\n"
            "CUDA_DEVICE_MEMORY_SHARED_CACHE=/usr/local/vgpu/x.cache\n"
            "VGPU_DEVICE_UUID_0=GPU-b\nVGPU_DEVICE_UUID_1=GPU-c\n");
}

TEST(ContainerPlan, ConfigAddsUpstreamsOptionalEnv) {
  PluginConfig cfg;
  cfg.disable_core_limit = true;
  cfg.device_memory_scaling = 2;
  cfg.lib_cuda_log_level = 2;
  PlanInput in = input("/usr/local");
  in.gpus = {{"GPU-b", 100, 150}};  // core scaling > 1 lets the scheduler hand out > 100
  auto p = plan_container(in, cfg);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->envs.at("GPU_CORE_UTILIZATION_POLICY"), "disable");
  EXPECT_EQ(p->envs.at("CUDA_OVERSUBSCRIBE"), "true");
  EXPECT_EQ(p->envs.at("LIBCUDA_LOG_LEVEL"), "2");
  EXPECT_EQ(p->envs.at("CUDA_DEVICE_SM_LIMIT"), "100");
  EXPECT_THAT(p->limits_text, HasSubstr("GPU_CORE_UTILIZATION_POLICY=disable\n"));
  EXPECT_EQ(p->envs.count("CUDA_TASK_PRIORITY"), 0u);
}

// The webhook puts gpuCorePolicy into the container's environment; once the
// limits file is mounted the library reads only the file, so the plan carries
// the policy there (the node's --disable-core-limit still wins).
TEST(ContainerPlan, PodsCorePolicyGoesIntoTheLimitsFile) {
  PluginConfig cfg;
  PlanInput in = input("/usr/local");
  in.core_policy = "Force";
  auto p = plan_container(in, cfg);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_THAT(p->limits_text, HasSubstr("GPU_CORE_UTILIZATION_POLICY=force\n"));
  EXPECT_EQ(p->envs.at("GPU_CORE_UTILIZATION_POLICY"), "force");

  cfg.disable_core_limit = true;
  p = plan_container(in, cfg);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_THAT(p->limits_text, HasSubstr("GPU_CORE_UTILIZATION_POLICY=disable\n"));
  EXPECT_THAT(p->limits_text, Not(HasSubstr("force")));

  cfg.disable_core_limit = false;
  in.core_policy = "force\nCUDA_DEVICE_SM_LIMIT=100";
  p = plan_container(in, cfg);
  ASSERT_FALSE(p);
  EXPECT_THAT(p.error().message, HasSubstr("is not force, default or disable"));
}

TEST(ContainerPlan, MountsFollowTheHookPathLayout) {
  PluginConfig cfg;
  auto p = plan_container(input("/usr/local"), cfg);
  ASSERT_TRUE(p) << p.error().message;
  const std::string key = "0b5c8e7e-1111-4222-8333-444455556666_main";
  EXPECT_THAT(
      p->mounts,
      ElementsAre(MountSpec{"/usr/local/vgpu/libvgpu.so", "/usr/local/vgpu/libvgpu.so", true},
                  MountSpec{"/usr/local/vgpu", "/usr/local/vgpu/containers/" + key, false},
                  MountSpec{"/tmp/vgpulock", "/usr/local/vgpulock", false},
                  MountSpec{"/etc/ld.so.preload", "/usr/local/vgpu/ld.so.preload", true},
                  MountSpec{"/etc/vgpu/limits.d", "/usr/local/vgpu/limits/" + key, true},
                  MountSpec{"/etc/vgpu/control", "/usr/local/vgpu/control/" + key, true}));
}

TEST(ContainerPlan, DisableControlDropsOnlyThePreload) {
  PluginConfig cfg;
  PlanInput in = input("/usr/local");
  in.disable_control = true;
  auto p = plan_container(in, cfg);
  ASSERT_TRUE(p) << p.error().message;
  ASSERT_EQ(p->mounts.size(), 5u);
  for (const auto& m : p->mounts)
    EXPECT_NE(m.container_path, "/etc/ld.so.preload");
  EXPECT_EQ(p->envs.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "3000m");
}

TEST(ContainerPlan, RefusesWhatCannotBeServedSafely) {
  PluginConfig cfg;
  PlanInput in = input("/usr/local");
  in.container = "../etc";
  EXPECT_THAT(plan_container(in, cfg).error().message, HasSubstr("cannot name a host directory"));
  in = input("/usr/local");
  in.pod_uid = "a/b";
  EXPECT_FALSE(plan_container(in, cfg));
  in = input("relative");
  EXPECT_THAT(plan_container(in, cfg).error().message, HasSubstr("not an absolute path"));
  in = input("/usr/local");
  in.gpus.clear();
  EXPECT_THAT(plan_container(in, cfg).error().message, HasSubstr("no GPUs"));
  in = input("/usr/local");
  in.priority = 5;
  EXPECT_THAT(plan_container(in, cfg).error().message, HasSubstr("not 0 (high) or 1 (low)"));
}

// One MPS pod and one time-sliced pod, same request, side by side: the MPS
// one is an MPS client with its share and memory for the server, keeps the
// library for the memory limit and the virtual GPU, and has no SM pacing.
TEST(ContainerPlan, MpsAndTimeslicePodsSideBySide) {
  PluginConfig cfg;
  PlanInput ts = input("/usr/local");
  ts.gpus = {{"GPU-b", 4096, 30, SharingMode::kTimeslice}};
  PlanInput mps = input("/usr/local");
  mps.container = "serve";
  mps.gpus = {{"GPU-c", 4096, 30, SharingMode::kMps}};
  auto t = plan_container(ts, cfg);
  auto m = plan_container(mps, cfg);
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_TRUE(m) << m.error().message;

  EXPECT_EQ(t->envs.at("CUDA_DEVICE_SM_LIMIT"), "30");
  for (const char* k : {"CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
                        "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"})
    EXPECT_EQ(t->envs.count(k), 0u) << k;
  EXPECT_TRUE(t->mps_pipe_dir.empty());
  EXPECT_EQ(t->mounts.size(), 6u);

  const std::map<std::string, std::string> want = {
      {"NVIDIA_VISIBLE_DEVICES", "GPU-c"},
      {"CUDA_DEVICE_MEMORY_LIMIT_0", "4096m"},
      {"CUDA_DEVICE_MEMORY_SHARED_CACHE", "/usr/local/vgpu/x.cache"},
      {"CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"},
      {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "30"},
      {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=4096M"},
      // The contract's rule (protocol/container_contract.hpp), as `vgpu run
      // --sharing mps` has it: the library never paces an MPS client.
      {"GPU_CORE_UTILIZATION_POLICY", "disable"}};
  EXPECT_EQ(m->envs, want);
  EXPECT_THAT(m->limits_text, HasSubstr("GPU_CORE_UTILIZATION_POLICY=disable\n"));
  EXPECT_THAT(m->limits_text, Not(HasSubstr("CUDA_DEVICE_SM_LIMIT")));
  EXPECT_THAT(t->limits_text, Not(HasSubstr("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")));
  EXPECT_THAT(m->limits_text, HasSubstr("CUDA_DEVICE_MEMORY_LIMIT_0=4096m\n"));
  EXPECT_EQ(m->mps_pipe_dir, "/usr/local/vgpu/mps/GPU-c/pipe");
  ASSERT_EQ(m->mounts.size(), 7u);
  EXPECT_EQ(m->mounts[0], (MountSpec{"/usr/local/vgpu/libvgpu.so", "/usr/local/vgpu/libvgpu.so",
                                     true}));  // the library stays
  EXPECT_EQ(m->mounts.back(),
            (MountSpec{"/tmp/nvidia-mps", "/usr/local/vgpu/mps/GPU-c/pipe", false}));
}

TEST(ContainerPlan, MpsShareOfZeroOrAllIsTheWholeGpu) {
  PluginConfig cfg;
  for (int cores : {0, 100, 150}) {
    PlanInput in = input("/usr/local");
    in.gpus = {{"GPU-c", 0, cores, SharingMode::kMps}};
    auto p = plan_container(in, cfg);
    ASSERT_TRUE(p) << p.error().message;
    EXPECT_EQ(p->envs.count("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), 0u) << cores;
    // No memory given: no pinned limit either (the library has none to keep).
    EXPECT_EQ(p->envs.count("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), 0u) << cores;
    EXPECT_EQ(p->envs.count("CUDA_DEVICE_SM_LIMIT"), 0u) << cores;
    EXPECT_EQ(p->envs.at("CUDA_MPS_PIPE_DIRECTORY"), "/tmp/nvidia-mps");
  }
}

TEST(ContainerPlan, AHighPriorityMpsContainerIsNotCappedButLowOnesAre) {
  PluginConfig cfg;
  PlanInput in = input("/usr/local");
  in.gpus = {{"GPU-c", 4000, 30, SharingMode::kMps}};
  in.priority = 0;
  auto high = plan_container(in, cfg);
  ASSERT_TRUE(high) << high.error().message;
  EXPECT_EQ(high->envs.count("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), 0u);
  EXPECT_EQ(high->envs.at("CUDA_TASK_PRIORITY"), "0");
  EXPECT_EQ(high->envs.at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=4000M");
  in.priority = 1;
  auto low = plan_container(in, cfg);
  ASSERT_TRUE(low) << low.error().message;
  EXPECT_EQ(low->envs.at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "30");
  // The record tells the node agent the container is an MPS client and its
  // cap (100 for none), the variable set or not.
  EXPECT_THAT(high->limits_text, HasSubstr("\nCUDA_MPS_ACTIVE_THREAD_PERCENTAGE=100\n"));
  EXPECT_THAT(low->limits_text, HasSubstr("\nCUDA_MPS_ACTIVE_THREAD_PERCENTAGE=30\n"));
}

TEST(ContainerPlan, MpsContainerGetsExactlyOneGpu) {
  PluginConfig cfg;
  PlanInput in = input("/usr/local");
  in.gpus = {{"GPU-b", 3000, 30, SharingMode::kTimeslice}, {"GPU-c", 3000, 30, SharingMode::kMps}};
  auto p = plan_container(in, cfg);
  ASSERT_FALSE(p);
  EXPECT_THAT(p.error().message, HasSubstr("gets exactly one GPU"));
  in.gpus = {{"../x", 3000, 30, SharingMode::kMps}};
  EXPECT_THAT(plan_container(in, cfg).error().message, HasSubstr("cannot name a host directory"));
}

TEST(HostFiles, MpsPipeDirectoryMustBeThere) {
  test::TempDir dir;
  std::filesystem::create_directories(dir.file("vgpu"));
  std::ofstream(dir.file("vgpu/libvgpu.so")) << "ELF";
  PluginConfig cfg;
  PlanInput in = input(dir.path());
  in.gpus = {{"GPU-c", 3000, 30, SharingMode::kMps}};
  auto p = plan_container(in, cfg);
  ASSERT_TRUE(p) << p.error().message;
  auto r = prepare_host(*p);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message, HasSubstr("MPS control daemon is not running"));
  EXPECT_THAT(r.error().message, HasSubstr(dir.path() + "/vgpu/mps/GPU-c/pipe"));
  // Once the daemon has made it, the container can be served.
  std::filesystem::create_directories(p->mps_pipe_dir);
  r = prepare_host(*p);
  EXPECT_TRUE(r) << r.error().message;
}

TEST(HostFiles, PreparesDirectoryLimitsFileAndPreload) {
  test::TempDir dir;
  std::filesystem::create_directories(dir.file("vgpu"));
  std::ofstream(dir.file("vgpu/libvgpu.so")) << "ELF";
  PluginConfig cfg;
  auto p = plan_container(input(dir.path()), cfg);
  ASSERT_TRUE(p) << p.error().message;
  // A previous instance's state must not survive into the new container.
  std::filesystem::create_directories(p->container_dir);
  std::ofstream(p->container_dir + "/old.cache") << "stale";
  auto r = prepare_host(*p);
  ASSERT_TRUE(r) << r.error().message;
  struct stat st {};
  ASSERT_EQ(::stat(p->container_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0777u);
  EXPECT_FALSE(std::filesystem::exists(p->container_dir + "/old.cache"));
  EXPECT_EQ(slurp(p->limits_file), p->limits_text);
  ASSERT_EQ(::stat(p->limits_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  EXPECT_EQ(slurp(p->preload_file), p->library + "\n");
  EXPECT_TRUE(std::filesystem::is_directory(p->lock_dir));
  // The limits and control files are outside what the container can write.
  EXPECT_EQ(p->limits_file.rfind(p->container_dir, 0), std::string::npos);
  EXPECT_EQ(p->control_file.rfind(p->container_dir, 0), std::string::npos);
  // A fresh control file: the share enforced, nothing blocked, for the agent to rewrite.
  EXPECT_EQ(slurp(p->control_file), region::control_file_bytes());
  ASSERT_EQ(::stat(p->control_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

TEST(HostFiles, MissingLibraryIsAnError) {
  test::TempDir dir;
  PluginConfig cfg;
  auto p = plan_container(input(dir.path()), cfg);
  ASSERT_TRUE(p);
  auto r = prepare_host(*p);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message, HasSubstr("libvgpu.so is missing"));
}

}  // namespace
}  // namespace hami::deviceplugin
