#include "support/apiserver/selectors.hpp"

#include <algorithm>

namespace hami::test {
namespace {

using nlohmann::json;

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ')
    s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ')
    s.remove_suffix(1);
  return s;
}

// Splits on commas outside parentheses.
std::vector<std::string_view> split_terms(std::string_view text) {
  std::vector<std::string_view> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || (text[i] == ',' && depth == 0)) {
      out.push_back(trim(text.substr(start, i - start)));
      start = i + 1;
    } else if (text[i] == '(') {
      ++depth;
    } else if (text[i] == ')') {
      --depth;
    }
  }
  return out;
}

bool valid_label_text(std::string_view s, bool allow_empty) {
  if (s.empty()) return allow_empty;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.' || c == '/';
  });
}

// Dotted path lookup; scalars other than strings are rendered as JSON does.
std::string field_value(const json& object, const std::string& field) {
  const json* at = &object;
  size_t start = 0;
  while (start <= field.size()) {
    const size_t dot = std::min(field.find('.', start), field.size());
    const std::string part = field.substr(start, dot - start);
    if (!at->is_object() || !at->contains(part)) return "";
    at = &(*at)[part];
    start = dot + 1;
  }
  if (at->is_string()) return at->get<std::string>();
  if (at->is_null()) return "";
  return at->dump();
}

}  // namespace

hami::Result<LabelSelector> LabelSelector::parse(std::string_view text) {
  LabelSelector sel;
  if (trim(text).empty()) return sel;
  for (std::string_view term : split_terms(text)) {
    auto bad = [&](const char* why) {
      return hami::Error{"unable to parse requirement \"" + std::string(term) + "\": " + why};
    };
    Requirement r;
    if (term.empty()) return bad("empty requirement");
    if (term[0] == '!') {
      r.key = std::string(trim(term.substr(1)));
      r.op = Op::kNotExists;
    } else if (const auto in = term.find(" in "), notin = term.find(" notin ");
               in != std::string_view::npos || notin != std::string_view::npos) {
      const bool is_in = in != std::string_view::npos && (notin == std::string_view::npos);
      const size_t at = is_in ? in : notin;
      r.key = std::string(trim(term.substr(0, at)));
      r.op = is_in ? Op::kIn : Op::kNotIn;
      std::string_view set = trim(term.substr(at + (is_in ? 4 : 7)));
      if (set.size() < 2 || set.front() != '(' || set.back() != ')') {
        return bad("expected a parenthesised set of values");
      }
      set = set.substr(1, set.size() - 2);
      size_t start = 0;
      while (start <= set.size()) {
        const size_t comma = std::min(set.find(',', start), set.size());
        const std::string_view v = trim(set.substr(start, comma - start));
        if (!valid_label_text(v, true)) return bad("invalid value");
        r.values.emplace_back(v);
        start = comma + 1;
      }
    } else if (const auto ne = term.find("!="); ne != std::string_view::npos) {
      r.key = std::string(trim(term.substr(0, ne)));
      r.op = Op::kNe;
      r.values.emplace_back(trim(term.substr(ne + 2)));
    } else if (const auto eq = term.find('='); eq != std::string_view::npos) {
      const bool dbl = eq + 1 < term.size() && term[eq + 1] == '=';
      r.key = std::string(trim(term.substr(0, eq)));
      r.op = Op::kEq;
      r.values.emplace_back(trim(term.substr(eq + (dbl ? 2 : 1))));
    } else {
      r.key = std::string(term);
      r.op = Op::kExists;
    }
    if (!valid_label_text(r.key, false)) return bad("invalid label key");
    for (const auto& v : r.values) {
      if (!valid_label_text(v, true)) return bad("invalid label value");
    }
    sel.reqs_.push_back(std::move(r));
  }
  return sel;
}

bool LabelSelector::matches(const json& object) const {
  static const json kNone = json::object();
  const json* labels = &kNone;
  if (object.is_object() && object.contains("metadata") && object["metadata"].is_object() &&
      object["metadata"].contains("labels") && object["metadata"]["labels"].is_object()) {
    labels = &object["metadata"]["labels"];
  }
  for (const auto& r : reqs_) {
    const auto it = labels->find(r.key);
    const bool has = it != labels->end() && it->is_string();
    const std::string value = has ? it->get<std::string>() : "";
    const bool in_set = has && std::find(r.values.begin(), r.values.end(), value) != r.values.end();
    switch (r.op) {
      case Op::kEq:
      case Op::kIn:
        if (!in_set) return false;
        break;
      case Op::kNe:
      case Op::kNotIn:
        if (in_set) return false;
        break;
      case Op::kExists:
        if (!has) return false;
        break;
      case Op::kNotExists:
        if (has) return false;
        break;
    }
  }
  return true;
}

hami::Result<FieldSelector> FieldSelector::parse(std::string_view text, const ResourceType& type) {
  FieldSelector sel;
  if (trim(text).empty()) return sel;
  for (std::string_view term : split_terms(text)) {
    Requirement r;
    size_t op_at = term.find("!=");
    size_t value_at = 0;
    if (op_at != std::string_view::npos) {
      r.equal = false;
      value_at = op_at + 2;
    } else if ((op_at = term.find("==")) != std::string_view::npos) {
      r.equal = true;
      value_at = op_at + 2;
    } else if ((op_at = term.find('=')) != std::string_view::npos) {
      r.equal = true;
      value_at = op_at + 1;
    } else {
      return hami::Error{"invalid field selector \"" + std::string(term) +
                         "\": expected field=value or field!=value"};
    }
    r.field = std::string(trim(term.substr(0, op_at)));
    r.value = std::string(trim(term.substr(value_at)));
    const bool known = r.field == "metadata.name" || r.field == "metadata.namespace" ||
                       std::find(type.field_labels.begin(), type.field_labels.end(), r.field) !=
                           type.field_labels.end();
    if (!known) return hami::Error{"field label not supported: " + r.field};
    sel.reqs_.push_back(std::move(r));
  }
  return sel;
}

bool FieldSelector::matches(const json& object) const {
  for (const auto& r : reqs_) {
    if ((field_value(object, r.field) == r.value) != r.equal) return false;
  }
  return true;
}

}  // namespace hami::test
