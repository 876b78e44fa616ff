#pragma once
// Upstream's --node-label-selector ("gpu=on,zone=a"): only nodes whose labels
// hold every key=value pair are the scheduler's; the others never enter the
// cache, so filter finds no GPUs there. NodeFeedFilter turns the node watch's
// events into what the cache must see when a node's labels change (a node
// that stops matching leaves the cache, one that starts matching joins).
//
//   auto sel = hami::scheduler::NodeLabelSelector::parse("gpu=on");
//   if (!sel) die(sel.error().message);
//   NodeFeedFilter nodes(*sel, feed);     // reflector callbacks call nodes.add/update/remove

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.hpp"
#include "scheduler/feed.hpp"

namespace hami::scheduler {

class NodeLabelSelector {
 public:
  NodeLabelSelector() = default;
  // pflag's StringToString text; "" selects every node.
  static Result<NodeLabelSelector> parse(std::string_view text);

  bool empty() const { return pairs_.empty(); }
  bool matches(const nlohmann::json& node) const;
  std::string describe() const;  // "gpu=on,zone=a"

 private:
  std::vector<std::pair<std::string, std::string>> pairs_;
};

class NodeFeedFilter {
 public:
  NodeFeedFilter(NodeLabelSelector selector, CacheFeed& feed)
      : selector_(std::move(selector)), feed_(feed) {}

  void add(const nlohmann::json& node);
  void update(const nlohmann::json& old_node, const nlohmann::json& node);
  void remove(const nlohmann::json& node);

 private:
  NodeLabelSelector selector_;
  CacheFeed& feed_;
};

}  // namespace hami::scheduler
