#pragma once
// Dynamic MIG in the running plugin (docs/mig-dynamic.md): the MIG manager
// (mig_manager.hpp) behind one mutex, since Allocate (gRPC threads) and the
// cleanup timer both drive it and nvml::MigControl is not thread-safe; and
// which pods' hami.io/vgpu-mig-allocations count.
//
//   DynamicMigService mig(std::move(control), kMigApplyLock, {{"GPU-…", 0}});
//   auto made = mig.realise(entries, commit);                       // Allocate
//   auto r = mig.cleanup(mig_allocations_of(pods, trust, true));    // every 30 s

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/result.hpp"
#include "deviceplugin/mig_manager.hpp"
#include "protocol/decision.hpp"
#include "protocol/mig_allocations.hpp"

namespace hami::deviceplugin {

class DynamicMigService {
 public:
  using Commit = std::function<Result<void>(const std::vector<protocol::MigAllocation>&)>;

  DynamicMigService(std::unique_ptr<nvml::MigControl> control, std::string lock_path, MigGpus gpus)
      : control_(std::move(control)),
        manager_(*control_, lock_path),
        lock_path_(std::move(lock_path)),
        gpus_(std::move(gpus)) {}

  const MigGpus& gpus() const { return gpus_; }
  const std::string& lock_path() const { return lock_path_; }

  Result<std::vector<protocol::MigAllocation>> realise(std::vector<protocol::MigAllocation> allocs,
                                                       const Commit& commit);
  Result<CleanupResult> cleanup(const std::vector<protocol::MigAllocation>& in_use);

 private:
  std::mutex mu_;
  std::unique_ptr<nvml::MigControl> control_;
  MigManager manager_;
  const std::string lock_path_;
  const MigGpus gpus_;
};

// The realised entries of hami.io/vgpu-mig-allocations on `pods` (pod JSON
// objects) whose GPU decision is trusted (protocol/decision.hpp), so a pod
// nobody scheduled cannot keep an instance alive or claim one; with
// `live_only`, only pods that may still run (phase neither Succeeded nor
// Failed). Annotations that do not decode are skipped.
std::vector<protocol::MigAllocation> mig_allocations_of(const std::vector<nlohmann::json>& pods,
                                                        const protocol::DecisionTrust& trust,
                                                        bool live_only);

}  // namespace hami::deviceplugin
