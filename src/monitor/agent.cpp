#include "monitor/agent.hpp"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <set>
#include <string_view>
#include <unordered_map>

#include "common/bytes.hpp"
#include "common/log.hpp"
#include "common/unique_fd.hpp"
#include "monitor/feedback.hpp"
#include "monitor/state_writer.hpp"
#include "region/control_file.hpp"
#include "region/process_identity.hpp"

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

// A container's devices as the agent believes them: the device plugin's
// record when it lists the GPUs, otherwise the state file's table.
struct Device {
  std::string uuid;
  uint64_t memory_limit = 0;
  uint64_t sm_limit = 0;
};

std::vector<Device> devices_of(const ContainerState& c) {
  std::vector<Device> out;
  if (c.record && !c.record->gpu_uuids.empty()) {
    for (size_t d = 0; d < c.record->gpu_uuids.size(); ++d) {
      out.push_back({c.record->gpu_uuids[d], c.record->memory_limit[d], c.record->sm_limit[d]});
    }
    return out;
  }
  const region::RegionSnapshot& s = c.snapshot;
  for (int d = 0; d < device_count(s); ++d)
    out.push_back({s.uuids[d], s.memory_limit[d], s.sm_limit[d]});
  return out;
}

// Upstream's values: the library writes 2, the agent decrements and writes
// -1 to block. Anything else was written by hand and means nothing.
int32_t sane_recent_kernel(int32_t v) {
  return v >= -1 && v <= 2 ? v : 0;
}

// 0 high, 1 low; anything else (INT32_MIN would outrank every tenant) is low.
int32_t sane_priority(int32_t v) {
  return v == 0 || v == 1 ? v : 1;
}

}  // namespace

Agent::Agent(AgentOptions options, std::unique_ptr<GpuSampler> sampler, PodDirectory* names)
    : options_(std::move(options)),
      sampler_(std::move(sampler)),
      names_(names),
      files_(options_.hook_path, options_.limits),
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
  bool any_gpu_process = false;
  std::vector<std::string> pod_uids;
  for (const ContainerState& c : states) {
    any_slots |= !c.snapshot.slots.empty();
    pod_uids.push_back(c.ref.pod_uid);
  }
  for (const GpuSample& g : view->gpus)
    any_gpu_process |= !g.processes.empty();
  // /proc is read only when some file or some GPU holds a process.
  const bool any_container = !states.empty() || !files_.unstarted().empty();
  const ProcTable table = any_slots || (any_gpu_process && any_container)
                              ? ProcTable::scan(options_.proc_root)
                              : ProcTable{};
  if (names_ != nullptr && !pod_uids.empty()) {
    std::sort(pod_uids.begin(), pod_uids.end());
    pod_uids.erase(std::unique(pod_uids.begin(), pod_uids.end()), pod_uids.end());
    names_->refresh_if_unknown(pod_uids);
  }

  std::vector<std::vector<Device>> devices;
  std::vector<FeedbackInput> inputs;
  devices.reserve(states.size());
  inputs.reserve(states.size());
  for (const ContainerState& c : states) {
    devices.push_back(devices_of(c));
    FeedbackInput in;
    in.recent_kernel = sane_recent_kernel(c.snapshot.recent_kernel);
    in.utilization_switch = c.snapshot.utilization_switch;
    in.priority = c.record ? c.record->priority.value_or(1) : sane_priority(c.snapshot.priority);
    // Exempt from blocking only on the plugin's word: a job directory's mps
    // file is the tenant's to write (a pod of upstream's plugin has no
    // record). A read-only pass (vgpu top) only shows, so it may take it.
    in.mps_client = c.mps_thread_percentage && (c.record || !options_.write_back);
    for (const Device& d : devices.back()) {
      if (!d.uuid.empty()) in.gpu_uuids.emplace_back(uuid_key(d.uuid));
    }
    inputs.push_back(std::move(in));
  }
  const std::vector<FeedbackOutput> feedback = observe(inputs);

  counters_.unresolved_slots = 0;
  std::set<std::string> paths_seen;
  view->containers.reserve(states.size());
  for (size_t i = 0; i < states.size(); ++i) {
    const ContainerState& c = states[i];
    const region::RegionSnapshot& snap = c.snapshot;
    paths_seen.insert(c.path);
    ContainerView cv;
    cv.ref = c.ref;
    cv.path = c.path;
    if (names_ != nullptr) {
      if (auto n = names_->find(c.ref.pod_uid)) {
        cv.pod_namespace = n->pod_namespace;
        cv.pod_name = n->name;
      }
    }
    cv.priority = inputs[i].priority;
    cv.recent_kernel = feedback[i].recent_kernel;
    cv.utilization_switch = feedback[i].utilization_switch;
    cv.active = feedback[i].active;
    if (snap.last_kernel_time && *snap.last_kernel_time != 0) {
      cv.last_kernel_time = snap.last_kernel_time;
    }

    const std::vector<Device>& devs = devices[i];
    const int ndev = static_cast<int>(devs.size());
    cv.devices.resize(devs.size());
    for (int d = 0; d < ndev; ++d) {
      ContainerDevice& dev = cv.devices[static_cast<size_t>(d)];
      dev.vdevice_index = d;
      dev.uuid = devs[static_cast<size_t>(d)].uuid;
      dev.memory_limit = devs[static_cast<size_t>(d)].memory_limit;
      dev.sm_limit = devs[static_cast<size_t>(d)].sm_limit;
      // Under MPS the server caps the SMs; no CUDA_DEVICE_SM_LIMIT is set.
      if (c.mps_thread_percentage) dev.sm_limit = *c.mps_thread_percentage;
    }
    cv.mps_thread_percentage = c.mps_thread_percentage;

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
          dev.spilled = add_sat(dev.spilled, s.used[d].spilled);
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

    if (feedback[i].recent_kernel != snap.recent_kernel) {
      write([&](StateWriter& w) -> Result<void> {
        auto r = w.update_recent_kernel(snap.recent_kernel, feedback[i].recent_kernel);
        if (!r) return r.error();
        return {};
      });
    }
    if (feedback[i].utilization_switch != snap.utilization_switch) {
      write(
          [&](StateWriter& w) { return w.set_utilization_switch(feedback[i].utilization_switch); });
    }
    if (!writer_failed && writer) write_problems_.erase(c.path);
    // The control file is what our library reads; the state file's copy is
    // for upstream's. Only a container the plugin made has one.
    if (options_.write_back && c.record) {
      const region::ControlState want{feedback[i].utilization_switch,
                                      feedback[i].recent_kernel < 0 ? 1 : 0};
      paths_seen.insert(c.control_path);
      if (auto r = region::update_control(c.control_path, want); !r) {
        if (r.error().sys_errno != ENOENT) note_write_error(c.control_path, r.error().message);
      } else {
        write_problems_.erase(c.control_path);
      }
    }
    view->containers.push_back(std::move(cv));
  }
  // Files that went away take their remembered problems with them.
  std::erase_if(write_problems_, [&](const auto& kv) { return paths_seen.count(kv.first) == 0; });

  check_pods(*view, states, table);

  gpu_time_.end_pass();
  ++counters_.passes;
  counters_.file_problems = files_.problems().size();
  counters_.containers_skipped = files_.skipped_containers();
  view->counters = counters_;
  view->pass_duration = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - started);

  std::lock_guard<std::mutex> lock(mu_);
  latest_ = view;
  return view;
}

// Every pod with a memory limit on a GPU, against what NVML says its processes
// hold there: the processes resolved from its containers' slots, and every
// process whose cgroup names the pod (a process that never registered, or
// whose slot the tenant erased, still counts). Nothing here is read from a
// file the tenant writes but the slots' PIDs, and a slot cannot claim another
// pod's process (resolve_host_pid).
void Agent::check_pods(NodeView& view, const std::vector<ContainerState>& states,
                       const ProcTable& table) {
  struct Acc {
    uint64_t limit = 0;
    bool unlimited = false;
    std::set<uint32_t> pids;
    std::string ns, name;
  };
  std::map<std::pair<std::string, std::string>, Acc> acc;  // (pod UID, GPU UUID key)
  for (size_t i = 0; i < states.size(); ++i) {
    const ContainerState& c = states[i];
    const ContainerView& cv = view.containers[i];
    for (const ContainerDevice& d : cv.devices) {
      if (d.uuid.empty()) continue;
      Acc& a = acc[{c.ref.pod_uid, std::string(uuid_key(d.uuid))}];
      a.ns = cv.pod_namespace;
      a.name = cv.pod_name;
      if (d.memory_limit == 0) a.unlimited = true;
      a.limit = add_sat(a.limit, d.memory_limit);
      for (const ContainerProcess& p : cv.processes) {
        if (p.live && p.host_pid) a.pids.insert(static_cast<uint32_t>(*p.host_pid));
      }
    }
  }
  // Containers with no state file count by their record alone: their pods'
  // processes are found through their cgroups below.
  for (const UnstartedContainer& u : files_.unstarted()) {
    std::string ns, name;
    if (names_ != nullptr) {
      if (auto n = names_->find(u.ref.pod_uid)) {
        ns = n->pod_namespace;
        name = n->name;
      }
    }
    for (size_t d = 0; d < u.record.gpu_uuids.size(); ++d) {
      Acc& a = acc[{u.ref.pod_uid, std::string(uuid_key(u.record.gpu_uuids[d]))}];
      a.ns = ns;
      a.name = name;
      if (u.record.memory_limit[d] == 0) a.unlimited = true;
      a.limit = add_sat(a.limit, u.record.memory_limit[d]);
    }
  }
  if (acc.empty()) {
    over_passes_.clear();
    last_limit_.clear();
    lowered_from_.clear();
    return;
  }
  const GpuIndex gpu_index(view.gpus);
  for (const GpuSample& g : view.gpus) {
    for (const GpuProcess& p : g.processes) {
      const ProcEntry* e = table.find_host(static_cast<pid_t>(p.pid));
      if (e == nullptr || e->pod_uid.empty()) continue;
      auto it = acc.find({e->pod_uid, std::string(uuid_key(g.uuid))});
      if (it != acc.end()) it->second.pids.insert(p.pid);
    }
  }

  std::map<std::pair<std::string, std::string>, int> still_over;
  std::map<std::pair<std::string, std::string>, uint64_t> limits;
  std::map<std::pair<std::string, std::string>, uint64_t> lowered;
  for (auto& [key, a] : acc) {
    const uint64_t now_limit = a.unlimited || a.limit == 0 ? UINT64_MAX : a.limit;
    limits[key] = now_limit;
    uint64_t before = 0;
    if (auto it = lowered_from_.find(key); it != lowered_from_.end()) before = it->second;
    if (auto it = last_limit_.find(key); it != last_limit_.end() && it->second > now_limit)
      before = std::max(before, it->second);
    if (a.unlimited || a.limit == 0) continue;
    PodDeviceCheck check;
    check.pod_uid = key.first;
    check.pod_namespace = a.ns;
    check.pod_name = a.name;
    check.uuid = key.second;
    check.limit = a.limit;
    const ProcessIndex* procs = gpu_index.find(key.second);
    for (uint32_t pid : a.pids) {
      if (procs == nullptr) break;
      auto it = procs->find(pid);
      if (it == procs->end()) continue;
      check.nvml_used = add_sat(check.nvml_used, it->second->used_bytes);
      check.host_pids.push_back(pid);
    }
    // Lowered below use by a resize: judged by the limit before until under.
    uint64_t allowed = a.limit;
    if (before > a.limit && check.nvml_used > add_sat(a.limit, options_.over_limit_margin)) {
      lowered[key] = before;
      allowed = before;
    }
    if (check.nvml_used > add_sat(allowed, options_.over_limit_margin)) {
      const int passes = over_passes_[key] + 1;
      still_over[key] = passes;
      // Two passes in a row: not a process caught between two NVML samples.
      check.over = passes >= 2;
      const std::string who = (a.name.empty() ? key.first : a.ns + "/" + a.name);
      if (passes == 2) {
        log::warn("pod %s uses %s on %s by NVML, over its limit of %s (processes %zu); %s",
                  who.c_str(), format_bytes(check.nvml_used).c_str(), key.second.c_str(),
                  format_bytes(a.limit).c_str(), check.host_pids.size(),
                  options_.over_limit_action == OverLimitAction::kKill
                      ? "killing them (--over-limit-action kill)"
                      : "reported as hami_pod_memory_over_limit (--over-limit-action report)");
      }
      if (check.over && options_.over_limit_action == OverLimitAction::kKill) {
        for (uint32_t pid : check.host_pids) {
          if (kill_process(pid, table)) ++check.killed;
        }
        counters_.over_limit_kills += static_cast<uint64_t>(check.killed);
      }
    }
    view.pod_checks.push_back(std::move(check));
  }
  over_passes_ = std::move(still_over);
  last_limit_ = std::move(limits);
  lowered_from_ = std::move(lowered);
}

// SIGKILL through a pidfd, after checking that the PID still names the process
// the pass saw (same start time): a PID reused since must not be hit. Kernels
// before 5.3 have no pidfd; there the window between the check and kill(2) is
// what remains.
bool Agent::kill_process(uint32_t host_pid, const ProcTable& table) {
  const ProcEntry* e = table.find_host(static_cast<pid_t>(host_pid));
  if (e == nullptr) return false;
  UniqueFd pidfd{static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(host_pid), 0))};
  if (pidfd.get() < 0 && errno != ENOSYS) return false;  // gone already, or not ours to signal
  auto now = region::read_process_identity(static_cast<pid_t>(host_pid), options_.proc_root);
  if (!now || now->start_time != e->start_time) return false;
  const long rc = pidfd.get() >= 0
                      ? ::syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0)
                      : ::kill(static_cast<pid_t>(host_pid), SIGKILL);
  if (rc != 0) {
    log::warn("cannot kill process %u: %s", host_pid, std::strerror(errno));
    return false;
  }
  log::warn("killed process %u (over its pod's GPU memory limit)", host_pid);
  return true;
}

}  // namespace hami::monitor
