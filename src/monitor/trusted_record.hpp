#pragma once
// What the device plugin allocated to a container, from the limits file it
// wrote on the host (<hook>/limits/<podUID>_<container>/limits, its directory
// mounted read-only in the container): the only per-container facts the node agent takes as true.
// The state file is writable by every process of the container, so its
// priority, device table and limits are what the tenant says; the record is
// what the plugin gave. A container without a record (standalone `vgpu run`,
// a container started by upstream's device plugin) falls back to its state
// file, with the agent's range checks (docs/security.md).
//
// A record is trusted only if it is a regular file (not a link), owned by
// root or by the agent's own user and not writable by group or others. It is
// parsed as libvgpu.so parses it (protocol/container_contract.hpp), strictly.
// The path is <hook>/limits/<dir>/limits; a record from before resizes (the
// file <hook>/limits/<dir> itself) is read too.
//
//   auto rec = read_trusted_record(hook + "/limits/" + dir_name);
//   if (rec && *rec) priority = (*rec)->priority.value_or(1);

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "protocol/container_contract.hpp"
#include "region/layout_v1.hpp"

namespace hami::monitor {

struct TrustedRecord {
  std::string path;
  std::optional<int32_t> priority;     // CUDA_TASK_PRIORITY: 0 high, 1 low
  std::vector<std::string> gpu_uuids;  // VGPU_DEVICE_UUID_<i>, NVML order; empty: not given
  std::array<uint64_t, region::kMaxDevices> memory_limit{};  // bytes, 0: none
  std::array<uint64_t, region::kMaxDevices> sm_limit{};      // percent, 0 or 100: none
  std::string state_file_name;  // basename of CUDA_DEVICE_MEMORY_SHARED_CACHE; "" not given
  // CUDA_MPS_ACTIVE_THREAD_PERCENTAGE: present when the container is an MPS
  // client; its SM share is this cap (100: none), not CUDA_DEVICE_SM_LIMIT.
  std::optional<uint64_t> mps_thread_percentage;
};

// The key of both the record and of the file `vgpu run --sharing mps` leaves
// in a job's directory (kMpsClientFile, read for display only).
using protocol::kMpsClientFile;
inline constexpr const char* kMpsThreadKey = protocol::kEnvMpsThreads;

// The thread percentage in a record or job file's text: nullopt when the key
// is absent, an error when its value is not 1-100.
Result<std::optional<uint64_t>> parse_mps_thread_percentage(const std::string& text);

// nullopt: no such file. An error: present but not trusted, or unreadable.
Result<std::optional<TrustedRecord>> read_trusted_record(const std::string& path);

// Parses a record's text (KEY=VALUE lines as the device plugin writes them).
// Values that cannot be read are errors: a record is the plugin's and should
// never hold one.
Result<TrustedRecord> parse_trusted_record(const std::string& text, const std::string& path);

}  // namespace hami::monitor
