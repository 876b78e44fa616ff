// Which kernels the DutyGate counts: collectives' by name, looked up once
// per handle.
#include "vgpu/limiter/collective_kernels.hpp"

#include <gtest/gtest.h>

#include <map>

namespace hami::vgpu::limiter {
namespace {

TEST(CollectiveKernels, KnowsCollectivesByName) {
  for (const char* name :
       {"ncclDevKernel_AllReduce_Sum_f32_RING_LL",  // NCCL 2.19 and later
        "ncclKernel_AllGather_RING_LL_Sum_int8_t",  // before 2.19
        "ncclDevKernel_SendRecv",
        "_ZN4vllm25cross_device_reduce_1stageIN3c104HalfELi2EEEvPNS_8RankDataENS_"
        "11RankSignalsEPNS_6SignalEPT_ii",
        "_ZN12tensorrt_llm7kernels22oneShotAllReduceKernelIfLi8EEEvNS0_12AllReduceParamsE",
        "_ZN2at6native12_GLOBAL__N_126one_shot_all_reduce_kernelIfLi16ELi2EEEvPPT_mS4_",
        "reduce_scatter_kernel"}) {
    EXPECT_TRUE(collective_kernel_name(name)) << name;
  }
  for (const char* name :
       {"_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_"
        "6detail5ArrayIPcLi1EEEEEviT0_T1_",
        "ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_tn", "flash_fwd_kernel", "", "reduce_kernel",
        "all_gather_not"}) {
    // "all_gather_not" names a collective all the same: the fragments match
    // anywhere in a name, mangled or not.
    EXPECT_EQ(collective_kernel_name(name), std::string_view(name) == "all_gather_not") << name;
  }
}

std::map<uintptr_t, const char*> g_names;
int g_lookups = 0;
const char* fake_name_of(uintptr_t handle) {
  ++g_lookups;
  const auto it = g_names.find(handle);
  return it != g_names.end() ? it->second : nullptr;
}

TEST(CollectiveKernels, LooksEachHandleUpOnce) {
  g_names = {{0x1000, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"}, {0x2000, "gemm"}};
  g_lookups = 0;
  CollectiveKernels kinds(&fake_name_of);
  EXPECT_FALSE(kinds.is_collective(0));  // no handle: no lookup
  EXPECT_EQ(g_lookups, 0);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(kinds.is_collective(0x1000));
    EXPECT_FALSE(kinds.is_collective(0x2000));
    EXPECT_FALSE(kinds.is_collective(0x3000));  // the driver cannot name it
  }
  EXPECT_EQ(g_lookups, 3);
  EXPECT_EQ(kinds.cached(), 3u);
}

TEST(CollectiveKernels, AFullTableStillAnswers) {
  g_names.clear();
  for (uintptr_t h = 1; h <= CollectiveKernels::kCapacity + 64; ++h)
    g_names[h * 64] = h % 2 == 0 ? "ncclDevKernel_Broadcast" : "elementwise";
  CollectiveKernels kinds(&fake_name_of);
  for (int round = 0; round < 2; ++round) {
    for (uintptr_t h = 1; h <= CollectiveKernels::kCapacity + 64; ++h)
      ASSERT_EQ(kinds.is_collective(h * 64), h % 2 == 0) << h;
  }
  EXPECT_LE(kinds.cached(), CollectiveKernels::kCapacity);
}

}  // namespace
}  // namespace hami::vgpu::limiter
