#include "vgpu/charge_size.hpp"

#include <gtest/gtest.h>

namespace hami::vgpu {
namespace {

constexpr uint64_t MiB = 1ull << 20;

TEST(ChargeSize, LinearAllocationsAtDriverGranularity) {
  EXPECT_EQ(charge_for_linear(1), 512u);
  EXPECT_EQ(charge_for_linear(513), 1024u);
  EXPECT_EQ(charge_for_linear(MiB - 1), MiB);  // small: 512-byte steps
  EXPECT_EQ(charge_for_linear(MiB), 2 * MiB);  // from 1 MiB on: 2 MiB pages
  EXPECT_EQ(charge_for_linear(2 * MiB), 2 * MiB);
  EXPECT_EQ(charge_for_linear(3 * MiB), 4 * MiB);
  EXPECT_EQ(charge_for_linear(UINT64_MAX), UINT64_MAX);  // saturates, never wraps
}

TEST(ChargeSize, ArrayEstimates) {
  cuda::CUDA_ARRAY_DESCRIPTOR d{1024, 1024, 0x20, 1};  // float
  EXPECT_EQ(estimate_array(d), 4 * MiB);
  cuda::CUDA_ARRAY3D_DESCRIPTOR d3{64, 64, 64, 0x01, 4, 0};  // uchar4
  EXPECT_EQ(estimate_array(d3), 64u * 64 * 64 * 4);
  cuda::CUDA_ARRAY_DESCRIPTOR one_d{1000, 0, 0x10, 2};  // half2, height 0 = 1D
  EXPECT_EQ(estimate_array(one_d), 4096u);
  cuda::CUDA_ARRAY3D_DESCRIPTOR huge{~size_t{0}, ~size_t{0}, 2, 0x20, 4, 0};
  EXPECT_EQ(estimate_array(huge), UINT64_MAX);
}

TEST(ChargeSize, MipmapChains) {
  cuda::CUDA_ARRAY3D_DESCRIPTOR d{4096, 4096, 0, 0x20, 1, 0};
  EXPECT_EQ(estimate_mipmapped_array(d, 1), 64 * MiB);
  EXPECT_EQ(estimate_mipmapped_array(d, 2), 80 * MiB);  // 64 + 16
  EXPECT_EQ(estimate_mipmapped_array(d, 0), 64 * MiB);
  cuda::CUDA_ARRAY3D_DESCRIPTOR tiny{2, 2, 0, 0x01, 1, 0};
  EXPECT_EQ(estimate_mipmapped_array(tiny, 30), 2 * 512u);     // 2x2 and 1x1, then stops
  cuda::CUDA_ARRAY3D_DESCRIPTOR line{1024, 0, 0, 0x20, 1, 0};  // 1D: 4096 + 2048 + 1024 bytes
  EXPECT_EQ(estimate_mipmapped_array(line, 3), 4096u + 2048 + 1024);
}

}  // namespace
}  // namespace hami::vgpu
