#include "fit/mig_geometry.hpp"

#include <algorithm>
#include <cctype>

namespace hami::fit {

namespace {

// Upper-case words split at ' ', '-' and '_'.
std::vector<std::string> words(std::string_view s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == ' ' || c == '-' || c == '_') {
      if (!cur.empty()) out.push_back(std::move(cur));
      cur.clear();
    } else {
      cur.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

// Form factors the device config's model names carry and NVML's names do
// not ("NVIDIA H100 80GB HBM3" is an SXM5 board): they do not decide a match.
bool form_factor(const std::string& w) {
  return w.rfind("SXM", 0) == 0 || w == "PCIE" || w == "NVL";
}

}  // namespace

bool mig_model_matches(std::string_view gpu_name, std::string_view model) {
  const std::vector<std::string> name = words(gpu_name);
  const std::vector<std::string> want = words(model);
  bool any = false;
  for (const std::string& w : want) {
    if (std::find(name.begin(), name.end(), w) != name.end()) {
      any = true;
      continue;
    }
    if (!form_factor(w)) return false;
  }
  return any;
}

std::vector<MigProfileSpec> allowed_mig_profiles(std::string_view gpu_name,
                                                 const std::vector<MigAllowEntry>& allowlist,
                                                 const std::vector<MigProfileSpec>& gpu_profiles) {
  const MigAllowEntry* entry = nullptr;
  for (const MigAllowEntry& e : allowlist) {
    for (const std::string& m : e.models) {
      if (mig_model_matches(gpu_name, m)) entry = &e;
    }
    if (entry != nullptr) break;
  }
  if (entry == nullptr) return gpu_profiles;
  std::vector<MigProfileSpec> out;
  for (const MigProfileSpec& p : gpu_profiles) {
    if (std::find(entry->profiles.begin(), entry->profiles.end(), p.name) != entry->profiles.end())
      out.push_back(p);
  }
  return out;
}

std::optional<MigChoice> choose_mig(const std::vector<MigProfileSpec>& allowed,
                                    const std::vector<protocol::MigPlacement>& taken,
                                    int32_t mem_mib) {
  std::vector<const MigProfileSpec*> order;
  for (const MigProfileSpec& p : allowed) {
    if (p.memory_mib >= mem_mib && !p.placements.empty()) order.push_back(&p);
  }
  // Smallest memory first, then fewest slices, then name, so equal inputs
  // always give the same choice.
  std::stable_sort(order.begin(), order.end(),
                   [](const MigProfileSpec* a, const MigProfileSpec* b) {
                     if (a->memory_mib != b->memory_mib) return a->memory_mib < b->memory_mib;
                     if (a->slices != b->slices) return a->slices < b->slices;
                     return a->name < b->name;
                   });
  for (const MigProfileSpec* p : order) {
    std::vector<protocol::MigPlacement> starts = p->placements;
    std::sort(starts.begin(), starts.end(),
              [](const auto& a, const auto& b) { return a.start < b.start; });
    for (const protocol::MigPlacement& pl : starts) {
      const bool free =
          std::none_of(taken.begin(), taken.end(),
                       [&](const protocol::MigPlacement& t) { return t.overlaps(pl); });
      if (free) return MigChoice{p->name, pl, p->memory_mib};
    }
  }
  return std::nullopt;
}

}  // namespace hami::fit
