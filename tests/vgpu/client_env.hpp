#pragma once
// The environment of one "container" for cuda-client under libvgpu.so on the
// simulated driver: the library preloaded, the simulated GPUs' state and the
// container's state file in `dir`, no context memory, and none of the
// caller's CUDA or libvgpu settings. For tests built with LIBVGPU and
// SIMGPU_LIB_DIR defined (tests/vgpu/CMakeLists.txt).
//
//   auto r = test::run_process(argv, test::client_env(dir_, {{"CUDA_DEVICE_MEMORY_LIMIT", "2g"}}));

#include <utility>

#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"

namespace hami::test {

inline Env client_env(const TempDir& dir, const Env& extra = {}) {
  Env e = {{"LD_PRELOAD", LIBVGPU},
           {"LD_LIBRARY_PATH", SIMGPU_LIB_DIR},
           {"SIMGPU_STATE", dir.file("gpu.state")},
           {"SIMGPU_CONTEXT_SIZE", "0"},
           {"CUDA_DEVICE_MEMORY_SHARED_CACHE", dir.file("vgpu.cache")},
           {"ASAN_OPTIONS", "verify_asan_link_order=0:detect_leaks=0"},
           {"CUDA_VISIBLE_DEVICES", kUnset},
           {"CUDA_MODULE_LOADING", kUnset},
           {"LIBCUDA_LOG_LEVEL", kUnset},
           {"VGPU_LIMITS_FILE", kUnset},
           {"VGPU_CONTROL_FILE", kUnset},
           {"CUDA_DEVICE_MEMORY_LIMIT", kUnset},
           {"CUDA_DEVICE_SM_LIMIT", kUnset},
           {"GPU_CORE_UTILIZATION_POLICY", kUnset},
           {"SIMGPU_FAIL", kUnset}};
  return with_overrides(std::move(e), extra);
}

}  // namespace hami::test
