// Upstream's --node-label-selector on the real hami-scheduler: nodes without
// the labels are not scheduled onto, and a node that gains or loses a label
// joins or leaves, through the test API server's watch (issue 24, point 1).
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "scheduler/helpers.hpp"
#include "support/apiserver/api_server.hpp"
#include "support/free_port.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"
#include "support/wait.hpp"

namespace hami::test {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

json labelled(const std::string& name, json labels) {
  json n = sched_node(name);
  n["metadata"]["labels"] = std::move(labels);
  return n;
}

TEST(UpstreamNodeLabelSelector, SchedulesOnlyOntoLabelledNodes) {
  TempDir dir;
  ApiServer api;
  api.put("nodes", labelled("a", {{"gpu", "on"}}));
  api.put("nodes", labelled("b", {{"gpu", "off"}}));
  const int port = free_port();
  // Go's single-dash spelling, as upstream's flags may come.
  Child scheduler = Child::spawn(
      {SCHEDULER_BINARY, "--kubeconfig=" + api.write_kubeconfig(dir.file("kubeconfig")),
       "--http_bind=127.0.0.1:" + std::to_string(port), "--metrics-bind-address=none",
       "-node-label-selector=gpu=on"},
      {{"KUBECONFIG", kUnset}});
  httplib::Client http("127.0.0.1", port);
  ASSERT_TRUE(wait_until(
      [&] {
        auto r = http.Get("/readyz");
        return r && r->status == 200;
      },
      20s, 20ms))
      << "the scheduler never became ready";

  const json args = {{"Pod", sched_pod("p", {{"nvidia.com/gpu", "1"}}, "uid-p")},
                     {"Nodes", nullptr},
                     {"NodeNames", {"a", "b"}}};
  json got;
  auto filter_gives = [&](const json& want) {
    return wait_until(
        [&] {
          auto r = http.Post("/filter", args.dump(), "application/json");
          if (!r || r->status != 200) return false;
          got = json::parse(r->body, nullptr, false);
          return got["NodeNames"] == want;
        },
        15s, 20ms);
  };
  EXPECT_TRUE(filter_gives(json::array({"a"}))) << got.dump();
  EXPECT_TRUE(got["FailedNodes"].contains("b")) << got.dump();

  api.put("nodes", labelled("b", {{"gpu", "on"}}));  // labelled: joins
  EXPECT_TRUE(filter_gives(json::array({"a", "b"}))) << got.dump();

  api.put("nodes", labelled("a", {{"gpu", "off"}}));  // label gone: leaves
  EXPECT_TRUE(filter_gives(json::array({"b"}))) << got.dump();

  scheduler.kill(SIGTERM);
  const ProcessResult r = scheduler.finish();
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace
}  // namespace hami::test
