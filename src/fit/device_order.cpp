#include "fit/device_order.hpp"

#include <algorithm>

namespace hami::fit {
void order_devices(std::span<const DeviceKey> keys, const GpuPolicy& policy, bool numa_bind,
                   std::vector<uint16_t>& order) {
  order.resize(keys.size());
  for (size_t i = 0; i < keys.size(); ++i)
    order[i] = static_cast<uint16_t>(i);
  // Insertion sort: a node has a handful of GPUs, and this allocates nothing.
  for (size_t i = 1; i < order.size(); ++i) {
    const uint16_t v = order[i];
    size_t j = i;
    while (j > 0 && tried_before(keys[v], keys[order[j - 1]], policy, numa_bind)) {
      order[j] = order[j - 1];
      --j;
    }
    order[j] = v;
  }
}

}  // namespace hami::fit
