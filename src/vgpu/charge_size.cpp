#include "vgpu/charge_size.hpp"

#include <algorithm>

namespace hami::vgpu {
namespace {

uint64_t mul_sat(uint64_t a, uint64_t b) {
  if (a != 0 && b > UINT64_MAX / a) return UINT64_MAX;
  return a * b;
}

}  // namespace

uint64_t array_element_bytes(cuda::CUarray_format format) {
  switch (format) {
    case 0x01:  // UNSIGNED_INT8
    case 0x08:  // SIGNED_INT8
      return 1;
    case 0x02:  // UNSIGNED_INT16
    case 0x09:  // SIGNED_INT16
    case 0x10:  // HALF
      return 2;
    case 0x03:  // UNSIGNED_INT32
    case 0x0a:  // SIGNED_INT32
    case 0x20:  // FLOAT
      return 4;
    default:
      return 4;
  }
}

uint64_t estimate_array(const cuda::CUDA_ARRAY3D_DESCRIPTOR& d) {
  uint64_t n = mul_sat(std::max<uint64_t>(d.Width, 1), std::max<uint64_t>(d.Height, 1));
  n = mul_sat(n, std::max<uint64_t>(d.Depth, 1));
  n = mul_sat(n, std::max<uint64_t>(d.NumChannels, 1));
  return round_up(mul_sat(n, array_element_bytes(d.Format)), kSmallAlign);
}

uint64_t estimate_array(const cuda::CUDA_ARRAY_DESCRIPTOR& d) {
  return estimate_array(
      cuda::CUDA_ARRAY3D_DESCRIPTOR{d.Width, d.Height, 0, d.Format, d.NumChannels, 0});
}

uint64_t estimate_mipmapped_array(const cuda::CUDA_ARRAY3D_DESCRIPTOR& d, unsigned levels) {
  cuda::CUDA_ARRAY3D_DESCRIPTOR level = d;
  uint64_t sum = 0;
  for (unsigned l = 0; l < std::max(levels, 1u); ++l) {
    const uint64_t bytes = estimate_array(level);
    sum = sum > UINT64_MAX - bytes ? UINT64_MAX : sum + bytes;
    if (level.Width <= 1 && level.Height <= 1 && level.Depth <= 1) break;
    level.Width = std::max<size_t>(level.Width / 2, 1);
    if (level.Height > 0) level.Height = std::max<size_t>(level.Height / 2, 1);
    if (level.Depth > 0) level.Depth = std::max<size_t>(level.Depth / 2, 1);
  }
  return sum;
}

}  // namespace hami::vgpu
