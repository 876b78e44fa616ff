#include "deviceplugin/mig_manager.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <utility>

namespace hami::deviceplugin {

namespace {

// The PID in a lock file; 0 when it holds none.
pid_t lock_holder(const std::string& path) {
  std::ifstream in(path);
  long pid = 0;
  if (!(in >> pid) || pid <= 0) return 0;
  return static_cast<pid_t>(pid);
}

bool running(pid_t pid) {
  return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM);
}

// A lock file without a PID is one being written this instant, or one
// another writer (upstream's plugin) left without a PID: the first is held,
// the second stale once it is older than any apply takes to start.
constexpr auto kUnnamedLockFresh = std::chrono::seconds(10);

bool held_by_someone(const std::string& path) {
  const pid_t holder = lock_holder(path);
  if (holder != 0) return running(holder);
  std::error_code ec;
  const auto mtime = std::filesystem::last_write_time(path, ec);
  if (ec) return false;
  return std::filesystem::file_time_type::clock::now() - mtime < kUnnamedLockFresh;
}

}  // namespace

Result<MigApplyLock> MigApplyLock::take(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  for (int attempt = 0; attempt < 2; ++attempt) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      const std::string pid = std::to_string(::getpid()) + "\n";
      const bool ok = ::write(fd, pid.data(), pid.size()) == static_cast<ssize_t>(pid.size());
      ::close(fd);
      if (!ok) {
        ::unlink(path.c_str());
        return Error{"cannot write " + path};
      }
      return MigApplyLock(path);
    }
    if (errno != EEXIST) return Error{"cannot create " + path + ": " + std::strerror(errno)};
    if (held_by_someone(path)) {
      const pid_t holder = lock_holder(path);
      return Error{path + " is held" +
                   (holder != 0 ? " by PID " + std::to_string(holder) : std::string()) +
                   ": another MIG change is in progress"};
    }
    ::unlink(path.c_str());  // stale: its holder died mid-apply
  }
  return Error{"cannot take " + path};
}

bool MigApplyLock::held(const std::string& path) {
  if (::access(path.c_str(), F_OK) != 0) return false;
  return held_by_someone(path);
}

MigApplyLock::~MigApplyLock() {
  if (!path_.empty()) ::unlink(path_.c_str());
}

MigRegistration mig_registration(std::string_view gpu_name,
                                 const std::vector<nvml::GiProfile>& profiles,
                                 const std::vector<fit::MigAllowEntry>& allowlist) {
  std::vector<fit::MigProfileSpec> specs;
  unsigned most_slices = 0;
  for (const nvml::GiProfile& p : profiles) {
    fit::MigProfileSpec f;
    f.name = p.name;
    f.memory_mib = static_cast<int32_t>(std::min<uint64_t>(p.memory_mib, INT32_MAX));
    f.slices = static_cast<int32_t>(p.slices);
    for (const nvml::GiPlacement& pl : p.placements)
      f.placements.push_back({pl.start, pl.size});
    specs.push_back(std::move(f));
    most_slices = std::max(most_slices, p.slices);
  }
  MigRegistration out;
  for (const fit::MigProfileSpec& f : fit::allowed_mig_profiles(gpu_name, allowlist, specs)) {
    protocol::MigProfileInfo info;
    info.name = f.name;
    info.memory = f.memory_mib;
    info.core = most_slices == 0 ? 0 : f.slices * 100 / static_cast<int32_t>(most_slices);
    info.slice_count = f.slices;
    info.placements = f.placements;
    for (const nvml::GiProfile& p : profiles) {
      if (p.name == f.name) out.count = std::max(out.count, static_cast<int32_t>(p.instances));
    }
    out.profiles.push_back(std::move(info));
  }
  return out;
}

namespace {

Result<unsigned> profile_id(nvml::MigControl& control, int gpu, const std::string& name) {
  auto ps = control.profiles(gpu);
  if (!ps) return ps.error();
  for (const nvml::GiProfile& p : *ps) {
    if (p.name == name) return p.id;
  }
  return Error{"GPU " + std::to_string(gpu) + " has no MIG profile " + name};
}

}  // namespace

Result<std::vector<protocol::MigAllocation>> MigManager::realise(
    std::vector<protocol::MigAllocation> allocs, const MigGpus& gpus,
    const std::function<Result<void>(const std::vector<protocol::MigAllocation>&)>& commit) {
  auto lock = MigApplyLock::take(lock_path_);
  if (!lock) return lock.error();
  // What this call made, to undo on failure.
  std::vector<std::pair<int, unsigned>> made;
  auto undo = [&](Error why) -> Error {
    for (auto it = made.rbegin(); it != made.rend(); ++it) {
      if (auto r = control_.destroy(it->first, it->second); !r)
        why.message += "; undoing, " + r.error().message;
    }
    return why;
  };
  for (protocol::MigAllocation& a : allocs) {
    auto g = gpus.find(a.gpu_uuid);
    if (g == gpus.end()) return undo(Error{a.gpu_uuid + " is not a GPU in MIG mode on this node"});
    if (a.realised()) {
      // Allocate again for a pod whose instance exists (kubelet restarted):
      // keep it; one that is gone is made again.
      auto live = control_.instances(g->second);
      if (!live) return undo(live.error());
      const bool exists = std::any_of(live->begin(), live->end(), [&](const nvml::GpuInstance& gi) {
        return gi.id == *a.gpu_instance_id && gi.placement.start == a.placement.start &&
               gi.placement.size == a.placement.size;
      });
      if (exists) continue;
    }
    auto id = profile_id(control_, g->second, a.profile);
    if (!id) return undo(id.error());
    auto m = control_.create(g->second, *id, {a.placement.start, a.placement.size});
    if (!m) return undo(Error{a.profile + " on " + a.gpu_uuid + ": " + m.error().message});
    made.emplace_back(g->second, m->gpu_instance_id);
    a.mig_uuid = m->mig_uuid;
    a.gpu_instance_id = m->gpu_instance_id;
    a.compute_instance_id = m->compute_instance_id;
  }
  if (auto r = commit(allocs); !r)
    return undo(Error{"recording the MIG devices: " + r.error().message});
  const auto now = std::chrono::steady_clock::now();
  for (const protocol::MigAllocation& a : allocs)
    recent_[{a.gpu_uuid, *a.gpu_instance_id}] = now;
  return allocs;
}

Result<CleanupResult> MigManager::cleanup(const std::vector<protocol::MigAllocation>& in_use,
                                          const MigGpus& gpus) {
  auto lock = MigApplyLock::take(lock_path_);
  if (!lock) return lock.error();
  std::set<std::pair<std::string, unsigned>> keep;
  for (const protocol::MigAllocation& a : in_use) {
    if (a.realised()) keep.emplace(a.gpu_uuid, *a.gpu_instance_id);
  }
  const auto now = std::chrono::steady_clock::now();
  for (auto it = recent_.begin(); it != recent_.end();) {
    if (now - it->second < grace_) {
      keep.insert(it->first);
      ++it;
    } else {
      it = recent_.erase(it);
    }
  }
  CleanupResult out;
  for (const auto& [uuid, index] : gpus) {
    auto live = control_.instances(index);
    if (!live) {
      out.errors.push_back(Error{uuid + ": " + live.error().message});
      continue;
    }
    for (const nvml::GpuInstance& gi : *live) {
      if (keep.count({uuid, gi.id}) != 0) continue;
      if (auto r = control_.destroy(index, gi.id); !r) {
        out.errors.push_back(Error{uuid + ": " + r.error().message});
        continue;
      }
      out.removed.push_back({uuid, gi.id});
    }
  }
  return out;
}

}  // namespace hami::deviceplugin
