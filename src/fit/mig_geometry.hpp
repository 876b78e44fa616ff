#pragma once
// Dynamic MIG's choice of geometry (docs/mig.md): for a GPU in MIG operating
// mode that is not yet cut for the pod, which MIG profile to make and where on
// the GPU, given the profiles the device config allows for its model
// (migProfileAllowlist) and the placements already taken by instances that
// exist or are reserved in pods' hami.io/vgpu-mig-allocations. Upstream
// v2.10's rule (selectMigCandidate): the smallest profile whose memory holds
// the request, fewest slices among equals; here the first free placement of
// it, lowest memory slice first. When no allowed profile has a free placement
// the GPU does not fit (CardMigTopologyInfeasible).
//
//   auto allowed = hami::fit::allowed_mig_profiles("NVIDIA H100 80GB HBM3", allowlist, profiles);
//   auto pick = hami::fit::choose_mig(allowed, taken, /*mem_mib=*/20000);
//   if (pick) reserve(pick->profile, pick->placement);   // "2g.20gb" at {0, 2}

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/mig_allocations.hpp"

namespace hami::fit {

// One GPU-instance profile a GPU offers, as its registration carries it.
struct MigProfileSpec {
  std::string name;                                // "3g.40gb"
  int32_t memory_mib = 0;                          // the MIG device's memory
  int32_t slices = 0;                              // compute slices (of 7 on an H100)
  std::vector<protocol::MigPlacement> placements;  // every placement NVML allows
  bool operator==(const MigProfileSpec&) const = default;
};

// One entry of the device config's migProfileAllowlist.
struct MigAllowEntry {
  std::vector<std::string> models;    // "H100-SXM5-80GB", "A100-PCIE-40GB"
  std::vector<std::string> profiles;  // "1g.10gb", "3g.40gb"
};

// Whether a GPU's NVML name is one of the entry's models: case-insensitive,
// '-' and ' ' alike, every word of the model in the name ("H100-SXM5-80GB"
// and "H100-PCIE-80GB" both match "NVIDIA H100 80GB HBM3" in their H100 and
// 80GB, not in SXM5 or PCIE, which NVML names do not carry; so a model word
// matches when the name holds it or it is a form factor: SXM*, PCIE, NVL).
bool mig_model_matches(std::string_view gpu_name, std::string_view model);

// The GPU's profiles the allowlist allows for its model, in the GPU's
// order; every profile when the allowlist has no entry for the model (an
// operator who names no model limits none).
std::vector<MigProfileSpec> allowed_mig_profiles(std::string_view gpu_name,
                                                 const std::vector<MigAllowEntry>& allowlist,
                                                 const std::vector<MigProfileSpec>& gpu_profiles);

struct MigChoice {
  std::string profile;
  protocol::MigPlacement placement;
  int32_t memory_mib = 0;
  bool operator==(const MigChoice&) const = default;
};

// The profile and placement for a request of `mem_mib` (0: any size),
// nullopt when none of `allowed` both holds it and has a placement that
// overlaps none of `taken`.
std::optional<MigChoice> choose_mig(const std::vector<MigProfileSpec>& allowed,
                                    const std::vector<protocol::MigPlacement>& taken,
                                    int32_t mem_mib);

}  // namespace hami::fit
