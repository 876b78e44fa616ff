#include "vgpu/device_map.hpp"

#include <cstdio>

#include "common/log.hpp"
#include "vgpu/real_driver.hpp"

namespace hami::vgpu {
namespace {
constexpr int kUnknown = -2;

// Whether two UUID strings name one device: equal, or the same 16 bytes
// written as GPU- (format_gpu_uuid, from CUDA's bytes) and MIG- (NVML's
// and the limits file's name of a MIG device).
bool same_device(const std::string& a, const std::string& b) {
  if (a == b) return true;
  auto prefixed = [](const std::string& s) {
    return s.size() > 4 && (s.compare(0, 4, "GPU-") == 0 || s.compare(0, 4, "MIG-") == 0);
  };
  return a.size() == b.size() && prefixed(a) && prefixed(b) && a.compare(4, a.npos, b, 4) == 0;
}
}  // namespace

std::string format_gpu_uuid(const cuda::CUuuid& u) {
  const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
  char s[48];
  std::snprintf(s, sizeof s,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return s;
}

std::string DeviceMap::uuid(int index) const {
  if (!trusted_.empty()) {
    return index >= 0 && static_cast<size_t>(index) < trusted_.size()
               ? trusted_[static_cast<size_t>(index)]
               : std::string();
  }
  return region_.device_uuid(index);
}

void DeviceMap::set_trusted(std::vector<std::string> uuids) {
  if (uuids.size() > static_cast<size_t>(region::kMaxDevices)) uuids.resize(region::kMaxDevices);
  trusted_ = std::move(uuids);
  if (trusted_.empty()) return;
  bool same = region_.device_count() == trusted_.size();
  for (size_t i = 0; same && i < trusted_.size(); ++i)
    same = region_.device_uuid(static_cast<int>(i)) == trusted_[i];
  if (same) return;
  auto lock = region_.lock_registry();
  if (!lock) return;  // the mirror is for readers only; our own table is set
  for (size_t i = 0; i < trusted_.size(); ++i)
    (void)region_.set_device_uuid(static_cast<int>(i), trusted_[i]);
  region_.set_device_count(trusted_.size());
}

void DeviceMap::reset() noexcept {
  for (auto& c : ordinal_cache_)
    c.store(kUnknown, std::memory_order_relaxed);
  nvml_tried_ = false;
}

// The first process of the container records the container's GPUs in NVML
// order; everyone after reads them from the file.
void DeviceMap::fill_from_nvml() {
  if (nvml_tried_ || region_.device_count() != 0) return;
  nvml_tried_ = true;
  if (!nvml_available()) return;
  const RealNvml& nv = real_nvml();
  if (nv.nvmlInit_v2() != cuda::NVML_SUCCESS) {
    log::warn("nvmlInit failed: GPUs are recorded in this process's CUDA order instead");
    return;
  }
  unsigned count = 0;
  if (nv.nvmlDeviceGetCount_v2 && nv.nvmlDeviceGetCount_v2(&count) == cuda::NVML_SUCCESS) {
    auto lock = region_.lock_registry();  // two first processes must not interleave writes
    if (lock && region_.device_count() == 0) {
      unsigned recorded = 0;
      for (unsigned i = 0; i < count && i < static_cast<unsigned>(region::kMaxDevices); ++i) {
        cuda::nvmlDevice_t h = nullptr;
        char uuid[cuda::NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
        if (nv.nvmlDeviceGetHandleByIndex_v2(i, &h) != cuda::NVML_SUCCESS ||
            nv.nvmlDeviceGetUUID(h, uuid, sizeof uuid) != cuda::NVML_SUCCESS) {
          break;
        }
        (void)region_.set_device_uuid(static_cast<int>(i), uuid);
        recorded = i + 1;
      }
      region_.set_device_count(recorded);
    }
  }
  if (nv.nvmlShutdown) nv.nvmlShutdown();
}

int DeviceMap::lookup_or_add(const std::string& uuid) {
  if (!trusted_.empty()) {
    for (size_t i = 0; i < trusted_.size(); ++i) {
      if (same_device(trusted_[i], uuid)) return static_cast<int>(i);
    }
    static std::atomic<bool> logged{false};
    if (!logged.exchange(true)) {
      log::warn("%s is not one of this container's GPUs in the limits file; it is not accounted",
                uuid.c_str());
    }
    return -1;
  }
  fill_from_nvml();
  const int n = static_cast<int>(std::min<uint64_t>(region_.device_count(), region::kMaxDevices));
  for (int i = 0; i < n; ++i) {
    if (same_device(region_.device_uuid(i), uuid)) return i;
  }
  // Not recorded (no NVML, or a device NVML did not list): append it.
  auto lock = region_.lock_registry();
  if (!lock) return -1;
  const int now = static_cast<int>(std::min<uint64_t>(region_.device_count(), region::kMaxDevices));
  for (int i = n; i < now; ++i) {
    if (same_device(region_.device_uuid(i), uuid)) return i;
  }
  if (now >= region::kMaxDevices) {
    log::error("%s: more than 16 GPUs; %s is not accounted", region_.path().c_str(), uuid.c_str());
    return -1;
  }
  if (!region_.set_device_uuid(now, uuid)) return -1;
  region_.set_device_count(static_cast<uint64_t>(now + 1));
  log::warn("%s: recorded %s as device %d in CUDA order (NVML did not list it)",
            region_.path().c_str(), uuid.c_str(), now);
  return now;
}

int DeviceMap::index_for_ordinal(cuda::CUdevice ordinal) noexcept {
  if (ordinal < 0 || ordinal >= kMaxOrdinals) return -1;
  const int cached = ordinal_cache_[ordinal].load(std::memory_order_acquire);
  if (cached != kUnknown) return cached;
  std::lock_guard lock(mu_);
  const RealCuda& cu = real_cuda();
  cuda::CUuuid raw{};
  int index = -1;
  if (cu.cuDeviceGetUuid_v2 != nullptr &&
      cu.cuDeviceGetUuid_v2(&raw, ordinal) == cuda::CUDA_SUCCESS) {
    try {
      index = lookup_or_add(format_gpu_uuid(raw));
    } catch (...) {
      index = -1;
    }
  } else {
    // Not an error to cache: the ordinal may become valid after cuInit.
    return -1;
  }
  ordinal_cache_[ordinal].store(index, std::memory_order_release);
  return index;
}

cuda::CUdevice DeviceMap::ordinal_for_index(int index) noexcept {
  if (index < 0) return -1;
  const RealCuda& cu = real_cuda();
  int count = 0;
  if (cu.cuDeviceGetCount == nullptr || cu.cuDeviceGetCount(&count) != cuda::CUDA_SUCCESS)
    return -1;
  for (int o = 0; o < count && o < kMaxOrdinals; ++o)
    if (index_for_ordinal(o) == index) return o;
  return -1;
}

int DeviceMap::index_for_nvml(cuda::nvmlDevice_t device) noexcept {
  const RealNvml& nv = real_nvml();
  char uuid[cuda::NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  if (nv.nvmlDeviceGetUUID == nullptr ||
      nv.nvmlDeviceGetUUID(device, uuid, sizeof uuid) != cuda::NVML_SUCCESS) {
    return -1;
  }
  std::lock_guard lock(mu_);
  try {
    // The GPU a trusted MIG device is on stands for it: NVML in a MIG
    // container lists that GPU, not the MIG device.
    if (const int i = mig_parent_index(device); i >= 0) return i;
    return lookup_or_add(uuid);
  } catch (...) {
    return -1;
  }
}

int DeviceMap::mig_parent_index(cuda::nvmlDevice_t device) {
  for (const auto& [h, i] : mig_parents_)
    if (h == device) return i;
  const RealNvml& nv = real_nvml();
  if (nv.nvmlDeviceGetHandleByUUID == nullptr ||
      nv.nvmlDeviceGetDeviceHandleFromMigDeviceHandle == nullptr)
    return -1;
  int found = -1;
  for (size_t i = 0; i < trusted_.size() && found < 0; ++i) {
    if (trusted_[i].compare(0, 4, "MIG-") != 0) continue;
    cuda::nvmlDevice_t mig = nullptr;
    cuda::nvmlDevice_t parent = nullptr;
    if (nv.nvmlDeviceGetHandleByUUID(trusted_[i].c_str(), &mig) == cuda::NVML_SUCCESS &&
        nv.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig, &parent) == cuda::NVML_SUCCESS &&
        parent == device) {
      found = static_cast<int>(i);
    }
  }
  // Only a hit is remembered: NVML may not have been initialised yet.
  if (found >= 0) mig_parents_.emplace_back(device, found);
  return found;
}

}  // namespace hami::vgpu
