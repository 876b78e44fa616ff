#pragma once
// How many bytes an allocation is charged, before the driver has told us.
// Linear allocations are charged at the driver's granularity (2 MiB pages for
// anything that is not small), so that what the container is charged is what
// the GPU commits. Arrays are estimated from their descriptor and corrected
// with the driver's own figure once they exist.
//
//   uint64_t c = hami::vgpu::charge_for_linear(3 << 20);   // 4 MiB

#include <cstdint>

#include "vgpu/cuda_abi.hpp"

namespace hami::vgpu {

inline constexpr uint64_t kLargePage = 2ull << 20;
inline constexpr uint64_t kSmallAlign = 512;

constexpr uint64_t round_up(uint64_t v, uint64_t to) {
  return v > UINT64_MAX - (to - 1) ? UINT64_MAX : (v + to - 1) / to * to;
}

constexpr uint64_t charge_for_linear(uint64_t bytes) {
  return bytes >= kLargePage / 2 ? round_up(bytes, kLargePage) : round_up(bytes, kSmallAlign);
}

// Bytes per element of one channel, conservative (4) for formats we do not list.
uint64_t array_element_bytes(cuda::CUarray_format format);
uint64_t estimate_array(const cuda::CUDA_ARRAY3D_DESCRIPTOR& d);
uint64_t estimate_array(const cuda::CUDA_ARRAY_DESCRIPTOR& d);
// Every level of the chain, each dimension halving (never below 1).
uint64_t estimate_mipmapped_array(const cuda::CUDA_ARRAY3D_DESCRIPTOR& d, unsigned levels);

}  // namespace hami::vgpu
