#include "scheduler/resize.hpp"

#include <algorithm>
#include <charconv>

#include "common/text.hpp"
#include "fit/fit.hpp"
#include "protocol/container_contract.hpp"

namespace hami::scheduler {
namespace {

Result<int32_t> number(std::string_view key, std::string_view v, int32_t lo, int32_t hi) {
  int32_t n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size() || n < lo || n > hi) {
    std::string why(key);
    why += "=";
    why += v.substr(0, 32);
    why += " is not a number from " + std::to_string(lo) + " to " + std::to_string(hi);
    return Error{why};
  }
  return n;
}

// One container's part: "gpumem=8000,gpucores=60".
Result<ResizeTarget> parse_target(std::string container, std::string_view text) {
  ResizeTarget t;
  t.container = std::move(container);
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      std::string why(item.substr(0, 64));
      why += " is not gpumem=N or gpucores=N";
      return Error{why};
    }
    const std::string_view key = trim(item.substr(0, eq));
    const std::string_view value = trim(item.substr(eq + 1));
    if (key == "gpumem" && !t.mem_mib) {
      auto n = number(key, value, 1, INT32_MAX);
      if (!n) return n.error();
      t.mem_mib = *n;
    } else if (key == "gpucores" && !t.cores) {
      auto n = number(key, value, 0, 100);
      if (!n) return n.error();
      t.cores = *n;
    } else {
      std::string why(key.substr(0, 64));
      why += " is not gpumem or gpucores, or is given twice";
      return Error{why};
    }
  }
  if (!t.mem_mib && !t.cores) return Error{"names neither gpumem nor gpucores"};
  return t;
}

fit::GpuDevice* find_gpu(fit::NodeDevices& node, const std::string& uuid) {
  for (fit::GpuDevice& d : node.devices)
    if (d.uuid == uuid) return &d;
  return nullptr;
}

}  // namespace

Result<std::vector<ResizeTarget>> parse_resize(std::string_view text) {
  if (text.size() > kMaxResizeText) return Error{"longer than 4096 bytes"};
  std::vector<ResizeTarget> out;
  while (true) {
    const size_t semi = text.find(';');
    const std::string_view part = trim(text.substr(0, semi));
    if (!part.empty()) {
      std::string container;
      std::string_view body = part;
      if (const size_t colon = part.find(':'); colon != std::string_view::npos) {
        container = std::string(trim(part.substr(0, colon)));
        body = part.substr(colon + 1);
        if (container.empty()) return Error{"a container name is empty"};
      }
      auto t = parse_target(std::move(container), body);
      if (!t) return t.error();
      for (const ResizeTarget& seen : out) {
        if (seen.container == t->container)
          return Error{"container " + t->container.substr(0, 64) + " is named twice"};
      }
      out.push_back(std::move(*t));
    }
    if (semi == std::string_view::npos) break;
    text = text.substr(semi + 1);
  }
  if (out.empty()) return Error{"asks for nothing"};
  if (out.size() > 1 && std::any_of(out.begin(), out.end(),
                                    [](const ResizeTarget& t) { return t.container.empty(); }))
    return Error{"with several parts, each names its container (name:gpumem=N)"};
  return out;
}

ResizeDecision decide_resize(const ResizeInput& in, const ResizeQuota& quota) {
  ResizeDecision d;
  auto refuse = [&](const std::string& why) {
    d.refusal = std::string(kReasonResize) + ": " + why;
    d.devices = in.allocation;
    return d;
  };
  // Which container each target names.
  std::vector<const ResizeTarget*> wanted(in.allocation.size(), nullptr);
  std::vector<size_t> gpu_containers;
  for (size_t c = 0; c < in.allocation.size(); ++c)
    if (!in.allocation[c].empty()) gpu_containers.push_back(c);
  for (const ResizeTarget& t : in.targets) {
    size_t c = in.allocation.size();
    if (t.container.empty()) {
      if (gpu_containers.size() != 1) {
        return refuse("the pod has " + std::to_string(gpu_containers.size()) +
                      " GPU containers; name one (" + std::string("main:gpumem=N") + ")");
      }
      c = gpu_containers[0];
    } else {
      for (size_t i = 0; i < in.containers.size() && i < in.allocation.size(); ++i)
        if (in.containers[i] == t.container) c = i;
      if (c == in.allocation.size()) return refuse("the pod has no container " + t.container);
      if (in.allocation[c].empty()) return refuse("container " + t.container + " has no GPU");
    }
    wanted[c] = &t;
  }

  // The node as it would be without this pod: the new sizes are placed as a
  // new pod's would be.
  fit::NodeDevices node = in.node;
  for (const fit::ContainerDevices& devices : in.allocation) {
    for (const fit::ContainerDevice& dv : devices) {
      fit::GpuDevice* g = find_gpu(node, dv.uuid);
      if (g == nullptr)
        return refuse("GPU " + dv.uuid + " is no longer registered on " + node.name);
      g->used_tenants = std::max(0, g->used_tenants - 1);
      g->used_mem_mib = std::max(0, g->used_mem_mib - dv.mem_mib);
      g->used_cores = std::max(0, g->used_cores - dv.cores);
    }
  }
  d.devices = in.allocation;
  int64_t grow_mem = 0;
  int64_t grow_cores = 0;
  for (size_t c = 0; c < d.devices.size(); ++c) {
    for (fit::ContainerDevice& dv : d.devices[c]) {
      fit::GpuDevice* g = find_gpu(node, dv.uuid);
      if (const ResizeTarget* t = wanted[c]) {
        const int32_t mem = t->mem_mib.value_or(dv.mem_mib);
        const int32_t cores = t->cores.value_or(dv.cores);
        if (g->mode == fit::kModeMps) {
          if (auto why = protocol::mps_resize_refusal(uint64_t(dv.mem_mib) << 20,
                                                      uint64_t(mem) << 20, dv.cores, cores))
            return refuse(*why);
        }
        // What does not grow always fits: the pod already holds it.
        if (mem > dv.mem_mib || cores > dv.cores) {
          fit::PodOptions options = in.options;
          options.use_uuids = {dv.uuid};
          options.nouse_uuids.clear();
          fit::ContainerRequest req;
          req.nums = 1;
          req.type = dv.type.empty() ? fit::kVendorNvidia : dv.type;
          req.mem_mib = mem;
          req.cores = cores;
          auto pod = fit::PreparedPod::make(fit::PodRequest{{req}}, options);
          if (!pod) return refuse(pod.error().message);
          if (auto placed = fit::place_pod(node, *pod); !placed)
            return refuse("does not fit " + dv.uuid + ": " + placed.error().message);
        }
        grow_mem += int64_t{mem} - dv.mem_mib;
        grow_cores += int64_t{cores} - dv.cores;
        dv.mem_mib = mem;
        dv.cores = cores;
      }
      g->used_tenants += 1;
      g->used_mem_mib += dv.mem_mib;
      g->used_cores += dv.cores;
    }
  }
  if ((grow_mem > 0 || grow_cores > 0) && quota.check) {
    std::string why = quota.check(quota.ns, quota.used, std::max<int64_t>(grow_mem, 0),
                                  std::max<int64_t>(grow_cores, 0));
    if (!why.empty()) return refuse(why);
  }
  d.changed = d.devices != in.allocation;
  return d;
}

}  // namespace hami::scheduler
