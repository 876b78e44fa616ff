#pragma once
// Small builders for the fit tests: GPUs, nodes and requests with the
// defaults a test does not care about.

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "fit/fit.hpp"

namespace hami::fit::testing {

inline GpuDevice gpu(std::string uuid, int32_t index, int32_t mem_mib = 80000, int32_t numa = 0) {
  GpuDevice d;
  d.uuid = std::move(uuid);
  d.index = index;
  d.type = "NVIDIA H200";
  d.numa = numa;
  d.total_mem_mib = mem_mib;
  return d;
}

inline GpuDevice used(GpuDevice d, int32_t tenants, int32_t mem_mib, int32_t cores) {
  d.used_tenants = tenants;
  d.used_mem_mib = mem_mib;
  d.used_cores = cores;
  return d;
}

inline NodeDevices node(std::string name, std::vector<GpuDevice> devices) {
  return NodeDevices{std::move(name), std::move(devices)};
}

inline ContainerRequest ctr(int32_t nums, int32_t mem_mib = 1000, int32_t cores = 0,
                            ContainerKind kind = ContainerKind::kApp) {
  ContainerRequest c;
  c.nums = nums;
  c.mem_mib = mem_mib;
  c.cores = cores;
  c.kind = kind;
  return c;
}

inline PreparedPod prepare(std::vector<ContainerRequest> containers, PodOptions options = {}) {
  auto p = PreparedPod::make(PodRequest{std::move(containers)}, std::move(options));
  if (!p) throw std::runtime_error(p.error().message);
  return std::move(*p);
}

inline PodOptions gpu_policy(const char* text) {
  PodOptions o;
  auto p = parse_gpu_policy(text);
  if (!p) throw std::runtime_error(p.error().message);
  o.gpu_policy = *p;
  return o;
}

// The UUIDs each container got, or the failure text.
struct Outcome {
  bool fits = false;
  std::vector<std::vector<std::string>> uuids;
  std::string reason;
  uint16_t failed_container = 0;
};

inline Outcome run(const NodeDevices& n, const PreparedPod& pod) {
  FitScratch scratch;
  Placement placement;
  const NodeFit f = fit_pod(n, pod, scratch, &placement);
  Outcome o;
  o.fits = f.fits;
  if (!f.fits) {
    o.reason = describe(f.failure);
    o.failed_container = f.failure.container;
    return o;
  }
  for (const auto& c : to_pod_devices(n, pod, placement)) {
    auto& row = o.uuids.emplace_back();
    for (const auto& d : c)
      row.push_back(d.uuid);
  }
  return o;
}

}  // namespace hami::fit::testing
