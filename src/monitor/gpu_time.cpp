#include "monitor/gpu_time.hpp"

#include <algorithm>

namespace hami::monitor {

void GpuTimeRates::begin_pass(std::chrono::steady_clock::time_point now) {
  if (pass_ > 0) prev_ = now_;
  now_ = now;
  ++pass_;
}

std::optional<double> GpuTimeRates::percent(const std::string& path,
                                            const region::RegionSnapshot& snap, int dev) {
  if (dev < 0 || dev >= region::kMaxDevices) return std::nullopt;
  bool any = false;
  uint64_t grown = 0;
  for (const region::SlotSnapshot& s : snap.slots) {
    if (s.status == region::kSlotFree || s.liveness == region::Liveness::kDead) continue;
    const std::optional<uint64_t>& v = s.gpu_time_ns[static_cast<size_t>(dev)];
    if (!v) continue;
    any = true;
    // A slot's counter belongs to its owner: a new owner starts from zero.
    const std::string key = path + '\n' + std::to_string(s.index) + '\n' +
                            std::to_string(s.owner_start_time) + '\n' + std::to_string(s.pid) +
                            '\n' + std::to_string(dev);
    auto [it, fresh] = last_.try_emplace(key, Seen{*v, pass_});
    if (!fresh) {
      // Seen before: what it grew by. (It never shrinks while its owner lives.)
      grown += *v >= it->second.value ? *v - it->second.value : *v;
      it->second = Seen{*v, pass_};
    } else if (prev_) {
      // A process that started since the last pass: all of it is new.
      grown += *v;
    }
  }
  if (!any || !prev_) return std::nullopt;
  const auto wall = std::chrono::duration_cast<std::chrono::nanoseconds>(now_ - *prev_).count();
  if (wall <= 0) return std::nullopt;
  return std::min(100.0, 100.0 * static_cast<double>(grown) / static_cast<double>(wall));
}

void GpuTimeRates::end_pass() {
  std::erase_if(last_, [&](const auto& kv) { return kv.second.pass != pass_; });
}

}  // namespace hami::monitor
