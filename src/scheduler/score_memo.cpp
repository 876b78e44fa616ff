#include "scheduler/score_memo.hpp"

#include <algorithm>

namespace hami::scheduler {

void ScoreMemo::store(const std::string& uid, uint64_t version, std::span<const std::string> names,
                      std::vector<float> scores) {
  if (uid.empty() || scores.size() != names.size()) return;
  const std::lock_guard lock(mu_);
  uid_ = uid;
  version_ = version;
  names_.assign(names.begin(), names.end());
  scores_ = std::move(scores);
}

std::optional<std::vector<float>> ScoreMemo::find(const std::string& uid, uint64_t version,
                                                  std::span<const std::string> names) const {
  if (uid.empty()) return std::nullopt;
  const std::lock_guard lock(mu_);
  if (uid != uid_ || version != version_ || names.size() != names_.size() ||
      !std::equal(names.begin(), names.end(), names_.begin())) {
    return std::nullopt;
  }
  return scores_;
}

}  // namespace hami::scheduler
