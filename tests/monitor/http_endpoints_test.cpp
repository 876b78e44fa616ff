// The agent's endpoints over real HTTP on a loopback port.
#include "monitor/http_endpoints.hpp"

#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/bind_address.hpp"
#include "region/region.hpp"
#include "support/temp_dir.hpp"

namespace hami::monitor {
namespace {

TEST(BindAddress, Parses) {
  auto a = parse_bind_address(":9394");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->first, "0.0.0.0");
  EXPECT_EQ(a->second, 9394);
  a = parse_bind_address("127.0.0.1:0");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->first, "127.0.0.1");
  a = parse_bind_address("[::1]:80");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->first, "::1");
  for (const char* bad : {"9394", ":", ":http", ":70000", "host:-1"}) {
    auto r = parse_bind_address(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find(bad), std::string::npos);
  }
}

TEST(HttpEndpoints, ServesMetricsHealthAndJson) {
  test::TempDir root;
  const std::string dir = root.path() + "/containers/uid-9_app";
  std::filesystem::create_directories(dir);
  region::OpenOptions opt;
  opt.initial.memory_limit[0] = 2ull << 30;
  auto region = region::Region::open(dir + "/x.cache", opt);
  ASSERT_TRUE(region);
  region->set_device_count(1);
  ASSERT_TRUE(region->set_device_uuid(0, "GPU-abc"));

  Agent agent(AgentOptions{.hook_path = root.path(), .node_name = "n"}, nullptr, nullptr);
  HttpEndpoints http(agent, {.bind = "127.0.0.1:0", .interval = std::chrono::seconds(5)});
  ASSERT_TRUE(http.start());
  ASSERT_GT(http.port(), 0);
  httplib::Client client("127.0.0.1", http.port());

  // Not healthy before the first pass has completed.
  auto res = client.Get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_NE(res->body.find("no pass"), std::string::npos);

  agent.run_pass();
  res = client.Get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);

  res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(res->body.find("hami_vgpu_memory_limit_bytes{namespace=\"\",pod=\"uid-9\",container="
                           "\"app\",vdevice_index=\"0\",device_uuid=\"GPU-abc\",zone=\"vGPU\"} "
                           "2147483648"),
            std::string::npos)
      << res->body;

  res = client.Get("/containers");
  ASSERT_TRUE(res);
  auto j = nlohmann::json::parse(res->body);
  ASSERT_EQ(j["containers"].size(), 1u);
  EXPECT_EQ(j["containers"][0]["pod_uid"], "uid-9");
  EXPECT_EQ(j["containers"][0]["devices"][0]["memory_limit"], 2ull << 30);

  res = client.Get("/nothing");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  http.stop();
}

// File names are bytes: a container directory's name that is not UTF-8 made
// the JSON dump throw (/containers answered 500).
TEST(ViewJson, BytesThatAreNotUtf8BecomeReplacementCharacters) {
  NodeView v;
  ContainerView c;
  c.ref = {"uid-\xff", "main\xc3("};
  c.path = "/hook/containers/uid-\xff_main\xc3(/vgpu.cache";
  v.containers.push_back(c);
  const nlohmann::json j = nlohmann::json::parse(view_json(v));
  EXPECT_EQ(j["containers"][0]["pod_uid"], "uid-\xef\xbf\xbd");
  EXPECT_EQ(j["containers"][0]["container"], "main\xef\xbf\xbd(");
}

TEST(HttpEndpoints, PortInUseIsAClearError) {
  Agent agent(AgentOptions{.hook_path = "/nonexistent"}, nullptr, nullptr);
  HttpEndpoints first(agent, {.bind = "127.0.0.1:0"});
  ASSERT_TRUE(first.start());
  HttpEndpoints second(agent, {.bind = "127.0.0.1:" + std::to_string(first.port())});
  auto ok = second.start();
  ASSERT_FALSE(ok);
  EXPECT_NE(ok.error().message.find("cannot listen"), std::string::npos);
}

}  // namespace
}  // namespace hami::monitor
