#include "monitor/pod_directory_k8s.hpp"

#include <algorithm>
#include <unordered_map>

#include "common/log.hpp"
#include "k8s/client.hpp"
#include "k8s/objects.hpp"
#include "k8s/paths.hpp"

namespace hami::monitor {
namespace {

// A new pod's directory appears when its first CUDA process starts; asking
// again at most this often bounds what a pod the API does not know (deleted,
// or from another cluster) costs the API server.
constexpr std::chrono::seconds kUnknownRetry{10};

class K8sPodDirectory final : public PodDirectory {
 public:
  K8sPodDirectory(k8s::Client client, std::string node, std::chrono::seconds resync)
      : client_(std::move(client)), node_(std::move(node)), resync_(resync) {}

  void refresh_if_unknown(const std::vector<std::string>& pod_uids) override {
    const auto now = std::chrono::steady_clock::now();
    const bool unknown = std::any_of(pod_uids.begin(), pod_uids.end(), [&](const std::string& u) {
      return by_uid_.find(u) == by_uid_.end();
    });
    const auto since = now - last_list_;
    const bool due = !listed_ || since >= resync_ || (unknown && since >= kUnknownRetry);
    if (!due) return;
    last_list_ = now;

    auto list = client_.list(k8s::core_path("pods"), {.field_selector = "spec.nodeName=" + node_});
    if (!list) {
      if (list.error().message != last_error_) {
        last_error_ = list.error().message;
        log::warn(
            "cannot list the pods of node %s (names keep their last value; metrics use "
            "the pod UID meanwhile): %s",
            node_.c_str(), last_error_.c_str());
      }
      return;
    }
    if (!last_error_.empty()) log::info("pod list of node %s readable again", node_.c_str());
    last_error_.clear();
    std::unordered_map<std::string, PodName> fresh;
    for (const nlohmann::json& item : list->items) {
      auto meta = k8s::ObjectMeta::from_json(item.value("metadata", nlohmann::json::object()));
      if (!meta || meta->uid.empty()) continue;
      fresh.emplace(meta->uid, PodName{meta->ns, meta->name});
    }
    if (!listed_) {
      log::info("pod names from the API server: %zu pods on node %s", fresh.size(), node_.c_str());
    }
    by_uid_ = std::move(fresh);
    listed_ = true;
  }

  std::optional<PodName> find(std::string_view pod_uid) const override {
    auto it = by_uid_.find(std::string(pod_uid));
    if (it == by_uid_.end()) return std::nullopt;
    return it->second;
  }

 private:
  k8s::Client client_;
  std::string node_;
  std::chrono::seconds resync_;
  std::unordered_map<std::string, PodName> by_uid_;
  std::chrono::steady_clock::time_point last_list_{};
  bool listed_ = false;
  std::string last_error_;
};

}  // namespace

Result<std::unique_ptr<PodDirectory>> make_k8s_pod_directory(const std::string& kubeconfig,
                                                             const std::string& node_name,
                                                             std::chrono::seconds resync) {
  if (node_name.empty()) return Error{"no node name (set NODE_NAME or --node-name)"};
  auto config = k8s::Config::auto_detect(
      kubeconfig.empty() ? std::nullopt : std::optional<std::string>(kubeconfig));
  if (!config) return config.error();
  // Short timeouts and few attempts: the list runs on the agent's pass thread,
  // and a pass must not stall for long when the API server is away.
  auto client = k8s::Client::from_config(
      *config, k8s::ClientOptions{.connect_timeout = std::chrono::seconds(3),
                                  .request_timeout = std::chrono::seconds(5),
                                  .user_agent = "hami-node-agent",
                                  .max_attempts = 2});
  if (!client) return client.error();
  log::info("pod names: %s, pods of node %s only", config->source.c_str(), node_name.c_str());
  return std::unique_ptr<PodDirectory>(new K8sPodDirectory(std::move(*client), node_name, resync));
}

}  // namespace hami::monitor
