#include "monitor/nvml_sampler.hpp"

#include <algorithm>
#include <chrono>
#include <unordered_map>

#include "common/log.hpp"
#include "nvml/nvml.hpp"

namespace hami::monitor {
namespace {

uint64_t now_us() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace

Result<std::unique_ptr<NvmlSampler>> NvmlSampler::open(const std::string& library_path) {
  auto lib = nvml::Library::open(library_path);
  if (!lib) return lib.error();
  return std::unique_ptr<NvmlSampler>(new NvmlSampler(std::move(*lib)));
}

NvmlSampler::NvmlSampler(std::unique_ptr<nvml::Library> lib) : lib_(std::move(lib)) {}
NvmlSampler::~NvmlSampler() = default;

std::vector<GpuSample> NvmlSampler::sample() {
  std::vector<GpuSample> out;
  auto count = lib_->device_count();
  if (!count) {
    log::warn("NVML: cannot count GPUs: %s", count.error().message.c_str());
    return out;
  }
  const auto n = static_cast<size_t>(*count);
  last_seen_us_.resize(n, 0);
  logged_errors_.resize(n);
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const int index = static_cast<int>(i);
    GpuSample g;
    g.index = index;
    auto fail = [&](const Error& e) {
      g.error = e.message;
      if (logged_errors_[i] != e.message) {
        logged_errors_[i] = e.message;
        log::warn("GPU %d: %s", index, e.message.c_str());
      }
    };
    auto info = lib_->device(index);
    if (!info) {
      fail(info.error());
      out.push_back(std::move(g));
      continue;
    }
    g.uuid = info->uuid;
    g.name = info->name;
    if (auto m = lib_->memory(index)) {
      g.memory_total = m->total;
      g.memory_used = m->used;
    } else {
      fail(m.error());
    }
    // A MIG-enabled GPU has no utilisation to give (NOT_SUPPORTED): not an error.
    auto mig = lib_->mig_mode(index);
    const bool mig_on = mig && mig->current;
    if (auto u = lib_->utilization(index)) {
      g.utilization = u->gpu;
      g.memory_utilization = u->memory;
    } else if (g.error.empty() && !(mig_on && lib_->last_error() == nvml::kNotSupported)) {
      fail(u.error());
    }
    std::unordered_map<uint32_t, size_t> at;
    if (auto procs = lib_->processes(index)) {
      for (const nvml::ProcessMemory& p : *procs) {
        at.emplace(p.pid, g.processes.size());
        g.processes.push_back(GpuProcess{p.pid, p.used_bytes, 0});
      }
    } else if (g.error.empty()) {
      fail(procs.error());
    }
    // SM samples since the previous period; a process's several samples are
    // averaged (NVML keeps one per driver sampling interval, ~1/6 s).
    const uint64_t since = last_seen_us_[i] != 0 ? last_seen_us_[i] : now_us() - 2'000'000;
    if (auto samples = lib_->process_samples(index, since)) {
      std::unordered_map<uint32_t, std::pair<uint64_t, uint64_t>> sums;  // pid -> (sum, n)
      for (const nvml::ProcessSample& s : *samples) {
        last_seen_us_[i] = std::max(last_seen_us_[i], s.timestamp_us);
        auto& [sum, k] = sums[s.pid];
        sum += s.sm;
        ++k;
      }
      for (const auto& [pid, sk] : sums) {
        const auto sm = static_cast<unsigned>(std::min<uint64_t>(100, sk.first / sk.second));
        auto it = at.find(pid);
        if (it != at.end()) {
          g.processes[it->second].sm = sm;
        } else {
          at.emplace(pid, g.processes.size());
          g.processes.push_back(GpuProcess{pid, 0, sm});
        }
      }
    }
    if (g.error.empty()) logged_errors_[i].clear();
    const std::string parent = g.uuid;
    out.push_back(std::move(g));
    if (mig_on) add_mig_devices(index, parent, out);
  }
  return out;
}

void NvmlSampler::add_mig_devices(int index, const std::string& parent,
                                  std::vector<GpuSample>& out) {
  auto migs = lib_->mig_devices(index);
  if (!migs) {
    log::warn("GPU %d: its MIG devices cannot be listed: %s", index, migs.error().message.c_str());
    return;
  }
  for (const nvml::MigDevice& d : *migs) {
    GpuSample m;
    m.index = index;
    m.uuid = d.uuid;
    m.name = d.name;
    m.memory_total = d.memory_total;
    m.mig = MigOf{parent, d.profile, d.gpu_instance_id, d.compute_instance_id};
    if (auto mem = lib_->mig_memory(index, d.mig_index)) {
      m.memory_used = mem->used;
    } else {
      m.error = mem.error().message;
    }
    if (auto procs = lib_->mig_processes(index, d.mig_index)) {
      for (const nvml::ProcessMemory& p : *procs)
        m.processes.push_back(GpuProcess{p.pid, p.used_bytes, 0});
    } else if (m.error.empty()) {
      m.error = procs.error().message;
    }
    out.push_back(std::move(m));
  }
}

}  // namespace hami::monitor
