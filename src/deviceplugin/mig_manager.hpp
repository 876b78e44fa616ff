#pragma once
// Dynamic MIG on the node (docs/mig.md): at Allocate, the MIG devices the
// scheduler reserved for a container in hami.io/vgpu-mig-allocations are made
// (nvml/mig_control.hpp) and recorded; from time to time, the instances no
// live pod's allocations name are removed. Both run holding the apply lock,
// upstream's /tmp/hami/hami-mig-apply.lock: while that file exists the
// plugin's health checks and registration, and the node agent's feedback
// loop, leave the GPUs alone, as NVML answers oddly mid-change.
//
// All or nothing: if making any of a container's MIG devices fails, or
// recording them (`commit`, which writes the annotation back) fails, the ones
// made by this call are destroyed again, so a node is never left with
// instances no pod knows of.
//
//   hami::deviceplugin::MigManager mgr(*control, "/tmp/hami/hami-mig-apply.lock");
//   auto done = mgr.realise(container_allocs, {{"GPU-…", 0}}, [&](const auto& all) {
//     return patch_pod_annotation(encode_mig_allocations(all));
//   });
//   if (done) answer_with((*done)[0].mig_uuid);
//   mgr.cleanup(allocations_of_live_pods, {{"GPU-…", 0}});  // every few seconds

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.hpp"
#include "fit/mig_geometry.hpp"
#include "nvml/mig_control.hpp"
#include "protocol/mig_allocations.hpp"
#include "protocol/node_register.hpp"

namespace hami::deviceplugin {

inline constexpr const char* kMigApplyLock = "/tmp/hami/hami-mig-apply.lock";

// The apply lock: a file holding the holder's PID. Taken with O_EXCL; a file
// whose PID no longer runs is stale (a plugin killed mid-apply) and taken
// over, as is one without a PID older than 10 s (left by another writer).
class MigApplyLock {
 public:
  static Result<MigApplyLock> take(const std::string& path);
  // Whether an apply is in progress (the file exists and its holder runs).
  static bool held(const std::string& path);
  MigApplyLock(MigApplyLock&& o) noexcept : path_(std::move(o.path_)) { o.path_.clear(); }
  MigApplyLock& operator=(MigApplyLock&&) = delete;
  MigApplyLock(const MigApplyLock&) = delete;
  ~MigApplyLock();

 private:
  explicit MigApplyLock(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// What a GPU in dynamic MIG mode registers (upstream: MIGProfiles, and Count
// the most instances any allowed profile can have): the profiles the
// allowlist allows for its NVML name, each with its memory, its share of the
// GPU's compute slices as core percent, its slices and NVML placements.
struct MigRegistration {
  std::vector<protocol::MigProfileInfo> profiles;
  int32_t count = 0;
};
MigRegistration mig_registration(std::string_view gpu_name,
                                 const std::vector<nvml::GiProfile>& profiles,
                                 const std::vector<fit::MigAllowEntry>& allowlist);

// GPU UUID -> NVML index, for the GPUs in MIG operating mode.
using MigGpus = std::map<std::string, int>;

// One instance cleanup removed.
struct RemovedInstance {
  std::string gpu_uuid;
  unsigned gpu_instance_id = 0;
  bool operator==(const RemovedInstance&) const = default;
};

struct CleanupResult {
  std::vector<RemovedInstance> removed;
  std::vector<Error> errors;  // instances it could not remove (in use), GPUs it could not read
};

class MigManager {
 public:
  // `grace`: how long an instance this manager made is kept though no pod's
  // allocations name it yet (the caller's pod list lags the annotation
  // realise() just wrote).
  MigManager(nvml::MigControl& control, std::string lock_path,
             std::chrono::steady_clock::duration grace = std::chrono::minutes(2))
      : control_(control), lock_path_(std::move(lock_path)), grace_(grace) {}

  // Makes every allocation of `allocs` that is not realised, or whose GPU
  // instance is gone, and fills in its MIG UUID and GI/CI IDs; then calls
  // `commit` with all of them. On any failure, the instances this call made
  // are destroyed before the Error returns.
  Result<std::vector<protocol::MigAllocation>> realise(
      std::vector<protocol::MigAllocation> allocs, const MigGpus& gpus,
      const std::function<Result<void>(const std::vector<protocol::MigAllocation>&)>& commit);

  // Destroys every GPU instance on `gpus` that no realised entry of `in_use`
  // names (by GPU UUID and GI ID) and that this manager did not make within
  // the grace period. Goes on past a failure (a process may still hold an
  // instance); an Error only when the apply lock is held elsewhere.
  Result<CleanupResult> cleanup(const std::vector<protocol::MigAllocation>& in_use,
                                const MigGpus& gpus);

 private:
  nvml::MigControl& control_;
  std::string lock_path_;
  std::chrono::steady_clock::duration grace_;
  // Instances realise() made, by (GPU UUID, GI ID), and when.
  std::map<std::pair<std::string, unsigned>, std::chrono::steady_clock::time_point> recent_;
};

}  // namespace hami::deviceplugin
