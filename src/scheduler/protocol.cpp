#include "scheduler/protocol.hpp"

#include <cctype>
#include <unordered_map>

namespace hami::scheduler {
namespace {

using nlohmann::json;

bool iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

Result<json> parse_object(std::string_view body, const char* what) {
  if (body.size() > kMaxExtenderBody) {
    return Error{std::string(what) + ": body of " + std::to_string(body.size()) +
                 " bytes is over the limit of " + std::to_string(kMaxExtenderBody)};
  }
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error{std::string(what) + ": body is not valid JSON"};
  if (!j.is_object()) return Error{std::string(what) + ": body is not a JSON object"};
  return j;
}

Result<std::string> string_field(const json& o, std::string_view key, const char* what) {
  const json* v = go_field(o, key);
  if (v == nullptr || v->is_null()) return std::string();
  if (!v->is_string()) return Error{std::string(what) + ": " + std::string(key) + ": not a string"};
  return v->get<std::string>();
}

// Parses ExtenderArgs in one pass: NodeNames' strings go straight into a
// vector (5,000 names would otherwise become 5,000 json nodes, then copies),
// everything else (the Pod, a NodeList) into a DOM as usual. Keys match the
// way Go matches them, case-insensitively.
class ArgsSax {
 public:
  explicit ArgsSax(json& root, std::vector<std::string>& names)
      : dom_(root, false), names_(names) {}

  bool null() { return collecting_ ? element_error() : (pending_ = false, dom_.null()); }
  bool boolean(bool v) {
    return collecting_ ? element_error() : (pending_ = false, dom_.boolean(v));
  }
  bool number_integer(json::number_integer_t v) {
    return collecting_ ? element_error() : (pending_ = false, dom_.number_integer(v));
  }
  bool number_unsigned(json::number_unsigned_t v) {
    return collecting_ ? element_error() : (pending_ = false, dom_.number_unsigned(v));
  }
  bool number_float(json::number_float_t v, const std::string& s) {
    return collecting_ ? element_error() : (pending_ = false, dom_.number_float(v, s));
  }
  bool string(std::string& v) {
    if (collecting_) {
      names_.push_back(std::move(v));
      return true;
    }
    pending_ = false;
    return dom_.string(v);
  }
  bool binary(json::binary_t& v) { return dom_.binary(v); }
  bool start_object(std::size_t n) {
    if (collecting_) return element_error();
    pending_ = false;
    ++depth_;
    return dom_.start_object(n);
  }
  bool key(std::string& k) {
    pending_ = depth_ == 1 && iequal(k, "NodeNames");
    return dom_.key(k);
  }
  bool end_object() {
    --depth_;
    return dom_.end_object();
  }
  bool start_array(std::size_t n) {
    if (collecting_) return element_error();
    if (pending_) {
      pending_ = false;
      collecting_ = true;
      names_.clear();
      has_names_ = true;
      return true;
    }
    return dom_.start_array(n);
  }
  bool end_array() {
    if (collecting_) {
      collecting_ = false;
      return dom_.null();  // the DOM keeps a placeholder; the names are in names_
    }
    return dom_.end_array();
  }
  bool parse_error(std::size_t pos, const std::string& token,
                   const nlohmann::detail::exception& e) {
    error_ = "body is not valid JSON (at byte " + std::to_string(pos) + ", near '" +
             token.substr(0, 32) + "'): " + e.what();
    return false;
  }
  bool has_names() const { return has_names_; }
  const std::string& error() const { return error_; }

 private:
  bool element_error() {
    error_ = "NodeNames: an entry is not a string";
    return false;
  }
  nlohmann::detail::json_sax_dom_parser<json> dom_;
  std::vector<std::string>& names_;
  int depth_ = 0;
  bool pending_ = false;
  bool collecting_ = false;
  bool has_names_ = false;
  std::string error_;
};

// Appends `s` as a JSON string literal.
void append_json_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (unsigned char ch : s) {
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (ch < 0x20) {
          out += "\\u00";
          out += kHex[ch >> 4];
          out += kHex[ch & 15];
        } else {
          out += static_cast<char>(ch);
        }
    }
  }
  out += '"';
}

}  // namespace

const json* go_field(const json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto exact = object.find(key);
  if (exact != object.end()) return &*exact;
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (iequal(it.key(), key)) return &it.value();
  }
  return nullptr;
}

Result<ExtenderArgs> parse_extender_args(std::string_view body) {
  if (body.size() > kMaxExtenderBody) {
    return Error{"ExtenderArgs: body of " + std::to_string(body.size()) +
                 " bytes is over the limit of " + std::to_string(kMaxExtenderBody)};
  }
  ExtenderArgs out;
  json j;
  ArgsSax sax(j, out.node_names);
  const bool ok = json::sax_parse(body, &sax, json::input_format_t::json, /*strict=*/true);
  if (!ok) {
    return Error{"ExtenderArgs: " +
                 (sax.error().empty() ? std::string("body is not valid JSON") : sax.error())};
  }
  if (!j.is_object()) return Error{"ExtenderArgs: body is not a JSON object"};
  const json* pod = go_field(j, "Pod");
  if (pod == nullptr || !pod->is_object())
    return Error{"ExtenderArgs: Pod: missing or not an object"};
  auto p = k8s::Pod::from_json(*pod);
  if (!p) return Error{"ExtenderArgs: Pod: " + p.error().message};
  out.pod = std::move(*p);
  if (sax.has_names()) return out;
  const json* names = go_field(j, "NodeNames");
  if (names != nullptr && !names->is_null()) return Error{"ExtenderArgs: NodeNames: not an array"};
  const json* nodes = go_field(j, "Nodes");
  if (nodes != nullptr && !nodes->is_null()) {
    // A v1.NodeList: lower-case JSON (it has tags), but accept "Items" too.
    const json* items = go_field(*nodes, "items");
    if (!nodes->is_object() || items == nullptr || !(items->is_array() || items->is_null())) {
      return Error{"ExtenderArgs: Nodes: not a NodeList with items"};
    }
    out.node_items.emplace();
    if (items->is_array()) {
      for (const json& n : *items) {
        const json* meta = go_field(n, "metadata");
        const json* name = meta ? go_field(*meta, "name") : nullptr;
        if (name == nullptr || !name->is_string()) {
          return Error{"ExtenderArgs: Nodes: an item has no metadata.name"};
        }
        out.node_names.push_back(name->get<std::string>());
        out.node_items->push_back(n);
      }
    }
  }
  return out;
}

Result<BindRequest> parse_binding_args(std::string_view body) {
  auto j = parse_object(body, "ExtenderBindingArgs");
  if (!j) return j.error();
  BindRequest r;
  const char* what = "ExtenderBindingArgs";
  auto name = string_field(*j, "PodName", what);
  if (!name) return name.error();
  auto ns = string_field(*j, "PodNamespace", what);
  if (!ns) return ns.error();
  auto uid = string_field(*j, "PodUID", what);
  if (!uid) return uid.error();
  auto node = string_field(*j, "Node", what);
  if (!node) return node.error();
  if (name->empty()) return Error{"ExtenderBindingArgs: PodName: missing"};
  if (node->empty()) return Error{"ExtenderBindingArgs: Node: missing"};
  r.name = std::move(*name);
  r.ns = ns->empty() ? "default" : std::move(*ns);
  r.uid = std::move(*uid);
  r.node = std::move(*node);
  return r;
}

std::string filter_result_json(const ExtenderArgs& args, const FilterResult& r) {
  // Written by hand: 5,000 names through a json tree cost ~1.5 ms, this ~0.1.
  std::string out;
  out.reserve(64 + r.nodes.size() * 24 + r.failed.size() * 64);
  out += "{\"FailedNodes\":{";
  bool first = true;
  for (const auto& [n, why] : r.failed) {
    if (!first) out += ',';
    first = false;
    append_json_string(out, n);
    out += ':';
    append_json_string(out, why);
  }
  out += "},\"FailedAndUnresolvableNodes\":{},\"Error\":";
  append_json_string(out, r.error);
  if (args.node_items) {
    std::unordered_map<std::string_view, size_t> index;
    for (size_t i = 0; i < args.node_names.size(); ++i)
      index.emplace(args.node_names[i], i);
    json items = json::array();
    for (const std::string& n : r.nodes) {
      auto it = index.find(n);
      if (it != index.end()) items.push_back((*args.node_items)[it->second]);
    }
    out += ",\"NodeNames\":null,\"Nodes\":";
    out += json{{"apiVersion", "v1"},
                {"kind", "NodeList"},
                {"metadata", json::object()},
                {"items", std::move(items)}}
               .dump(-1, ' ', false, json::error_handler_t::replace);
  } else {
    out += ",\"Nodes\":null,\"NodeNames\":[";
    for (size_t i = 0; i < r.nodes.size(); ++i) {
      if (i) out += ',';
      append_json_string(out, r.nodes[i]);
    }
    out += ']';
  }
  out += '}';
  return out;
}

std::string filter_error_json(const std::string& error) {
  return json{
      {"Nodes", nullptr}, {"NodeNames", nullptr}, {"FailedNodes", json::object()}, {"Error", error}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string priorities_json(const std::vector<HostPriority>& priorities) {
  std::string out;
  out.reserve(2 + priorities.size() * 40);
  out += '[';
  for (size_t i = 0; i < priorities.size(); ++i) {
    if (i) out += ',';
    out += "{\"Host\":";
    append_json_string(out, priorities[i].host);
    out += ",\"Score\":";
    out += std::to_string(priorities[i].score);
    out += '}';
  }
  out += ']';
  return out;
}

std::string binding_result_json(const std::string& error) {
  return json{{"Error", error}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace hami::scheduler
