#include "protocol/node_register.hpp"

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
    if (d.id.empty()) return Error{where + ": no id"};
    out.push_back(std::move(d));
  }
  return out;
}

std::string device_type(std::string_view nvml_name) {
  if (nvml_name.substr(0, 6) == "NVIDIA") return std::string(nvml_name);
  return "NVIDIA-" + std::string(nvml_name);
}

}  // namespace hami::protocol
