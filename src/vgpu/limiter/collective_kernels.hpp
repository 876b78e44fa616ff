#pragma once
// CollectiveKernels: tells a collective's kernel from any other, by the
// kernel's name, for the DutyGate (duty_gate.hpp). A collective's kernel
// (NCCL's, or a custom all-reduce of vLLM, SGLang, TensorRT-LLM or PyTorch's
// symmetric memory) runs on every rank's GPU and spins until all have
// launched it, so the gate keeps the ranks' counts of these in step; other
// kernels pair with nothing and are left out of the counts.
//
// Names are looked up once per kernel handle through `name_of` (the driver's
// cuFuncGetName, or cuKernelGetName for a library kernel) and kept in a
// fixed, lock-free table; a handle the table has no room for is looked up
// each time. A handle reused by the driver for another kernel after its
// module was unloaded keeps the first kernel's answer.
//
//   CollectiveKernels kinds(&driver_name_of);
//   const bool collective = kinds.is_collective(reinterpret_cast<uintptr_t>(f));
#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>

namespace hami::vgpu::limiter {

// Whether a kernel of this (possibly mangled) name is a collective's.
bool collective_kernel_name(std::string_view name) noexcept;

class CollectiveKernels {
 public:
  // The name of kernel `handle`, or nullptr when the driver cannot say.
  using NameOf = const char* (*)(uintptr_t handle);
  static constexpr size_t kCapacity = 4096;  // a power of two
  static constexpr int kProbes = 16;

  explicit CollectiveKernels(NameOf name_of) noexcept;
  bool is_collective(uintptr_t handle) noexcept;
  // Handles answered from the table (for tests).
  size_t cached() const noexcept;

 private:
  enum : uint8_t { kUnknown = 0, kOther = 1, kCollective = 2 };
  const NameOf name_of_;
  std::unique_ptr<std::atomic<uintptr_t>[]> handles_;
  std::unique_ptr<std::atomic<uint8_t>[]> kinds_;
};

}  // namespace hami::vgpu::limiter
