#include "vgpu/limiter/collective_kernels.hpp"

#include <array>
#include <new>

namespace hami::vgpu::limiter {
namespace {

// Lower-case fragments of collective kernels' names: NCCL's (ncclDevKernel_*,
// ncclKernel_* before 2.19) and the custom all-reduces of serving stacks
// (vllm::cross_device_reduce_1stage, TensorRT-LLM's allReduceKernel and
// oneShotAllReduceKernel, PyTorch's one_shot_all_reduce_kernel, ...).
constexpr std::array<std::string_view, 7> kFragments = {
    "nccl",      "cross_device_reduce", "allreduce",     "all_reduce",
    "allgather", "all_gather",          "reduce_scatter"};

bool contains_folded(std::string_view hay, std::string_view needle) noexcept {
  if (needle.size() > hay.size()) return false;
  for (size_t i = 0; i + needle.size() <= hay.size(); ++i) {
    size_t j = 0;
    while (j < needle.size()) {
      char c = hay[i + j];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      if (c != needle[j]) break;
      ++j;
    }
    if (j == needle.size()) return true;
  }
  return false;
}

size_t slot_of(uintptr_t handle) noexcept {
  uint64_t x = handle;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return static_cast<size_t>(x) & (CollectiveKernels::kCapacity - 1);
}

}  // namespace

bool collective_kernel_name(std::string_view name) noexcept {
  for (std::string_view f : kFragments) {
    if (contains_folded(name, f)) return true;
  }
  return false;
}

CollectiveKernels::CollectiveKernels(NameOf name_of) noexcept
    : name_of_(name_of),
      handles_(new (std::nothrow) std::atomic<uintptr_t>[kCapacity]()),
      kinds_(new (std::nothrow) std::atomic<uint8_t>[kCapacity]()) {}

bool CollectiveKernels::is_collective(uintptr_t handle) noexcept {
  if (handle == 0) return false;
  const bool tabled = handles_ != nullptr && kinds_ != nullptr;
  size_t free_slot = kCapacity;
  if (tabled) {
    for (int p = 0; p < kProbes; ++p) {
      const size_t i = (slot_of(handle) + static_cast<size_t>(p)) & (kCapacity - 1);
      const uintptr_t h = handles_[i].load(std::memory_order_acquire);
      if (h == handle) {
        const uint8_t k = kinds_[i].load(std::memory_order_acquire);
        if (k != kUnknown) return k == kCollective;
        break;  // another thread is filling it in: look the name up too
      }
      if (h == 0) {
        free_slot = i;
        break;
      }
    }
  }
  const char* name = name_of_ != nullptr ? name_of_(handle) : nullptr;
  const bool collective = name != nullptr && collective_kernel_name(name);
  if (free_slot != kCapacity) {
    uintptr_t expected = 0;
    if (handles_[free_slot].compare_exchange_strong(expected, handle, std::memory_order_acq_rel))
      kinds_[free_slot].store(collective ? kCollective : kOther, std::memory_order_release);
  }
  return collective;
}

size_t CollectiveKernels::cached() const noexcept {
  if (kinds_ == nullptr) return 0;
  size_t n = 0;
  for (size_t i = 0; i < kCapacity; ++i)
    n += kinds_[i].load(std::memory_order_relaxed) != kUnknown ? 1 : 0;
  return n;
}

}  // namespace hami::vgpu::limiter
