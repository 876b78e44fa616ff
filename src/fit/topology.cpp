#include "fit/topology.hpp"

#include <algorithm>

namespace hami::fit {
namespace {

// C(n, k), or limit + 1 once it passes limit.
uint64_t sets_up_to(size_t n, size_t k, uint64_t limit) {
  if (k > n) return 0;
  k = std::min(k, n - k);
  uint64_t c = 1;
  for (size_t i = 1; i <= k; ++i) {
    c = c * (n - k + i) / i;  // exact: c * (n-k+i) is C(n-k+i, i) * i
    if (c > limit) return limit + 1;
  }
  return c;
}

struct Search {
  const LinkScores& links;
  std::span<const uint16_t> pool;
  size_t k;
  ConnectScratch& s;
  std::vector<uint16_t>& best;
  SetScore best_score{0, 0};
  bool found = false;

  // The set so far (s.current[0..depth), indexes into pool) scores `have`;
  // extend it from pool index `from` on.
  void extend(size_t depth, size_t from, SetScore have) {
    if (depth == k) {
      if (!found || have.better_than(best_score)) {
        best.assign(s.current.begin(), s.current.begin() + static_cast<ptrdiff_t>(k));
        best_score = have;
        found = true;
      }
      return;
    }
    for (size_t i = from; i + (k - depth) <= pool.size(); ++i) {
      SetScore next{std::min(have.weakest, s.forced_weakest[i]), have.total + s.forced_total[i]};
      for (size_t d = 0; d < depth; ++d) {
        const uint32_t v = links.at(pool[i], pool[s.current[d]]);
        next.weakest = std::min(next.weakest, v);
        next.total += v;
      }
      // Adding GPUs never raises the weakest pair: a set already weaker than
      // the best found cannot win.
      if (found && next.weakest < best_score.weakest) continue;
      s.current[depth] = static_cast<uint16_t>(i);
      extend(depth + 1, i + 1, next);
    }
  }
};

}  // namespace

SetScore set_score(const LinkScores& links, std::span<const uint16_t> devices) {
  SetScore r;
  for (size_t i = 0; i < devices.size(); ++i) {
    for (size_t j = i + 1; j < devices.size(); ++j) {
      const uint32_t v = links.at(devices[i], devices[j]);
      r.weakest = std::min(r.weakest, v);
      r.total += v;
    }
  }
  return r;
}

void choose_connected(const LinkScores& links, std::span<const uint16_t> forced,
                      std::span<const uint16_t> pool, size_t k, ConnectScratch& s,
                      std::vector<uint16_t>& out) {
  out.clear();
  k = std::min(k, pool.size());
  const SetScore base = set_score(links, forced);
  s.forced_weakest.assign(pool.size(), base.weakest);
  s.forced_total.assign(pool.size(), base.total);
  for (size_t i = 0; i < pool.size(); ++i) {
    for (const uint16_t f : forced) {
      const uint32_t v = links.at(pool[i], f);
      s.forced_weakest[i] = std::min(s.forced_weakest[i], v);
      s.forced_total[i] += v;
    }
  }
  if (k == pool.size() || k == 0) {
    for (size_t i = 0; i < k; ++i)
      out.push_back(static_cast<uint16_t>(i));
    return;
  }
  s.current.assign(k, 0);
  if (sets_up_to(pool.size(), k, kMaxExhaustiveSets) <= kMaxExhaustiveSets) {
    Search{links, pool, k, s, out}.extend(0, 0, base);
    return;
  }
  // Greedy: start from the best single addition to forced (with nothing
  // forced, the best pair), then add whichever GPU keeps the set best.
  std::vector<uint8_t> taken(pool.size(), 0);
  SetScore have = base;
  if (forced.empty() && k >= 2) {
    size_t ba = 0, bb = 1;
    for (size_t a = 0; a < pool.size(); ++a) {
      for (size_t b = a + 1; b < pool.size(); ++b) {
        if (links.at(pool[a], pool[b]) > links.at(pool[ba], pool[bb])) {
          ba = a;
          bb = b;
        }
      }
    }
    taken[ba] = taken[bb] = 1;
    out = {static_cast<uint16_t>(ba), static_cast<uint16_t>(bb)};
    have = SetScore{links.at(pool[ba], pool[bb]), links.at(pool[ba], pool[bb])};
  }
  while (out.size() < k) {
    size_t pick = pool.size();
    SetScore pick_score{0, 0};
    for (size_t i = 0; i < pool.size(); ++i) {
      if (taken[i]) continue;
      SetScore next{std::min(have.weakest, s.forced_weakest[i]), have.total + s.forced_total[i]};
      for (const uint16_t o : out) {
        const uint32_t v = links.at(pool[i], pool[o]);
        next.weakest = std::min(next.weakest, v);
        next.total += v;
      }
      if (pick == pool.size() || next.better_than(pick_score)) {
        pick = i;
        pick_score = next;
      }
    }
    taken[pick] = 1;
    out.push_back(static_cast<uint16_t>(pick));
    have = pick_score;
  }
  std::sort(out.begin(), out.end());
}

size_t least_connected(const LinkScores& links, std::span<const uint16_t> pool) {
  size_t best = 0;
  uint64_t best_sum = UINT64_MAX;
  for (size_t i = 0; i < pool.size(); ++i) {
    uint64_t sum = 0;
    for (size_t j = 0; j < pool.size(); ++j)
      if (j != i) sum += links.at(pool[i], pool[j]);
    if (sum < best_sum) {
      best = i;
      best_sum = sum;
    }
  }
  return best;
}

}  // namespace hami::fit
