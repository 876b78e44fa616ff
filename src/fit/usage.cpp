#include "fit/usage.hpp"

#include <algorithm>

namespace hami::fit {
namespace {

struct Tally {
  std::string_view uuid;
  int64_t tenants = 0, mem = 0, cores = 0;                 // sidecars + app containers
  int64_t peak_tenants = 0, peak_mem = 0, peak_cores = 0;  // worst init container
};

Tally& tally_for(std::vector<Tally>& t, std::string_view uuid) {
  for (Tally& x : t)
    if (x.uuid == uuid) return x;
  return t.emplace_back(Tally{uuid});
}

int32_t clamp32(int64_t v) {
  return static_cast<int32_t>(std::clamp<int64_t>(v, 0, INT32_MAX));
}

GpuDevice* find(NodeDevices& node, const std::string& uuid) {
  for (GpuDevice& d : node.devices)
    if (d.uuid == uuid) return &d;
  return nullptr;
}

// Calls f(gpu, placement) for each allocation on a GPU of the node; returns
// how many name a GPU it does not have.
template <class F>
size_t on_mig_gpus(NodeDevices& node, std::span<const protocol::MigAllocation> allocs, F f) {
  size_t unmatched = 0;
  for (const protocol::MigAllocation& a : allocs) {
    if (GpuDevice* d = find(node, a.gpu_uuid)) {
      f(*d, a.placement);
    } else {
      ++unmatched;
    }
  }
  return unmatched;
}

}  // namespace

std::vector<DeviceCharge> pod_charges(const PodDevices& devices,
                                      std::span<const ContainerKind> kinds, bool init_finished) {
  std::vector<Tally> t;
  for (size_t ci = 0; ci < devices.size(); ++ci) {
    const ContainerKind kind = ci < kinds.size() ? kinds[ci] : ContainerKind::kApp;
    if (kind == ContainerKind::kInit) {
      if (init_finished) continue;
      // Beside it run only the sidecars counted so far, which t holds now.
      for (const ContainerDevice& d : devices[ci]) {
        Tally& x = tally_for(t, d.uuid);
        x.peak_tenants = std::max(x.peak_tenants, x.tenants + 1);
        x.peak_mem = std::max(x.peak_mem, x.mem + d.mem_mib);
        x.peak_cores = std::max(x.peak_cores, x.cores + d.cores);
      }
      continue;
    }
    for (const ContainerDevice& d : devices[ci]) {
      Tally& x = tally_for(t, d.uuid);
      x.tenants += 1;
      x.mem += d.mem_mib;
      x.cores += d.cores;
    }
  }
  std::vector<DeviceCharge> out;
  out.reserve(t.size());
  for (const Tally& x : t) {
    out.push_back({std::string(x.uuid), clamp32(std::max(x.tenants, x.peak_tenants)),
                   clamp32(std::max(x.mem, x.peak_mem)), clamp32(std::max(x.cores, x.peak_cores))});
  }
  return out;
}

size_t apply_charges(NodeDevices& node, std::span<const DeviceCharge> charges) {
  size_t unmatched = 0;
  for (const DeviceCharge& c : charges) {
    GpuDevice* d = find(node, c.uuid);
    if (!d) {
      ++unmatched;
      continue;
    }
    d->used_tenants = clamp32(int64_t{d->used_tenants} + c.tenants);
    d->used_mem_mib = clamp32(int64_t{d->used_mem_mib} + c.mem_mib);
    d->used_cores = clamp32(int64_t{d->used_cores} + c.cores);
    if (d->mode == kModeMps) {
      // The first pod's user; fitting keeps the others to it.
      if (d->mps_user_pods == 0) d->mps_user = c.user;
      ++d->mps_user_pods;
    }
  }
  return unmatched;
}

size_t remove_charges(NodeDevices& node, std::span<const DeviceCharge> charges) {
  size_t unmatched = 0;
  for (const DeviceCharge& c : charges) {
    GpuDevice* d = find(node, c.uuid);
    if (!d) {
      ++unmatched;
      continue;
    }
    d->used_tenants = clamp32(int64_t{d->used_tenants} - c.tenants);
    d->used_mem_mib = clamp32(int64_t{d->used_mem_mib} - c.mem_mib);
    d->used_cores = clamp32(int64_t{d->used_cores} - c.cores);
    if (d->mode == kModeMps && d->mps_user_pods > 0 && --d->mps_user_pods == 0) {
      d->mps_user = kUserUndeclared;
    }
  }
  return unmatched;
}

size_t apply_mig(NodeDevices& node, std::span<const protocol::MigAllocation> allocs) {
  return on_mig_gpus(node, allocs, [](GpuDevice& d, const protocol::MigPlacement& p) {
    d.mig_taken.push_back(p);
  });
}

size_t remove_mig(NodeDevices& node, std::span<const protocol::MigAllocation> allocs) {
  return on_mig_gpus(node, allocs, [](GpuDevice& d, const protocol::MigPlacement& p) {
    auto it = std::find(d.mig_taken.begin(), d.mig_taken.end(), p);
    if (it != d.mig_taken.end()) d.mig_taken.erase(it);
  });
}

}  // namespace hami::fit
