#include "scheduler/node_selector.hpp"

#include "common/go_flags.hpp"

namespace hami::scheduler {

Result<NodeLabelSelector> NodeLabelSelector::parse(std::string_view text) {
  auto pairs = goflags::parse_string_map(text);
  if (!pairs) return pairs.error();
  NodeLabelSelector s;
  s.pairs_ = std::move(*pairs);
  return s;
}

bool NodeLabelSelector::matches(const nlohmann::json& node) const {
  if (pairs_.empty()) return true;
  const auto meta = node.find("metadata");
  if (meta == node.end() || !meta->is_object()) return false;
  const auto labels = meta->find("labels");
  if (labels == meta->end() || !labels->is_object()) return false;
  for (const auto& [key, value] : pairs_) {
    const auto it = labels->find(key);
    if (it == labels->end() || !it->is_string() || it->get_ref<const std::string&>() != value) {
      return false;
    }
  }
  return true;
}

std::string NodeLabelSelector::describe() const {
  std::string out;
  for (const auto& [key, value] : pairs_) {
    if (!out.empty()) out += ',';
    out += key + "=" + value;
  }
  return out;
}

void NodeFeedFilter::add(const nlohmann::json& node) {
  if (selector_.matches(node)) feed_.node_changed(node);
}

void NodeFeedFilter::update(const nlohmann::json& old_node, const nlohmann::json& node) {
  const bool was = selector_.matches(old_node);
  const bool is = selector_.matches(node);
  if (was && is) {
    feed_.node_updated(old_node, node);
  } else if (is) {
    feed_.node_changed(node);
  } else if (was) {
    feed_.node_deleted(old_node);
  }
}

// Unconditional: a node whose labels changed in an update the watch never
// delivered may be in the cache whatever its last labels say.
void NodeFeedFilter::remove(const nlohmann::json& node) {
  feed_.node_deleted(node);
}

}  // namespace hami::scheduler
