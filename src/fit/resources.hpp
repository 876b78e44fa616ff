#pragma once
// What one container asks for, from its resource quantities, by upstream's
// rules (GenerateResourceRequests): the count (nvidia.com/gpu) makes it a GPU
// container; gpumem is MiB per GPU times the memory factor; gpumem-percentage
// over 100 is 100 and 0 or less means "not given"; with neither, the
// configured default memory, else the whole card (100 %); cores default to the
// configured default. Each resource is read from the limits, else the requests.
//
//   auto req = hami::fit::container_request(limits_lookup, requests_lookup, config);
//   if (!req) return deny(req.error().message);  // "nvidia.com/gpumem='3.5': …"
//   if (!*req) return;                           // not a GPU container
//   use(**req);                                  // ContainerRequest
//
// Where upstream drops a malformed value silently (so the container looks as
// if it asked for no GPU, or for the whole card), this is an error naming the
// resource.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/function_ref.hpp"
#include "common/result.hpp"
#include "fit/types.hpp"
#include "protocol/container_contract.hpp"

namespace hami::fit {

struct ResourceConfig {
  std::string count_name = protocol::kResourceCount;
  std::string memory_name = protocol::kResourceMemory;
  std::string memory_percentage_name = protocol::kResourceMemoryPercentage;
  std::string cores_name = protocol::kResourceCores;
  int32_t default_memory_mib = 0;  // defaultMemory; used as is, not scaled
  int32_t default_cores = 0;       // defaultCores
  int32_t memory_factor = 1;       // memoryFactor, ≥ 1
};

// Resource name → its quantity text, or nullopt where the container has none.
using QuantityLookup = FunctionRef<std::optional<std::string_view>(std::string_view name)>;

// nullopt: not a GPU container (no count, or a count of 0).
Result<std::optional<ContainerRequest>> container_request(QuantityLookup limits,
                                                          QuantityLookup requests,
                                                          const ResourceConfig& config);

// The task priority resource (`name`, nvidia.com/priority), limits first: 0
// (high) or 1 (low), the values the library's CUDA_TASK_PRIORITY takes;
// nullopt when the container has none. The device plugin's Allocate and the
// webhook both read it here, so the webhook refuses with Allocate's words.
Result<std::optional<int>> task_priority(QuantityLookup limits, QuantityLookup requests,
                                         std::string_view name);

}  // namespace hami::fit
