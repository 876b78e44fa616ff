#pragma once
// Label and field selectors as the API server parses and applies them.
// Labels: comma-separated requirements `k=v`, `k==v`, `k!=v`, `k`, `!k`,
// `k in (a,b)`, `k notin (a,b)` (a missing label satisfies != and notin).
// Fields: `f=v`, `f==v`, `f!=v` over metadata.name, metadata.namespace and the
// resource's own field labels; an absent field reads as "".
//
//   auto sel = hami::test::LabelSelector::parse("app=x,tier!=db");
//   if (sel && sel->matches(pod)) ...

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.hpp"
#include "support/apiserver/resources.hpp"

namespace hami::test {

class LabelSelector {
 public:
  static hami::Result<LabelSelector> parse(std::string_view text);
  bool matches(const nlohmann::json& object) const;  // reads metadata.labels
  bool empty() const { return reqs_.empty(); }

 private:
  enum class Op { kEq, kNe, kExists, kNotExists, kIn, kNotIn };
  struct Requirement {
    std::string key;
    Op op;
    std::vector<std::string> values;
  };
  std::vector<Requirement> reqs_;
};

class FieldSelector {
 public:
  static hami::Result<FieldSelector> parse(std::string_view text, const ResourceType& type);
  bool matches(const nlohmann::json& object) const;

 private:
  struct Requirement {
    std::string field;
    bool equal;
    std::string value;
  };
  std::vector<Requirement> reqs_;
};

}  // namespace hami::test
