#include "vgpu/module_charges.hpp"

#include <new>

#include "common/bytes.hpp"
#include "common/log.hpp"
#include "vgpu/runtime.hpp"

namespace hami::vgpu {

using namespace hami::cuda;  // NOLINT

void ModuleCharges::record(uint64_t key, const Allocation& a) noexcept {
  std::lock_guard lock(mu_);
  try {
    charges_[key].push_back(a);
  } catch (const std::bad_alloc&) {
    log::error("out of host memory: a module's globals are not accounted");
  }
}

CUresult ModuleCharges::load(Runtime& rt, FunctionRef<CUresult()> load, FunctionRef<uint64_t()> key,
                             FunctionRef<void()> unload) noexcept {
  const int index = rt.current_device(nullptr);
  CUresult rc = CUDA_SUCCESS;
  const uint64_t bytes = rt.probe().measure(rt, index, load, &rc);
  if (rc != CUDA_SUCCESS || bytes == 0) return rc;
  if (!rt.reserve(index, region::UsageKind::kData, bytes)) {
    log::warn(
        "device %d: a module whose globals take %s does not fit under the limit of %s; "
        "refused",
        index, format_bytes(bytes).c_str(), format_bytes(rt.limit(index)).c_str());
    unload();
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  log::info("device %d: module globals charged %s", index, format_bytes(bytes).c_str());
  record(key(), Allocation{index, region::UsageKind::kData, bytes});
  return rc;
}

CUresult ModuleCharges::first_use(Runtime& rt, uint64_t library,
                                  FunctionRef<CUresult()> use) noexcept {
  const int index = rt.current_device(nullptr);
  if (library != 0) {
    std::lock_guard lock(mu_);
    if (loaded_.count({library, index}) != 0) return use();
  }
  CUresult rc = CUDA_SUCCESS;
  const uint64_t bytes = rt.probe().measure(rt, index, use, &rc);
  if (rc != CUDA_SUCCESS) return rc;
  if (library != 0) {
    std::lock_guard lock(mu_);
    try {
      if (loaded_.size() < kMaxRemembered) loaded_.insert({library, index});
    } catch (const std::bad_alloc&) {
    }
  }
  if (bytes == 0) return rc;
  const bool fits = rt.reserve(index, region::UsageKind::kData, bytes);
  if (!fits) rt.force_charge(index, region::UsageKind::kData, bytes);
  record(library, Allocation{index, region::UsageKind::kData, bytes});
  if (fits) {
    log::info("device %d: library globals charged %s", index, format_bytes(bytes).c_str());
    return rc;
  }
  log::error(
      "device %d: loading a library's globals (%s) took the container past its limit of "
      "%s; refused, and nothing more fits until the library is unloaded",
      index, format_bytes(bytes).c_str(), format_bytes(rt.limit(index)).c_str());
  return CUDA_ERROR_OUT_OF_MEMORY;
}

void ModuleCharges::kernel_found(uint64_t kernel, uint64_t library) noexcept {
  std::lock_guard lock(mu_);
  try {
    if (kernels_.size() < kMaxRemembered) kernels_[kernel] = library;
  } catch (const std::bad_alloc&) {
  }
}

uint64_t ModuleCharges::library_of(uint64_t kernel) noexcept {
  std::lock_guard lock(mu_);
  auto it = kernels_.find(kernel);
  return it == kernels_.end() ? 0 : it->second;
}

void ModuleCharges::unloaded(Runtime& rt, uint64_t key) noexcept {
  std::vector<Allocation> charged;
  {
    std::lock_guard lock(mu_);
    if (auto it = charges_.find(key); it != charges_.end()) {
      charged = std::move(it->second);
      charges_.erase(it);
    }
    for (auto it = loaded_.lower_bound({key, -1}); it != loaded_.end() && it->first == key;)
      it = loaded_.erase(it);
    for (auto it = kernels_.begin(); it != kernels_.end();)
      it = it->second == key ? kernels_.erase(it) : std::next(it);
  }
  for (const Allocation& a : charged)
    rt.release(a);
}

void ModuleCharges::reset() noexcept {
  new (&mu_) std::mutex();
  charges_.clear();
  kernels_.clear();
  loaded_.clear();
}

}  // namespace hami::vgpu
