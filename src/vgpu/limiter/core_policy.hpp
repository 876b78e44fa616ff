#pragma once
// GPU_CORE_UTILIZATION_POLICY (upstream HAMi-core's variable and values; the
// enum lives with the container contract, protocol/container_contract.hpp):
//   force    the SM share is always enforced;
//   default  enforced while the node agent reports contention on the GPU (the
//            state file's utilization_switch is non-zero). The file starts at 1
//            and only the agent clears it, so without an agent (standalone use)
//            this is the same as force;
//   disable  never enforced.
//
//   auto p = parse_core_policy("force");   // CorePolicy::kForce
//   bool on = enforces(*p, region.utilization_switch());

#include <cstdint>

#include "protocol/container_contract.hpp"

namespace hami::vgpu::limiter {

using protocol::CorePolicy;
using protocol::parse_core_policy;
using protocol::to_string;

inline bool enforces(CorePolicy p, int32_t utilization_switch) {
  return p == CorePolicy::kForce || (p == CorePolicy::kDefault && utilization_switch != 0);
}

}  // namespace hami::vgpu::limiter
