#include "protocol/node_register.hpp"

#include <algorithm>
#include <limits>

#include <nlohmann/json.hpp>

namespace hami::protocol {

std::string encode_node_devices(const std::vector<NodeDevice>& devices) {
  // ordered_json keeps Go's struct field order, so our text is byte-for-byte
  // what upstream writes for the same GPUs (and only changes when they do).
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const NodeDevice& d : devices) {
    nlohmann::ordered_json o = nlohmann::ordered_json::object();
    if (!d.id.empty()) o["id"] = d.id;
    if (d.index != 0) o["index"] = d.index;
    if (d.count != 0) o["count"] = d.count;
    if (d.devmem != 0) o["devmem"] = d.devmem;
    if (d.devcore != 0) o["devcore"] = d.devcore;
    if (!d.type.empty()) o["type"] = d.type;
    if (d.numa != 0) o["numa"] = d.numa;
    if (!d.mode.empty()) o["mode"] = d.mode;
    if (d.health) o["health"] = true;
    if (!d.mig_profiles.empty()) {
      nlohmann::ordered_json ps = nlohmann::ordered_json::array();
      for (const MigProfileInfo& p : d.mig_profiles) {
        nlohmann::ordered_json po = nlohmann::ordered_json::object();
        po["name"] = p.name;
        po["memory"] = p.memory;
        po["core"] = p.core;
        po["sliceCount"] = p.slice_count;
        nlohmann::ordered_json pl = nlohmann::ordered_json::array();
        for (const MigPlacement& x : p.placements)
          pl.push_back({{"start", x.start}, {"size", x.size}});
        po["placements"] = std::move(pl);
        ps.push_back(std::move(po));
      }
      o["migProfiles"] = std::move(ps);
    }
    arr.push_back(std::move(o));
  }
  return arr.dump();
}

namespace {

template <class T>
Result<void> read_int(const nlohmann::json& o, const char* key, T& out, const std::string& where) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return {};
  if (!it->is_number_integer()) return Error{where + "." + key + ": expected a whole number"};
  const auto v = it->get<int64_t>();
  if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max())
    return Error{where + "." + key + ": " + std::to_string(v) + " is out of range"};
  out = static_cast<T>(v);
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

Result<void> read_placement(const nlohmann::json& o, MigPlacement& out, const std::string& where) {
  if (!o.is_object()) return Error{where + ": expected an object"};
  int64_t v[2] = {0, 0};
  const char* keys[2] = {"start", "size"};
  for (int k = 0; k < 2; ++k) {
    if (auto r = read_int(o, keys[k], v[k], where); !r) return r;
    if (v[k] < 0 || v[k] > 0xFFFF)
      return Error{where + "." + keys[k] + ": " + std::to_string(v[k]) + " is out of range"};
  }
  if (v[1] == 0) return Error{where + ": no size"};
  out = {static_cast<unsigned>(v[0]), static_cast<unsigned>(v[1])};
  return {};
}

Result<void> read_mig_profiles(const nlohmann::json& o, std::vector<MigProfileInfo>& out,
                               const std::string& where) {
  auto it = o.find("migProfiles");
  if (it == o.end() || it->is_null()) return {};
  if (!it->is_array()) return Error{where + ".migProfiles: expected an array"};
  for (size_t i = 0; i < it->size(); ++i) {
    const auto& po = (*it)[i];
    const std::string at = where + ".migProfiles[" + std::to_string(i) + "]";
    if (!po.is_object()) return Error{at + ": expected an object"};
    MigProfileInfo p;
    for (auto r :
         {read_string(po, "name", p.name, at), read_int(po, "memory", p.memory, at),
          read_int(po, "core", p.core, at), read_int(po, "sliceCount", p.slice_count, at)}) {
      if (!r) return r.error();
    }
    if (p.name.empty()) return Error{at + ": no name"};
    if (auto pl = po.find("placements"); pl != po.end() && !pl->is_null()) {
      if (!pl->is_array()) return Error{at + ".placements: expected an array"};
      for (size_t k = 0; k < pl->size(); ++k) {
        MigPlacement x;
        if (auto r = read_placement((*pl)[k], x, at + ".placements[" + std::to_string(k) + "]"); !r)
          return r.error();
        p.placements.push_back(x);
      }
    }
    out.push_back(std::move(p));
  }
  return {};
}

}  // namespace

Result<std::vector<NodeDevice>> decode_node_devices(std::string_view json_text) {
  auto j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error{"the device list is not valid JSON"};
  if (!j.is_array()) return Error{"the device list is not a JSON array"};
  std::vector<NodeDevice> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const auto& o = j[i];
    const std::string where = "device " + std::to_string(i);
    if (!o.is_object()) return Error{where + ": expected an object"};
    NodeDevice d;
    for (auto r : {read_string(o, "id", d.id, where), read_int(o, "index", d.index, where),
                   read_int(o, "count", d.count, where), read_int(o, "devmem", d.devmem, where),
                   read_int(o, "devcore", d.devcore, where), read_string(o, "type", d.type, where),
                   read_int(o, "numa", d.numa, where), read_string(o, "mode", d.mode, where)}) {
      if (!r) return r.error();
    }
    if (auto h = o.find("health"); h != o.end() && !h->is_null()) {
      if (!h->is_boolean()) return Error{where + ".health: expected true or false"};
      d.health = h->get<bool>();
    }
    if (auto r = read_mig_profiles(o, d.mig_profiles, where); !r) return r.error();
    if (d.id.empty()) return Error{where + ": no id"};
    out.push_back(std::move(d));
  }
  return out;
}

int32_t pair_score(std::optional<int> nvml_level, int nvlinks) {
  int32_t score = 0;
  if (nvml_level) {
    switch (*nvml_level) {
      case 0:  // NVML_TOPOLOGY_INTERNAL
        score = 60;
        break;
      case 10:  // NVML_TOPOLOGY_SINGLE
        score = 50;
        break;
      case 20:  // NVML_TOPOLOGY_MULTIPLE
        score = 40;
        break;
      case 30:  // NVML_TOPOLOGY_HOSTBRIDGE
        score = 30;
        break;
      case 40:  // NVML_TOPOLOGY_NODE
        score = 20;
        break;
      case 50:  // NVML_TOPOLOGY_SYSTEM
        score = 10;
        break;
      default:
        break;
    }
  }
  if (nvlinks >= 1 && nvlinks <= 18) score += 100 * nvlinks;
  return score;
}

namespace {

// One annotation's shape: [{"uuid":..., "<field>":{"<uuid>":<value>, ...}}, ...],
// the peers in key order as Go writes a map.
template <class Value>
std::string encode_links(const std::vector<DeviceLinks>& devices, const char* field, Value value) {
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const DeviceLinks& d : devices) {
    std::vector<const PeerLink*> peers;
    for (const PeerLink& p : d.peers)
      if (!value(p).is_null()) peers.push_back(&p);
    std::sort(peers.begin(), peers.end(),
              [](const PeerLink* a, const PeerLink* b) { return a->uuid < b->uuid; });
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const PeerLink* p : peers)
      m[p->uuid] = value(*p);
    nlohmann::ordered_json o = nlohmann::ordered_json::object();
    o["uuid"] = d.uuid;
    o[field] = std::move(m);
    arr.push_back(std::move(o));
  }
  return arr.dump();
}

// `read` fills a PeerLink from one map value, or says why it cannot.
template <class Read>
Result<std::vector<DeviceLinks>> decode_links(std::string_view json_text, const char* field,
                                              Read read) {
  auto j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error{"not valid JSON"};
  if (!j.is_array()) return Error{"not a JSON array"};
  std::vector<DeviceLinks> out;
  out.reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    const auto& o = j[i];
    const std::string where = "entry " + std::to_string(i);
    if (!o.is_object()) return Error{where + ": expected an object"};
    DeviceLinks d;
    if (auto r = read_string(o, "uuid", d.uuid, where); !r) return r.error();
    if (d.uuid.empty()) return Error{where + ": no uuid"};
    auto m = o.find(field);
    if (m != o.end() && !m->is_null()) {
      if (!m->is_object()) return Error{where + "." + field + ": expected an object"};
      for (auto it = m->begin(); it != m->end(); ++it) {
        PeerLink p;
        p.uuid = it.key();
        if (auto r = read(*it, p); !r) {
          return Error{where + "." + field + "." + it.key() + ": " + r.error().message};
        }
        d.peers.push_back(std::move(p));
      }
    }
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace

std::string encode_pair_scores(const std::vector<DeviceLinks>& devices) {
  return encode_links(devices, "score",
                      [](const PeerLink& p) { return nlohmann::ordered_json(p.score); });
}

std::string encode_p2p(const std::vector<DeviceLinks>& devices) {
  return encode_links(devices, "p2p", [](const PeerLink& p) {
    return p.p2p.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(p.p2p);
  });
}

Result<std::vector<DeviceLinks>> decode_pair_scores(std::string_view json_text) {
  return decode_links(json_text, "score", [](const nlohmann::json& v, PeerLink& p) -> Result<void> {
    if (!v.is_number_integer()) return Error{"expected a whole number"};
    const auto n = v.get<int64_t>();
    if (n < std::numeric_limits<int32_t>::min() || n > std::numeric_limits<int32_t>::max())
      return Error{std::to_string(n) + " is out of range"};
    p.score = static_cast<int32_t>(n);
    return {};
  });
}

Result<std::vector<DeviceLinks>> decode_p2p(std::string_view json_text) {
  return decode_links(json_text, "p2p", [](const nlohmann::json& v, PeerLink& p) -> Result<void> {
    if (!v.is_string() || v.get_ref<const std::string&>().empty())
      return Error{"expected a status such as \"ok\""};
    p.p2p = v.get<std::string>();
    return {};
  });
}

std::string device_type(std::string_view nvml_name) {
  if (nvml_name.substr(0, 6) == "NVIDIA") return std::string(nvml_name);
  return "NVIDIA-" + std::string(nvml_name);
}

}  // namespace hami::protocol
