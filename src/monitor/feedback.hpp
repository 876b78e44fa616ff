#pragma once
// The node agent's feedback loop over the containers' state files: upstream
// HAMi's monitor semantics (its Observe(), every 5 s), on plain data so it is
// tested without files. libvgpu.so sets a container's recent_kernel to 2 on
// every launch; each observation:
//
//  1. decrements every positive recent_kernel; a container whose value is still
//     positive afterwards is *active* (it launched since the last observation),
//     and counts as active on each of its GPUs under its priority;
//  2. blocks (recent_kernel = -1) a container when a container of strictly
//     higher priority (a lower number: 0 is high) is active on one of its GPUs,
//     and lifts a block (-1 -> 0) otherwise; the library holds launches while
//     the value is negative;
//  3. sets utilization_switch to 1 (the SM share is enforced under the default
//     policy) when a higher-priority container is active on one of its GPUs or
//     more than one container of its priority is, and to 0 otherwise.
//
// MPS clients (FeedbackInput::mps_client) take part in 1 only: never blocked,
// switch 0, and their activity counts for nobody else.
//
//   std::vector<FeedbackInput> in = ...;          // one per state file
//   std::vector<FeedbackOutput> out = observe(in);  // same order; write back
//   // the fields that changed (FeedbackOutput::changed)

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace hami::monitor {

struct FeedbackInput {
  int32_t recent_kernel = 0;
  int32_t utilization_switch = 0;
  int32_t priority = 1;                // 0 high, 1 low (any value: lower wins)
  std::vector<std::string> gpu_uuids;  // the container's GPUs
  // An MPS client: its kernels run beside the others' on disjoint SMs, its
  // share held by the MPS server. Priority neither blocks it nor lets its
  // activity block or contend others (a high-priority MPS service must not
  // stop the trainer beside it).
  bool mps_client = false;
};

struct FeedbackOutput {
  int32_t recent_kernel = 0;
  int32_t utilization_switch = 0;
  bool active = false;   // launched since the previous observation
  bool changed = false;  // either field differs from the input
};

std::vector<FeedbackOutput> observe(std::span<const FeedbackInput> containers);

}  // namespace hami::monitor
