#include "monitor/agent.hpp"

#include <algorithm>
#include <chrono>
#include <string_view>
#include <unordered_map>

#include "common/log.hpp"
#include "monitor/feedback.hpp"
#include "monitor/host_pid.hpp"
#include "monitor/state_writer.hpp"

namespace hami::monitor {
namespace {

// CUDA's and NVML's UUID strings agree on "GPU-" + 36 characters; upstream
// compares the first 40 bytes, which also ignores anything a writer appended.
std::string_view uuid_key(std::string_view uuid) {
  return uuid.substr(0, std::min<size_t>(uuid.size(), 40));
}

// NVML processes of one GPU by host PID.
using ProcessIndex = std::unordered_map<uint32_t, const GpuProcess*>;

struct GpuIndex {
  std::unordered_map<std::string_view, ProcessIndex> by_uuid;

  explicit GpuIndex(const std::vector<GpuSample>& gpus) {
    for (const GpuSample& g : gpus) {
      ProcessIndex& procs = by_uuid[uuid_key(g.uuid)];
      for (const GpuProcess& p : g.processes)
        procs.emplace(p.pid, &p);
    }
  }
  const ProcessIndex* find(std::string_view uuid) const {
    auto it = by_uuid.find(uuid_key(uuid));
    return it == by_uuid.end() ? nullptr : &it->second;
  }
};

int device_count(const region::RegionSnapshot& s) {
  return static_cast<int>(std::min<uint64_t>(s.device_num, region::kMaxDevices));
}

bool slot_live(const region::SlotSnapshot& s) {
  return s.status != region::kSlotFree && s.liveness != region::Liveness::kDead;
}

uint64_t add_sat(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

}  // namespace

Agent::Agent(AgentOptions options, std::unique_ptr<GpuSampler> sampler, PodDirectory* names)
    : options_(std::move(options)),
      sampler_(std::move(sampler)),
      names_(names),
      files_(options_.hook_path),
      latest_(std::make_shared<NodeView>()) {}

std::shared_ptr<const NodeView> Agent::latest() const {
  std::lock_guard<std::mutex> lock(mu_);
  return latest_;
}

void Agent::note_write_error(const std::string& path, const std::string& message) {
  ++counters_.write_errors;
  auto& last = write_problems_[path];
  if (last == message) return;
  last = message;
  log::warn("not updating %s: %s", path.c_str(), message.c_str());
}

std::shared_ptr<const NodeView> Agent::run_pass() {
  const auto started = std::chrono::steady_clock::now();
  auto view = std::make_shared<NodeView>();
  view->node = options_.node_name;
  view->taken = std::chrono::system_clock::now();
  gpu_time_.begin_pass(started);

  std::vector<ContainerState> states = files_.scan();
  if (sampler_) {
    view->gpus = sampler_->sample();
    for (const GpuSample& g : view->gpus)
      counters_.sampler_errors += g.error.empty() ? 0 : 1;
  }
  const GpuIndex gpu_index(view->gpus);

  bool any_slots = false;
  std::vector<std::string> pod_uids;
  for (const ContainerState& c : states) {
    any_slots |= !c.snapshot.slots.empty();
    pod_uids.push_back(c.ref.pod_uid);
  }
  // /proc is read only when some file holds a process.
  const ProcTable table = any_slots ? ProcTable::scan(options_.proc_root) : ProcTable{};
  if (names_ != nullptr && !pod_uids.empty()) {
    std::sort(pod_uids.begin(), pod_uids.end());
    pod_uids.erase(std::unique(pod_uids.begin(), pod_uids.end()), pod_uids.end());
    names_->refresh_if_unknown(pod_uids);
  }

  std::vector<FeedbackInput> inputs;
  inputs.reserve(states.size());
  for (const ContainerState& c : states) {
    FeedbackInput in;
    in.recent_kernel = c.snapshot.recent_kernel;
    in.utilization_switch = c.snapshot.utilization_switch;
    in.priority = c.snapshot.priority;
    for (int d = 0; d < device_count(c.snapshot); ++d) {
      if (!c.snapshot.uuids[d].empty()) in.gpu_uuids.emplace_back(uuid_key(c.snapshot.uuids[d]));
    }
    inputs.push_back(std::move(in));
  }
  const std::vector<FeedbackOutput> feedback = observe(inputs);

  counters_.unresolved_slots = 0;
  view->containers.reserve(states.size());
  for (size_t i = 0; i < states.size(); ++i) {
    const ContainerState& c = states[i];
    const region::RegionSnapshot& snap = c.snapshot;
    ContainerView cv;
    cv.ref = c.ref;
    cv.path = c.path;
    if (names_ != nullptr) {
      if (auto n = names_->find(c.ref.pod_uid)) {
        cv.pod_namespace = n->pod_namespace;
        cv.pod_name = n->name;
      }
    }
    cv.priority = snap.priority;
    cv.recent_kernel = feedback[i].recent_kernel;
    cv.utilization_switch = feedback[i].utilization_switch;
    cv.active = feedback[i].active;
    if (snap.last_kernel_time && *snap.last_kernel_time != 0) {
      cv.last_kernel_time = snap.last_kernel_time;
    }

    const int ndev = device_count(snap);
    cv.devices.resize(static_cast<size_t>(ndev));
    for (int d = 0; d < ndev; ++d) {
      ContainerDevice& dev = cv.devices[static_cast<size_t>(d)];
      dev.vdevice_index = d;
      dev.uuid = snap.uuids[d];
      dev.memory_limit = snap.memory_limit[d];
      dev.sm_limit = snap.sm_limit[d];
    }

    std::optional<StateWriter> writer;
    bool writer_failed = !options_.write_back;
    auto write = [&](auto&& op) {
      if (writer_failed) return;
      if (!writer) {
        auto w = StateWriter::open(snap);
        if (!w) {
          writer_failed = true;
          note_write_error(c.path, w.error().message);
          return;
        }
        writer.emplace(std::move(*w));
      }
      if (auto r = op(*writer); !r) {
        writer_failed = true;
        note_write_error(c.path, r.error().message);
      }
    };

    for (const region::SlotSnapshot& s : snap.slots) {
      ContainerProcess proc;
      proc.slot = s.index;
      proc.pid = s.pid;
      const bool live = slot_live(s);
      proc.live = live;
      if (live && s.pid > 0) {
        const Resolution r = resolve_host_pid(table, s.pid, s.owner_start_time, c.ref.pod_uid);
        if (r.host_pid) {
          proc.host_pid = *r.host_pid;
          if (*r.host_pid != s.host_pid) {
            write([&](StateWriter& w) { return w.set_host_pid(s.index, *r.host_pid); });
            if (!writer_failed) ++counters_.host_pids_written;
          }
        } else {
          proc.unresolved_reason = std::string(r.reason());
          ++counters_.unresolved_slots;
        }
      }
      for (int d = 0; d < ndev; ++d) {
        ContainerDevice& dev = cv.devices[static_cast<size_t>(d)];
        uint64_t nvml_used = 0;
        unsigned sm = 0;
        if (live) {
          dev.used = add_sat(dev.used, s.used[d].total);
          dev.context = add_sat(dev.context, s.used[d].context);
          dev.module = add_sat(dev.module, s.used[d].module);
          dev.data = add_sat(dev.data, s.used[d].data);
          if (proc.host_pid) {
            if (const ProcessIndex* procs = gpu_index.find(dev.uuid)) {
              auto it = procs->find(static_cast<uint32_t>(*proc.host_pid));
              if (it != procs->end()) {
                nvml_used = it->second->used_bytes;
                sm = it->second->sm;
              }
            }
          }
          dev.nvml_used = add_sat(dev.nvml_used, nvml_used);
          dev.sm_util += sm;
        }
        // Only when sampling ran: without a sampler the fields keep what the
        // library (or nobody) wrote.
        if (sampler_ && (s.nvml_used[d] != nvml_used || s.sm_util[d] != sm)) {
          write([&](StateWriter& w) { return w.set_slot_sample(s.index, d, nvml_used, sm); });
        }
      }
      cv.processes.push_back(std::move(proc));
    }

    for (int d = 0; d < ndev; ++d) {
      ContainerDevice& dev = cv.devices[static_cast<size_t>(d)];
      if (const auto pct = gpu_time_.percent(c.path, snap, d)) {
        dev.sm_util = static_cast<unsigned>(*pct + 0.5);
        dev.sm_from_gpu_time = true;
      }
    }

    if (feedback[i].changed) {
      if (feedback[i].recent_kernel != snap.recent_kernel) {
        write([&](StateWriter& w) -> Result<void> {
          auto r = w.update_recent_kernel(snap.recent_kernel, feedback[i].recent_kernel);
          if (!r) return r.error();
          return {};
        });
      }
      if (feedback[i].utilization_switch != snap.utilization_switch) {
        write([&](StateWriter& w) {
          return w.set_utilization_switch(feedback[i].utilization_switch);
        });
      }
    }
    if (!writer_failed && writer) write_problems_.erase(c.path);
    view->containers.push_back(std::move(cv));
  }

  gpu_time_.end_pass();
  ++counters_.passes;
  counters_.file_problems = files_.problems().size();
  view->counters = counters_;
  view->pass_duration = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - started);

  std::lock_guard<std::mutex> lock(mu_);
  latest_ = view;
  return view;
}

}  // namespace hami::monitor
