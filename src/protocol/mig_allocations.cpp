#include "protocol/mig_allocations.hpp"

#include <cstdint>
#include <limits>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

namespace hami::protocol {

std::string encode_mig_allocations(const std::vector<MigAllocation>& allocs) {
  // ordered_json keeps upstream's field order, so a reader diffing the
  // annotation sees the same text upstream's scheduler would write.
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const MigAllocation& a : allocs) {
    nlohmann::ordered_json o = nlohmann::ordered_json::object();
    o["containerIndex"] = a.container_index;
    o["deviceIndex"] = a.device_index;
    o["gpuUUID"] = a.gpu_uuid;
    o["profile"] = a.profile;
    o["placement"] = {{"start", a.placement.start}, {"size", a.placement.size}};
    // GI and CI IDs may be 0 (the 7g instance is GI 0), so they are written
    // whenever known, not left out at zero.
    if (!a.mig_uuid.empty()) o["migUUID"] = a.mig_uuid;
    if (a.gpu_instance_id) o["gpuInstanceID"] = *a.gpu_instance_id;
    if (a.compute_instance_id) o["computeInstanceID"] = *a.compute_instance_id;
    arr.push_back(std::move(o));
  }
  return arr.dump();
}

namespace {

Result<void> read_uint(const nlohmann::json& o, const char* key, std::optional<unsigned>& out,
                       const std::string& where) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return {};
  if (!it->is_number_integer()) return Error{where + "." + key + ": expected a whole number"};
  if (it->is_number_unsigned()) {
    const auto v = it->get<uint64_t>();
    if (v > std::numeric_limits<unsigned>::max())
      return Error{where + "." + key + ": " + std::to_string(v) + " is out of range"};
    out = static_cast<unsigned>(v);
    return {};
  }
  const auto v = it->get<int64_t>();
  if (v < 0 || v > std::numeric_limits<unsigned>::max())
    return Error{where + "." + key + ": " + std::to_string(v) + " is out of range"};
  out = static_cast<unsigned>(v);
  return {};
}

Result<void> read_index(const nlohmann::json& o, const char* key, int& out,
                        const std::string& where) {
  std::optional<unsigned> v;
  if (auto r = read_uint(o, key, v, where); !r) return r;
  if (v && *v > static_cast<unsigned>(std::numeric_limits<int>::max()))
    return Error{where + "." + key + ": " + std::to_string(*v) + " is out of range"};
  out = v ? static_cast<int>(*v) : 0;
  return {};
}

Result<void> read_string(const nlohmann::json& o, const char* key, std::string& out,
                         const std::string& where) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return {};
  if (!it->is_string()) return Error{where + "." + key + ": expected a string"};
  out = it->get<std::string>();
  return {};
}

Result<MigAllocation> decode_one(const nlohmann::json& o, const std::string& where) {
  if (!o.is_object()) return Error{where + ": expected an object"};
  MigAllocation a;
  std::optional<unsigned> start, size;
  for (auto r :
       {read_index(o, "containerIndex", a.container_index, where),
        read_index(o, "deviceIndex", a.device_index, where),
        read_string(o, "gpuUUID", a.gpu_uuid, where), read_string(o, "profile", a.profile, where),
        read_string(o, "migUUID", a.mig_uuid, where),
        read_uint(o, "gpuInstanceID", a.gpu_instance_id, where),
        read_uint(o, "computeInstanceID", a.compute_instance_id, where)}) {
    if (!r) return r.error();
  }
  auto p = o.find("placement");
  if (p == o.end() || !p->is_object()) return Error{where + ": no placement object"};
  for (auto r : {read_uint(*p, "start", start, where + ".placement"),
                 read_uint(*p, "size", size, where + ".placement")}) {
    if (!r) return r.error();
  }
  if (a.gpu_uuid.empty()) return Error{where + ": no gpuUUID"};
  if (a.profile.empty()) return Error{where + ": no profile"};
  if (!size || *size == 0) return Error{where + ".placement: no size"};
  if (start && *start > std::numeric_limits<unsigned>::max() - *size)
    return Error{where + ".placement: start + size is out of range"};
  a.placement = {start.value_or(0), *size};
  // All or none: an instance half-recorded cannot be told apart from one a
  // failed Allocate left, so the plugin must not guess which it is.
  const int runtime = int(!a.mig_uuid.empty()) + int(a.gpu_instance_id.has_value()) +
                      int(a.compute_instance_id.has_value());
  if (runtime != 0 && runtime != 3)
    return Error{where + ": migUUID, gpuInstanceID and computeInstanceID must be all set or none"};
  return a;
}

}  // namespace

Result<std::vector<MigAllocation>> decode_mig_allocations(std::string_view json_text) {
  auto j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error{"the MIG allocations are not valid JSON"};
  if (!j.is_array()) return Error{"the MIG allocations are not a JSON array"};
  std::vector<MigAllocation> out;
  out.reserve(j.size());
  std::set<std::pair<int, int>> seen;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string where = "allocation " + std::to_string(i);
    auto a = decode_one(j[i], where);
    if (!a) return a.error();
    if (!seen.emplace(a->container_index, a->device_index).second)
      return Error{where + ": container " + std::to_string(a->container_index) + " device " +
                   std::to_string(a->device_index) + " is allocated twice"};
    out.push_back(std::move(*a));
  }
  return out;
}

}  // namespace hami::protocol
