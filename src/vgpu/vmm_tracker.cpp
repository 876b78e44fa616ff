#include "vgpu/vmm_tracker.hpp"

#include <new>

namespace hami::vgpu {

bool VmmTracker::created(uint64_t handle, const Allocation& a) noexcept {
  std::lock_guard lock(mu_);
  try {
    handles_[handle] = Handle{a, 0, false, false};
  } catch (const std::bad_alloc&) {
    return false;
  }
  return true;
}

void VmmTracker::imported(uint64_t handle, int device) noexcept {
  std::lock_guard lock(mu_);
  try {
    handles_[handle] = Handle{Allocation{device, region::UsageKind::kData, 0}, 0, false, true};
  } catch (const std::bad_alloc&) {
  }
}

std::optional<Allocation> VmmTracker::charge_for_map(uint64_t handle, size_t size) noexcept {
  std::lock_guard lock(mu_);
  auto it = handles_.find(handle);
  if (it == handles_.end() || !it->second.imported || it->second.charge.bytes != 0)
    return std::nullopt;
  return Allocation{it->second.charge.device, region::UsageKind::kData, size};
}

void VmmTracker::mapped(cuda::CUdeviceptr ptr, size_t size, uint64_t handle,
                        const std::optional<Allocation>& charged) noexcept {
  std::lock_guard lock(mu_);
  auto it = handles_.find(handle);
  if (it == handles_.end()) return;
  try {
    mappings_[ptr] = {handle, size};
  } catch (const std::bad_alloc&) {
    return;  // the handle's charge then goes back at release, as before mappings were tracked
  }
  ++it->second.maps;
  if (charged) it->second.charge = *charged;
}

std::optional<Allocation> VmmTracker::before_release(uint64_t handle) noexcept {
  std::lock_guard lock(mu_);
  auto it = handles_.find(handle);
  if (it == handles_.end()) return std::nullopt;
  if (it->second.maps > 0) {
    it->second.released = true;
    return std::nullopt;
  }
  const Allocation a = it->second.charge;
  handles_.erase(it);
  return a;
}

void VmmTracker::undo_release(uint64_t handle, const std::optional<Allocation>& taken) noexcept {
  std::lock_guard lock(mu_);
  if (taken) {
    try {
      handles_[handle] = Handle{*taken, 0, false, false};
    } catch (const std::bad_alloc&) {
    }
    return;
  }
  if (auto it = handles_.find(handle); it != handles_.end()) it->second.released = false;
}

VmmTracker::Unmapped VmmTracker::before_unmap(cuda::CUdeviceptr ptr, size_t size) noexcept {
  Unmapped u;
  std::lock_guard lock(mu_);
  try {
    auto it = mappings_.lower_bound(ptr);
    while (it != mappings_.end() && it->first < ptr + size) {
      u.mappings.push_back(*it);
      auto h = handles_.find(it->second.first);
      if (h != handles_.end() && --h->second.maps == 0 && h->second.released) {
        u.freed.emplace_back(h->first, h->second.charge);
        handles_.erase(h);
      }
      it = mappings_.erase(it);
    }
  } catch (const std::bad_alloc&) {
  }
  return u;
}

void VmmTracker::undo_unmap(const Unmapped& u) noexcept {
  std::lock_guard lock(mu_);
  try {
    for (const auto& [handle, a] : u.freed)
      handles_[handle] = Handle{a, 0, true, false};
    for (const auto& [ptr, m] : u.mappings) {
      mappings_[ptr] = m;
      if (auto h = handles_.find(m.first); h != handles_.end()) ++h->second.maps;
    }
  } catch (const std::bad_alloc&) {
  }
}

void VmmTracker::reset() noexcept {
  new (&mu_) std::mutex();
  handles_.clear();
  mappings_.clear();
}

}  // namespace hami::vgpu
