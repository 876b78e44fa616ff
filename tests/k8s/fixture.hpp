#pragma once
// The fixture of the k8s client tests: a test API server over real HTTPS, a
// kubeconfig for it and a Client with short backoffs, plus object builders and
// a deadline-bounded wait for conditions that other threads make true.
//
//   class MyTest : public hami::test::ApiFixture {};
//   TEST_F(MyTest, X) { client().create(pod_path("default"), make_pod("p")); }

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "k8s/client.hpp"
#include "k8s/config.hpp"
#include "k8s/paths.hpp"
#include "support/apiserver/api_server.hpp"
#include "support/temp_dir.hpp"
#include "support/wait.hpp"

namespace hami::test {

inline k8s::ClientOptions fast_client_options() {
  k8s::ClientOptions o;
  o.connect_timeout = std::chrono::milliseconds(2000);
  o.request_timeout = std::chrono::milliseconds(5000);
  o.backoff_initial = std::chrono::milliseconds(5);
  o.backoff_max = std::chrono::milliseconds(50);
  o.max_attempts = 4;
  return o;
}

inline nlohmann::json make_pod(const std::string& name,
                               const std::map<std::string, std::string>& labels = {},
                               const std::string& node = {}, const std::string& ns = "default") {
  nlohmann::json pod = {{"apiVersion", "v1"},
                        {"kind", "Pod"},
                        {"metadata", {{"name", name}, {"namespace", ns}}},
                        {"spec", {{"containers", {{{"name", "main"}, {"image", "busybox"}}}}}}};
  if (!labels.empty()) pod["metadata"]["labels"] = labels;
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  return pod;
}

inline nlohmann::json make_node(const std::string& name) {
  return {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}}}};
}

class ApiFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    api_ = std::make_unique<ApiServer>(server_options());
    kubeconfig_ = api_->write_kubeconfig(dir_.file("kubeconfig"));
    client_ = connect(kubeconfig_);
    ASSERT_TRUE(client_);
  }

  virtual ApiServerOptions server_options() { return {}; }

  std::optional<k8s::Client> connect(const std::string& kubeconfig,
                                     k8s::ClientOptions options = fast_client_options()) {
    auto cfg = k8s::Config::from_kubeconfig(kubeconfig);
    EXPECT_TRUE(cfg) << cfg.error().message;
    if (!cfg) return std::nullopt;
    auto c = k8s::Client::from_config(*cfg, options);
    EXPECT_TRUE(c) << c.error().message;
    if (!c) return std::nullopt;
    return std::move(*c);
  }

  k8s::Client& client() { return *client_; }
  ApiServer& api() { return *api_; }

  TempDir dir_;
  std::unique_ptr<ApiServer> api_;
  std::string kubeconfig_;
  std::optional<k8s::Client> client_;
};

}  // namespace hami::test
