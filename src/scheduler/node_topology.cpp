#include "scheduler/node_topology.hpp"

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "protocol/annotations.hpp"
#include "protocol/node_register.hpp"

namespace hami::scheduler {

Result<fit::LinkScores> node_links(const k8s::StringMap& annotations,
                                   const std::vector<fit::GpuDevice>& inventory) {
  const auto score_text = annotations.find(protocol::kNodeScore);
  if (score_text == annotations.end() || inventory.size() < 2) return fit::LinkScores{};
  auto scores = protocol::decode_pair_scores(score_text->second);
  if (!scores) {
    return Error{std::string(protocol::kNodeScore) + ": " + scores.error().message +
                 "; GPUs are placed without topology"};
  }
  std::unordered_map<std::string, size_t> position;
  for (size_t i = 0; i < inventory.size(); ++i)
    position.emplace(inventory[i].uuid, i);
  const size_t n = inventory.size();
  // Each direction as written, -1 where absent; a pair gets the smaller of
  // the directions present.
  std::vector<int64_t> raw(n * n, -1);
  auto each_pair = [&](const std::vector<protocol::DeviceLinks>& devices, auto&& f) {
    for (const protocol::DeviceLinks& d : devices) {
      const auto a = position.find(d.uuid);
      if (a == position.end()) continue;
      for (const protocol::PeerLink& p : d.peers) {
        const auto b = position.find(p.uuid);
        if (b == position.end() || b->second == a->second) continue;
        f(a->second, b->second, p);
      }
    }
  };
  each_pair(*scores, [&](size_t a, size_t b, const protocol::PeerLink& p) {
    raw[a * n + b] = std::clamp<int64_t>(p.score, 0, std::numeric_limits<uint16_t>::max());
  });
  fit::LinkScores links(n);
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = a + 1; b < n; ++b) {
      const int64_t ab = raw[a * n + b];
      const int64_t ba = raw[b * n + a];
      const int64_t v = ab < 0 ? ba : ba < 0 ? ab : std::min(ab, ba);
      if (v > 0) links.set(a, b, static_cast<uint16_t>(v));
    }
  }
  if (const auto p2p_text = annotations.find(protocol::kNodeP2p); p2p_text != annotations.end()) {
    auto p2p = protocol::decode_p2p(p2p_text->second);
    if (!p2p) {
      return Error{std::string(protocol::kNodeP2p) + ": " + p2p.error().message +
                   "; GPUs are placed without topology"};
    }
    each_pair(*p2p, [&](size_t a, size_t b, const protocol::PeerLink& p) {
      if (p.p2p != "ok" && p.p2p != "unknown") links.set(a, b, 0);
    });
  }
  return links;
}

}  // namespace hami::scheduler
