#pragma once
// kube-scheduler calls prioritize right after filter, for the same pod, with
// the nodes filter kept. Filter has just looked every one of them up, so it
// leaves their scores here, and prioritize answers from them instead of
// looking 5,000 nodes up again (half of prioritize's time on the build
// machine). The memo holds one pod; it answers only for the same pod UID, the
// same cache version (nothing placed or removed since) and exactly the same
// node names, so its answer is always the one prioritize would compute.
//
//   memo.store(uid, view.version(), kept_names, kept_scores);   // in filter
//   if (auto s = memo.find(uid, view.version(), names)) ...      // in prioritize

#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace hami::scheduler {

class ScoreMemo {
 public:
  // scores[i] is names[i]'s fit::node_score (-1: not registered).
  void store(const std::string& uid, uint64_t version, std::span<const std::string> names,
             std::vector<float> scores);
  std::optional<std::vector<float>> find(const std::string& uid, uint64_t version,
                                         std::span<const std::string> names) const;

 private:
  mutable std::mutex mu_;
  std::string uid_;
  uint64_t version_ = 0;
  std::vector<std::string> names_;
  std::vector<float> scores_;
};

}  // namespace hami::scheduler
