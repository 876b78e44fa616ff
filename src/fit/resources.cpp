#include "fit/resources.hpp"

#include <limits>

#include "fit/quantity.hpp"

namespace hami::fit {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

Error resource_error(std::string_view name, std::string_view text, std::string_view why) {
  std::string m(name);
  m.append("='");
  m.append(text);
  m.append("': ");
  m.append(why);
  return Error{std::move(m)};
}

// The quantity as a whole number in [0, max], or an error naming the resource.
Result<int64_t> whole(std::string_view name, std::string_view text, int64_t max) {
  auto v = parse_whole_quantity(text);
  if (!v) return resource_error(name, text, v.error().message);
  if (*v < 0) return resource_error(name, text, "must not be negative");
  if (*v > max)
    return resource_error(name, text, "too large (at most " + std::to_string(max) + ")");
  return *v;
}

}  // namespace

Result<std::optional<ContainerRequest>> container_request(QuantityLookup limits,
                                                          QuantityLookup requests,
                                                          const ResourceConfig& config) {
  auto get = [&](const std::string& name) {
    auto v = limits(name);
    return v ? v : requests(name);
  };
  if (config.memory_factor < 1) {
    return Error{"memoryFactor " + std::to_string(config.memory_factor) + " must be at least 1"};
  }

  const auto count_text = get(config.count_name);
  if (!count_text) return std::optional<ContainerRequest>{};
  auto count = whole(config.count_name, *count_text, kInt32Max);
  if (!count) return count.error();
  if (*count == 0) return std::optional<ContainerRequest>{};

  ContainerRequest r;
  r.nums = static_cast<int32_t>(*count);
  if (const auto mem = get(config.memory_name)) {
    auto mib = whole(config.memory_name, *mem, kInt32Max / config.memory_factor);
    if (!mib) return mib.error();
    r.mem_mib = static_cast<int32_t>(*mib) * config.memory_factor;
  }
  if (const auto pct = get(config.memory_percentage_name)) {
    auto p = parse_whole_quantity(*pct);
    if (!p) return resource_error(config.memory_percentage_name, *pct, p.error().message);
    if (*p > 100) {
      r.mem_percent = 100;
    } else if (*p > 0) {
      r.mem_percent = static_cast<int32_t>(*p);
    }  // 0 or less: not given
  }
  if (r.mem_percent == kMemPercentUnset && r.mem_mib == 0) {
    if (config.default_memory_mib != 0) {
      r.mem_mib = config.default_memory_mib;
    } else {
      r.mem_percent = 100;
    }
  }
  r.cores = config.default_cores;
  if (const auto cores = get(config.cores_name)) {
    auto c = whole(config.cores_name, *cores, kInt32Max);
    if (!c) return c.error();
    r.cores = static_cast<int32_t>(*c > 100 ? 100 : *c);
  }
  return std::optional<ContainerRequest>{std::move(r)};
}

Result<std::optional<int>> task_priority(QuantityLookup limits, QuantityLookup requests,
                                         std::string_view name) {
  auto text = limits(name);
  if (!text) text = requests(name);
  if (!text) return std::optional<int>();
  if (*text == "0" || *text == "1") return std::optional<int>(*text == "1" ? 1 : 0);
  std::string m(name);
  m.append(" '");
  m.append(*text);
  m.append("' is not 0 (high) or 1 (low)");
  return Error{std::move(m)};
}

}  // namespace hami::fit
