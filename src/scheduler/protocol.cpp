#include "scheduler/protocol.hpp"

#include <array>
#include <cctype>
#include <cstdint>
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

// The body's size and JSON shape against the limits, before any parse.
Result<void> within_limits(std::string_view body, size_t max_body, const char* what) {
  if (body.size() > max_body) {
    return Error{std::string(what) + ": body of " + std::to_string(body.size()) +
                 " bytes is over the limit of " + std::to_string(max_body)};
  }
  if (auto ok = check_json_limits(body, kExtenderJsonLimits); !ok) {
    return Error{std::string(what) + ": " + ok.error().message};
  }
  return {};
}

Result<json> parse_object(std::string_view body, size_t max_body, const char* what) {
  if (auto ok = within_limits(body, max_body, what); !ok) return ok.error();
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

namespace {

// What both parses share once the body's top level is known: the Pod, and
// the names from NodeNames or from a NodeList in Nodes.
Result<ExtenderArgs> finish_extender_args(const json& j, ExtenderArgs out, bool has_names) {
  const json* pod = go_field(j, "Pod");
  if (pod == nullptr || !pod->is_object())
    return Error{"ExtenderArgs: Pod: missing or not an object"};
  auto p = k8s::Pod::from_json(*pod);
  if (!p) return Error{"ExtenderArgs: Pod: " + p.error().message};
  out.pod = std::move(*p);
  if (has_names) return out;
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

bool is_ws(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

size_t skip_ws(std::string_view s, size_t i) {
  while (i < s.size() && is_ws(s[i]))
    ++i;
  return i;
}

// Per byte: 0 plain (printable ASCII), 1 the closing quote, 2 anything that
// needs the full parse (escapes, control characters, UTF-8).
constexpr std::array<uint8_t, 256> kStringByte = [] {
  std::array<uint8_t, 256> t{};
  for (size_t c = 0; c < 256; ++c)
    t[c] = c < 0x20 || c > 0x7e || c == '\\' ? 2 : 0;
  t['"'] = 1;
  return t;
}();

// A string token at s[i] == '"' made only of printable ASCII without escapes
// (every node name, every key kube-scheduler writes): its content, and i moved
// past the closing quote. Anything else declines.
std::optional<std::string_view> plain_string(std::string_view s, size_t& i) {
  const size_t begin = i + 1;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t k = begin; k < s.size(); ++k) {
    const uint8_t t = kStringByte[p[k]];
    if (t == 0) continue;
    if (t == 2) return std::nullopt;
    i = k + 1;
    return s.substr(begin, k - begin);
  }
  return std::nullopt;
}

// The end of the JSON value starting at s[i], by its brackets and strings
// only: the value itself is checked by whoever parses the slice.
std::optional<size_t> value_end(std::string_view s, size_t i) {
  if (i >= s.size()) return std::nullopt;
  if (s[i] != '{' && s[i] != '[' && s[i] != '"') {  // a number or a literal
    size_t k = i;
    while (k < s.size() && !is_ws(s[k]) && s[k] != ',' && s[k] != '}' && s[k] != ']')
      ++k;
    return k;
  }
  int depth = 0;
  for (size_t k = i; k < s.size(); ++k) {
    const char c = s[k];
    if (c == '"') {
      for (++k; k < s.size() && s[k] != '"'; ++k)
        if (s[k] == '\\') ++k;
      if (k >= s.size()) return std::nullopt;
      if (depth == 0) return k + 1;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return k + 1;
    }
  }
  return std::nullopt;
}

// The common request, read without running 5,000 names through the JSON
// lexer (~0.35 ms a request on the build machine, most of a filter's parse):
// a top-level object whose NodeNames, if an array, holds plain strings.
// Every other member is parsed as JSON on its own. Whatever this does not
// expect it declines, and the full parse below decides: it never accepts a
// body that the full parse would refuse or read differently (the fuzz target
// extender_args checks that).
std::optional<ExtenderArgs> scan_extender_args(std::string_view s) {
  ExtenderArgs out;
  json root = json::object();
  bool has_names = false;
  bool seen_names_key = false;
  size_t i = skip_ws(s, 0);
  if (i >= s.size() || s[i] != '{') return std::nullopt;
  i = skip_ws(s, i + 1);
  for (;;) {
    if (i >= s.size() || s[i] != '"') return std::nullopt;
    auto key = plain_string(s, i);
    if (!key) return std::nullopt;
    i = skip_ws(s, i);
    if (i >= s.size() || s[i] != ':') return std::nullopt;
    i = skip_ws(s, i + 1);
    if (i >= s.size()) return std::nullopt;
    if (iequal(*key, "NodeNames")) {
      if (seen_names_key) return std::nullopt;  // Go's last-wins: leave it to the full parse
      seen_names_key = true;
      if (s[i] != '[') return std::nullopt;  // null, or not an array: the full parse says
      has_names = true;
      // A name takes at least its quotes and a comma; real ones ~10 bytes more.
      out.node_names.reserve((s.size() - i) / 8);
      i = skip_ws(s, i + 1);
      if (i < s.size() && s[i] == ']') {
        ++i;
      } else {
        for (;;) {
          if (i >= s.size() || s[i] != '"') return std::nullopt;
          auto name = plain_string(s, i);
          if (!name) return std::nullopt;
          out.node_names.emplace_back(*name);
          i = skip_ws(s, i);
          if (i < s.size() && s[i] == ',') {
            i = skip_ws(s, i + 1);
            continue;
          }
          if (i < s.size() && s[i] == ']') {
            ++i;
            break;
          }
          return std::nullopt;
        }
      }
    } else {
      auto end = value_end(s, i);
      if (!end) return std::nullopt;
      json v = json::parse(s.substr(i, *end - i), nullptr, /*allow_exceptions=*/false);
      if (v.is_discarded()) return std::nullopt;
      root[std::string(*key)] = std::move(v);
      i = *end;
    }
    i = skip_ws(s, i);
    if (i < s.size() && s[i] == ',') {
      i = skip_ws(s, i + 1);
      continue;
    }
    if (i < s.size() && s[i] == '}') break;
    return std::nullopt;
  }
  if (skip_ws(s, i + 1) != s.size()) return std::nullopt;
  auto done = finish_extender_args(root, std::move(out), has_names);
  if (!done) return std::nullopt;
  return std::move(*done);
}

}  // namespace

namespace {

Result<ExtenderArgs> parse_extender_args_unchecked(std::string_view body) {
  ExtenderArgs out;
  json j;
  ArgsSax sax(j, out.node_names);
  const bool ok = json::sax_parse(body, &sax, json::input_format_t::json, /*strict=*/true);
  if (!ok) {
    return Error{"ExtenderArgs: " +
                 (sax.error().empty() ? std::string("body is not valid JSON") : sax.error())};
  }
  if (!j.is_object()) return Error{"ExtenderArgs: body is not a JSON object"};
  return finish_extender_args(j, std::move(out), sax.has_names());
}

}  // namespace

Result<ExtenderArgs> parse_extender_args_full(std::string_view body) {
  if (auto ok = within_limits(body, kMaxExtenderBody, "ExtenderArgs"); !ok) return ok.error();
  return parse_extender_args_unchecked(body);
}

Result<ExtenderArgs> parse_extender_args(std::string_view body) {
  if (auto ok = within_limits(body, kMaxExtenderBody, "ExtenderArgs"); !ok) return ok.error();
  if (auto fast = scan_extender_args(body)) return std::move(*fast);
  return parse_extender_args_unchecked(body);
}

Result<BindRequest> parse_binding_args(std::string_view body) {
  auto j = parse_object(body, kMaxBindingBody, "ExtenderBindingArgs");
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
