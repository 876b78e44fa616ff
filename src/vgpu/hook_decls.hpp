#pragma once
// Prototypes of every exported hook, generated from hooks.def, so a hook whose
// definition drifts from the list fails to compile. Hooks are C functions of
// namespace hami::cuda (C linkage ignores the namespace in the symbol name).

#include "nvml/nvml_abi.hpp"
#include "vgpu/cuda_abi.hpp"

#define HAMI_EXPORT __attribute__((visibility("default")))

namespace hami::cuda {
extern "C" {
#define CU_HOOK(name, params) HAMI_EXPORT CUresult name params noexcept;
#define NVML_HOOK(name, params) HAMI_EXPORT nvmlReturn_t name params noexcept;
#include "vgpu/hooks.def"
}
}  // namespace hami::cuda
