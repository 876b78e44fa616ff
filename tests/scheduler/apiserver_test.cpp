// Bind through the real Kubernetes client against the test API server (node
// lock, annotations, pods/binding, every failure path releasing the lock), the
// HTTPS server on loopback with kube-scheduler's bodies, and leader election
// between two replicas sharing one Lease.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <fstream>
#include <thread>

#include "k8s/fixture.hpp"
#include "k8s/leader_election.hpp"
#include "k8s/reflector.hpp"
#include "k8s/time.hpp"
#include "protocol/node_lock.hpp"
#include "scheduler/extender.hpp"
#include "scheduler/feed.hpp"
#include "scheduler/helpers.hpp"
#include "scheduler/k8s_backend.hpp"
#include "scheduler/server.hpp"
#include "support/object_text.hpp"

namespace hami::scheduler {
namespace {

using test::annotation;

using nlohmann::json;
using namespace std::chrono_literals;

class SchedulerApiTest : public test::ApiFixture {
 protected:
  void SetUp() override {
    test::ApiFixture::SetUp();
    for (const char* n : {"a", "b"}) {
      api().put("nodes", test::sched_node(n, 2, 16000));
      feed.node_changed(*api().get("nodes", "", n));
    }
    backend.emplace(client(), std::chrono::seconds(300));
    config.node_lock_wait = 0ms;  // tests that wait say how long
    ext.emplace(cache, config, &*backend, &metrics);
  }
  json create(const std::string& name, std::map<std::string, std::string> limits) {
    return api().put("pods", test::bindable_pod(name, limits));
  }
  std::string uid(const json& p) { return p["metadata"]["uid"]; }
  // The node lock as the device plugin's pod "default/owner" holds it, taken now.
  void lock_node_for_owner(const std::string& node) {
    json n = *api().get("nodes", "", node);
    n["metadata"]["annotations"]["hami.io/mutex.lock"] =
        protocol::format_node_lock(std::chrono::system_clock::now(), "default", "owner");
    api().put("nodes", n);
  }

  ClusterCache cache;
  CacheFeed feed{cache};
  SchedulerConfig config;
  Metrics metrics;
  std::optional<K8sBindBackend> backend;
  std::optional<Extender> ext;
};

TEST_F(SchedulerApiTest, BindAnnotatesLocksAndBinds) {
  json p = create(
      "p", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}, {"nvidia.com/gpucores", "30"}});
  ASSERT_EQ(ext->bind({"default", "p", uid(p), "a"}), "");
  auto after = api().get("pods", "default", "p");
  EXPECT_EQ((*after)["spec"]["nodeName"], "a");
  EXPECT_EQ(annotation(after, "hami.io/vgpu-node"), "a");
  EXPECT_EQ(annotation(after, "hami.io/bind-phase"), "allocating");
  const std::string alloc = annotation(after, "hami.io/vgpu-devices-allocated");
  EXPECT_TRUE(alloc == "GPU-a-0,NVIDIA,3000,30:;" || alloc == "GPU-a-1,NVIDIA,3000,30:;") << alloc;
  EXPECT_EQ(annotation(after, "hami.io/vgpu-devices-to-allocate"), alloc);
  auto lock =
      protocol::parse_node_lock(annotation(api().get("nodes", "", "a"), "hami.io/mutex.lock"));
  ASSERT_TRUE(lock) << lock.error().message;
  EXPECT_TRUE(lock->held_by("default", "p"));
  // The watch bringing the annotated pod back replaces the reservation.
  feed.pod_changed(*after);
  cache.read([](const ClusterCache::View& v) {
    int tenants = 0;
    for (const auto& d : v.node("a")->devices)
      tenants += d.used_tenants;
    EXPECT_EQ(tenants, 1);
    return 0;
  });
}

TEST_F(SchedulerApiTest, LockHeldByALivePodIsContention) {
  api().put("pods", test::sched_pod("owner", {}));
  lock_node_for_owner("a");
  json p = create("p", {{"nvidia.com/gpu", "1"}});
  const std::string err = ext->bind({"default", "p", uid(p), "a"});
  EXPECT_NE(err.find("node lock contention"), std::string::npos) << err;
  EXPECT_EQ((*api().get("pods", "default", "p"))["spec"].value("nodeName", ""), "");
  // The reservation was released: a whole-node pod still fits.
  json q = create("q", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "16000"}});
  EXPECT_EQ(ext->filter(*k8s::Pod::from_json(q), std::vector<std::string>{"a"}).nodes.size(), 1u);
}

TEST_F(SchedulerApiTest, LockReleasedWithinTheWaitIsTaken) {
  config.node_lock_wait = 5s;
  api().put("pods", test::sched_pod("owner", {}));
  lock_node_for_owner("a");
  json p = create("p", {{"nvidia.com/gpu", "1"}});
  // The device plugin releases the owner's lock once kubelet allocated it.
  std::thread plugin([&] {
    std::this_thread::sleep_for(300ms);
    json m = *api().get("nodes", "", "a");
    m["metadata"]["annotations"].erase("hami.io/mutex.lock");
    api().put("nodes", m);
  });
  const auto t0 = std::chrono::steady_clock::now();
  const std::string err = ext->bind({"default", "p", uid(p), "a"});
  plugin.join();
  EXPECT_EQ(err, "");
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 300ms) << "bound while the lock was held";
  EXPECT_EQ((*api().get("pods", "default", "p"))["spec"].value("nodeName", ""), "a");
  auto lock =
      protocol::parse_node_lock(annotation(api().get("nodes", "", "a"), "hami.io/mutex.lock"));
  ASSERT_TRUE(lock) << lock.error().message;
  EXPECT_TRUE(lock->held_by("default", "p"));
}

TEST_F(SchedulerApiTest, LockHeldPastTheWaitIsContention) {
  config.node_lock_wait = 300ms;
  api().put("pods", test::sched_pod("owner", {}));
  lock_node_for_owner("a");
  json p = create("p", {{"nvidia.com/gpu", "1"}});
  const auto t0 = std::chrono::steady_clock::now();
  const std::string err = ext->bind({"default", "p", uid(p), "a"});
  EXPECT_NE(err.find("node lock contention"), std::string::npos) << err;
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 100ms) << "gave up without waiting";
  EXPECT_EQ((*api().get("pods", "default", "p"))["spec"].value("nodeName", ""), "");
}

TEST_F(SchedulerApiTest, LockOfAPodBoundElsewhereIsTakenOver) {
  // The owner's bind on a was cut short after the lock; a retry bound it to b.
  json owner = test::sched_pod("owner", {{"nvidia.com/gpu", "1"}});
  owner["spec"]["nodeName"] = "b";
  api().put("pods", owner);
  lock_node_for_owner("a");
  json p = create("p", {{"nvidia.com/gpu", "1"}});
  EXPECT_EQ(ext->bind({"default", "p", uid(p), "a"}), "");
  auto lock =
      protocol::parse_node_lock(annotation(api().get("nodes", "", "a"), "hami.io/mutex.lock"));
  ASSERT_TRUE(lock) << lock.error().message;
  EXPECT_TRUE(lock->held_by("default", "p"));
}

TEST_F(SchedulerApiTest, StaleOrOrphanedLocksAreTakenOver) {
  json n = *api().get("nodes", "", "a");
  n["metadata"]["annotations"]["hami.io/mutex.lock"] = protocol::format_node_lock(
      std::chrono::system_clock::now() - std::chrono::minutes(10), "default", "old");
  api().put("nodes", n);
  json p = create("p", {{"nvidia.com/gpu", "1"}});
  EXPECT_EQ(ext->bind({"default", "p", uid(p), "a"}), "");
  json m = *api().get("nodes", "", "b");
  m["metadata"]["annotations"]["hami.io/mutex.lock"] =
      protocol::format_node_lock(std::chrono::system_clock::now(), "default", "gone");
  api().put("nodes", m);
  json q = create("q", {{"nvidia.com/gpu", "1"}});
  EXPECT_EQ(ext->bind({"default", "q", uid(q), "b"}), "") << "the owner pod does not exist";
}

// The annotations travel in the Binding: one write puts the pod on its node
// with them, and a binding that fails leaves the pod as it was.
TEST_F(SchedulerApiTest, BindingFailureReleasesTheLockAndLeavesThePodAsItWas) {
  json p = create("p", {{"nvidia.com/gpu", "1"}});
  api().inject({.verb = "create",
                .path_prefix = "/api/v1/namespaces/default/pods/p/binding",
                .status = 500,
                .count = 10});
  const std::string err = ext->bind({"default", "p", uid(p), "a"});
  EXPECT_NE(err.find("bind pod default/p"), std::string::npos) << err;
  EXPECT_EQ(annotation(api().get("nodes", "", "a"), "hami.io/mutex.lock"), "<absent>");
  EXPECT_EQ(annotation(api().get("pods", "default", "p"), "hami.io/bind-phase"), "<absent>");
  EXPECT_EQ(annotation(api().get("pods", "default", "p"), "hami.io/vgpu-node"), "<absent>");
  EXPECT_EQ(metrics.failures(Verb::kBind, "BindFailed"), 1u);
}

TEST_F(SchedulerApiTest, LockFailureLeavesThePodAsItWas) {
  json p = create("p", {{"nvidia.com/gpu", "1"}});
  api().inject({.verb = "patch", .path_prefix = "/api/v1/nodes/a", .status = 422, .count = 10});
  const std::string err = ext->bind({"default", "p", uid(p), "a"});
  EXPECT_NE(err.find("lock node a"), std::string::npos) << err;
  EXPECT_EQ(annotation(api().get("nodes", "", "a"), "hami.io/mutex.lock"), "<absent>");
  EXPECT_EQ((*api().get("pods", "default", "p"))["spec"].value("nodeName", ""), "");
  EXPECT_EQ(annotation(api().get("pods", "default", "p"), "hami.io/bind-phase"), "<absent>");
}

// What one bind asks of the API server when filter has seen the pod and the
// node comes from the watch: one PATCH for the lock, one binding carrying the
// annotations; no read of the pod or the node, no patch of the pod.
TEST_F(SchedulerApiTest, BindFromFiltersCopyAndTheWatchMakesTwoRequests) {
  backend->set_node_source([&](const std::string& n) { return api().get("nodes", "", n); });
  json p = create("p", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}});
  ASSERT_EQ(ext->filter(*k8s::Pod::from_json(p), std::vector<std::string>{"a"}).nodes.size(), 1u);
  ASSERT_EQ(ext->bind({"default", "p", uid(p), "a"}), "");
  EXPECT_EQ(api().requests("get"), 0u);
  EXPECT_EQ(api().requests("patch"), 1u);
  EXPECT_EQ(api().requests("patch", "/api/v1/nodes/a"), 1u);
  EXPECT_EQ(api().requests("create"), 1u);
  EXPECT_EQ(api().requests("create", "/api/v1/namespaces/default/pods/p/binding"), 1u);
  auto after = api().get("pods", "default", "p");
  EXPECT_EQ((*after)["spec"]["nodeName"], "a");
  EXPECT_EQ(annotation(after, "hami.io/bind-phase"), "allocating");
  EXPECT_EQ(annotation(after, "hami.io/vgpu-node"), "a");
  auto lock =
      protocol::parse_node_lock(annotation(api().get("nodes", "", "a"), "hami.io/mutex.lock"));
  ASSERT_TRUE(lock) << lock.error().message;
  EXPECT_TRUE(lock->held_by("default", "p"));
}

// A watch copy older than the node: its resourceVersion no longer matches,
// the patch gets 409, the node is read and the lock taken all the same; a
// copy showing a lock that is no longer there is read again too.
TEST_F(SchedulerApiTest, StaleWatchCopyOfTheNodeStillLocksCorrectly) {
  const json old_a = *api().get("nodes", "", "a");
  json newer = old_a;
  newer["metadata"]["labels"]["x"] = "y";
  api().put("nodes", newer);
  backend->set_node_source([&](const std::string&) { return old_a; });
  json p = create("p", {{"nvidia.com/gpu", "1"}});
  ASSERT_EQ(ext->bind({"default", "p", uid(p), "a"}), "");
  auto lock =
      protocol::parse_node_lock(annotation(api().get("nodes", "", "a"), "hami.io/mutex.lock"));
  ASSERT_TRUE(lock) << lock.error().message;
  EXPECT_TRUE(lock->held_by("default", "p"));
  EXPECT_EQ((*api().get("nodes", "", "a"))["metadata"]["labels"]["x"], "y");
}

// kube-scheduler's choice is kept when its lock is released within the wait
// (the device plugin releases it once kubelet has allocated the pod holding
// it): a batch under binpack stays on one node.
TEST_F(SchedulerApiTest, BindWaitsForTheChosenNodesLockBeforeMovingThePod) {
  config.node_lock_wait = 5s;
  api().put("pods", test::sched_pod("owner", {}));
  lock_node_for_owner("a");
  json p = create("p", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}});
  ASSERT_EQ(ext->filter(*k8s::Pod::from_json(p), std::vector<std::string>{"a", "b"}).nodes.size(),
            2u);
  std::thread plugin([&] {
    std::this_thread::sleep_for(300ms);
    json m = *api().get("nodes", "", "a");
    m["metadata"]["annotations"].erase("hami.io/mutex.lock");
    api().put("nodes", m);
  });
  BindOutcome b = ext->place({"default", "p", uid(p), "a"});
  plugin.join();
  EXPECT_EQ(b.error, "");
  EXPECT_EQ(b.node, "a");
  EXPECT_EQ(metrics.redirects("NodeLock"), 0u);
}

// A node written faster than its lock can be taken (every patch meets a newer
// version) is contention like a held lock: the pod goes elsewhere.
TEST_F(SchedulerApiTest, NodeThatKeepsChangingIsContentionNotFailure) {
  api().inject({.verb = "patch", .path_prefix = "/api/v1/nodes/a", .status = 409, .count = -1});
  json p = create("p", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}});
  ASSERT_EQ(ext->filter(*k8s::Pod::from_json(p), std::vector<std::string>{"a", "b"}).nodes.size(),
            2u);
  BindOutcome b = ext->place({"default", "p", uid(p), "a"});
  api().clear_faults();
  EXPECT_EQ(b.error, "");
  EXPECT_EQ(b.node, "b");
  EXPECT_EQ(metrics.failures(Verb::kBind, "BindFailed"), 0u);
}

// Through the real client: a pod whose node is locked by a pod being
// allocated is bound on the other node its filter found, in one bind.
TEST_F(SchedulerApiTest, BindOnALockedNodeIsRedirected) {
  api().put("pods", test::sched_pod("owner", {}));
  lock_node_for_owner("a");
  json p = create("p", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}});
  ASSERT_EQ(ext->filter(*k8s::Pod::from_json(p), std::vector<std::string>{"a", "b"}).nodes.size(),
            2u);
  BindOutcome b = ext->place({"default", "p", uid(p), "a"});
  EXPECT_EQ(b.error, "");
  EXPECT_EQ(b.node, "b");
  auto after = api().get("pods", "default", "p");
  EXPECT_EQ((*after)["spec"]["nodeName"], "b");
  EXPECT_EQ(annotation(after, "hami.io/vgpu-node"), "b");
  EXPECT_EQ(annotation(after, "hami.io/vgpu-devices-allocated").rfind("GPU-b-", 0), 0u);
  auto lock_a =
      protocol::parse_node_lock(annotation(api().get("nodes", "", "a"), "hami.io/mutex.lock"));
  ASSERT_TRUE(lock_a);
  EXPECT_TRUE(lock_a->held_by("default", "owner"));
  auto lock_b =
      protocol::parse_node_lock(annotation(api().get("nodes", "", "b"), "hami.io/mutex.lock"));
  ASSERT_TRUE(lock_b);
  EXPECT_TRUE(lock_b->held_by("default", "p"));
  EXPECT_EQ(metrics.redirects("NodeLock"), 1u);
}

TEST_F(SchedulerApiTest, MissingPodIsAnError) {
  const std::string err = ext->bind({"default", "nope", "u", "a"});
  EXPECT_NE(err.find("get pod default/nope"), std::string::npos) << err;
  EXPECT_EQ(annotation(api().get("nodes", "", "a"), "hami.io/mutex.lock"), "<absent>");
}

// The server over real HTTPS, with a certificate from a test CA.
class SchedulerHttpsTest : public SchedulerApiTest {
 protected:
  void SetUp() override {
    SchedulerApiTest::SetUp();
    const test::CertAndKey ck = api().ca().issue_server({"localhost"}, {"127.0.0.1"});
    std::ofstream(dir_.file("tls.crt")) << ck.cert_pem;
    std::ofstream(dir_.file("tls.key")) << ck.key_pem;
    std::ofstream(dir_.file("ca.crt")) << api().ca_pem();
    server.emplace(*ext, config, metrics, cache,
                   ServerOptions{.bind = "127.0.0.1:0",
                                 .cert_file = dir_.file("tls.crt"),
                                 .key_file = dir_.file("tls.key"),
                                 .metrics_bind = "127.0.0.1:0"});
    auto r = server->start();
    ASSERT_TRUE(r) << r.error().message;
  }
  void TearDown() override { server.reset(); }

  httplib::Result post(const std::string& path, const std::string& body) {
    httplib::SSLClient c("127.0.0.1", server->port());
    c.set_ca_cert_path(dir_.file("ca.crt").c_str());
    c.enable_server_certificate_verification(true);
    return c.Post(path.c_str(), body, "application/json");
  }

  std::optional<SchedulerServer> server;
};

TEST_F(SchedulerHttpsTest, FilterPrioritizeBindOverHttps) {
  json p = create("p", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "12000"}});
  // b is busier: binpack (the default node policy) prefers it.
  feed.pod_changed(test::placed_pod("busy", "ub", "b", "GPU-b-0,NVIDIA,8000,50:;"));
  const json args = {{"Pod", p}, {"Nodes", nullptr}, {"NodeNames", {"a", "b", "c"}}};
  auto f = post("/filter", args.dump());
  ASSERT_TRUE(f) << httplib::to_string(f.error());
  ASSERT_EQ(f->status, 200);
  json fr = json::parse(f->body);
  EXPECT_EQ(fr["NodeNames"], json::array({"a", "b"}));
  EXPECT_EQ(fr["FailedNodes"]["c"], "node unregistered");
  EXPECT_EQ(fr["Error"], "");

  auto pr = post("/prioritize", json{{"Pod", p}, {"NodeNames", {"a", "b"}}}.dump());
  ASSERT_TRUE(pr);
  json prio = json::parse(pr->body);
  ASSERT_EQ(prio.size(), 2u);
  EXPECT_EQ(prio[0]["Host"], "a");
  EXPECT_GT(prio[1]["Score"].get<int>(), prio[0]["Score"].get<int>());

  auto b =
      post("/bind",
           json{{"PodName", "p"}, {"PodNamespace", "default"}, {"PodUID", uid(p)}, {"Node", "b"}}
               .dump());
  ASSERT_TRUE(b);
  EXPECT_EQ(json::parse(b->body)["Error"], "");
  EXPECT_EQ((*api().get("pods", "default", "p"))["spec"]["nodeName"], "b");

  // Filtering the same pod shape again: b's free GPU is now taken.
  json q = create("q", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "12000"}});
  auto f2 = post("/filter", json{{"Pod", q}, {"NodeNames", {"b"}}}.dump());
  ASSERT_TRUE(f2);
  EXPECT_EQ(json::parse(f2->body)["NodeNames"], json::array());
}

TEST_F(SchedulerHttpsTest, BadBodiesAreAnsweredNotDropped) {
  auto f = post("/filter", "{not json");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status, 200);
  EXPECT_NE(json::parse(f->body)["Error"].get<std::string>().find("not valid JSON"),
            std::string::npos);
  auto b = post("/bind", R"({"PodName":"p"})");
  ASSERT_TRUE(b);
  EXPECT_NE(json::parse(b->body)["Error"].get<std::string>().find("Node: missing"),
            std::string::npos);
  auto w = post("/webhook", "[]");
  ASSERT_TRUE(w);
  EXPECT_FALSE(json::parse(w->body)["response"]["allowed"]);
}

TEST_F(SchedulerHttpsTest, HealthAndMetrics) {
  httplib::SSLClient c("127.0.0.1", server->port());
  c.set_ca_cert_path(dir_.file("ca.crt").c_str());
  c.enable_server_certificate_verification(true);
  auto h = c.Get("/healthz");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  json p = create("p", {{"nvidia.com/gpu", "1"}});
  ASSERT_TRUE(post("/filter", json{{"Pod", p}, {"NodeNames", {"a"}}}.dump()));
  httplib::Client m("127.0.0.1", server->metrics_port());
  auto r = m.Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_NE(r->body.find("hami_scheduler_request_duration_seconds_count{verb=\"filter\"} 1"),
            std::string::npos)
      << r->body.substr(0, 2000);
  EXPECT_NE(
      r->body.find("hami_gpu_memory_limit_bytes{node=\"a\",device_uuid=\"GPU-a-0\","
                   "device_index=\"0\",device_type=\"NVIDIA-Tesla T4\",zone=\"vGPU\"} 16777216000"),
      std::string::npos);
}

TEST_F(SchedulerHttpsTest, NotSyncedCacheRefusesFilterAndBind) {
  server.reset();
  std::atomic<bool> synced{false};
  server.emplace(*ext, config, metrics, cache,
                 ServerOptions{.bind = "127.0.0.1:0",
                               .cert_file = dir_.file("tls.crt"),
                               .key_file = dir_.file("tls.key"),
                               .metrics_bind = "",
                               .ready = [&] { return synced.load(); }});
  ASSERT_TRUE(server->start());
  json p = create("p", {{"nvidia.com/gpu", "1"}});
  auto f = post("/filter", json{{"Pod", p}, {"NodeNames", {"a"}}}.dump());
  ASSERT_TRUE(f);
  EXPECT_NE(json::parse(f->body)["Error"].get<std::string>().find("not synced"), std::string::npos);
  httplib::SSLClient c("127.0.0.1", server->port());
  c.set_ca_cert_path(dir_.file("ca.crt").c_str());
  c.enable_server_certificate_verification(true);
  auto r = c.Get("/readyz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  synced = true;
  f = post("/filter", json{{"Pod", p}, {"NodeNames", {"a"}}}.dump());
  ASSERT_TRUE(f);
  EXPECT_EQ(json::parse(f->body)["NodeNames"], json::array({"a"}));
  server.reset();  // before `synced` goes out of scope
}

TEST_F(SchedulerHttpsTest, PlainClientIsRefused) {
  httplib::Client c("127.0.0.1", server->port());
  c.set_connection_timeout(2);
  c.set_read_timeout(2);
  auto r = c.Get("/healthz");
  EXPECT_TRUE(!r || r->status != 200);
}

// With a client CA, the extender verbs answer only kube-scheduler's client
// certificate; the webhook (the API server sends none) and the probes stay open.
TEST_F(SchedulerHttpsTest, ExtenderVerbsNeedTheClientCertificate) {
  const test::CertAndKey kube_scheduler = api().ca().issue_client("kube-scheduler");
  std::ofstream(dir_.file("client.crt")) << kube_scheduler.cert_pem;
  std::ofstream(dir_.file("client.key")) << kube_scheduler.key_pem;
  test::CertAuthority other("another-ca");
  const test::CertAndKey stranger = other.issue_client("kube-scheduler");
  std::ofstream(dir_.file("stranger.crt")) << stranger.cert_pem;
  std::ofstream(dir_.file("stranger.key")) << stranger.key_pem;
  server.reset();
  server.emplace(*ext, config, metrics, cache,
                 ServerOptions{.bind = "127.0.0.1:0",
                               .cert_file = dir_.file("tls.crt"),
                               .key_file = dir_.file("tls.key"),
                               .client_ca_file = dir_.file("ca.crt"),
                               .metrics_bind = ""});
  ASSERT_TRUE(server->start());
  json p = create("p", {{"nvidia.com/gpu", "1"}});
  const std::string args = json{{"Pod", p}, {"NodeNames", {"a"}}}.dump();
  const std::string bind =
      json{{"PodName", "p"}, {"PodNamespace", "default"}, {"PodUID", uid(p)}, {"Node", "a"}}.dump();
  auto client = [&](const std::string& who) {
    auto c = who.empty() ? std::make_unique<httplib::SSLClient>("127.0.0.1", server->port())
                         : std::make_unique<httplib::SSLClient>("127.0.0.1", server->port(),
                                                                dir_.file(who + ".crt"),
                                                                dir_.file(who + ".key"));
    c->set_ca_cert_path(dir_.file("ca.crt").c_str());
    c->enable_server_certificate_verification(true);
    return c;
  };
  for (const std::string who : {"", "stranger"}) {
    SCOPED_TRACE(who.empty() ? "no certificate" : who);
    for (const char* path : {"/filter", "/prioritize", "/bind"}) {
      auto r =
          client(who)->Post(path, path == std::string("/bind") ? bind : args, "application/json");
      ASSERT_TRUE(r) << path;
      EXPECT_EQ(r->status, 403) << path;
      EXPECT_NE(r->body.find("client certificate"), std::string::npos) << r->body;
    }
    auto w = client(who)->Post("/webhook", "[]", "application/json");
    ASSERT_TRUE(w);
    EXPECT_EQ(w->status, 200);
    auto h = client(who)->Get("/healthz");
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 200);
  }
  EXPECT_EQ((*api().get("pods", "default", "p"))["spec"].value("nodeName", ""), "")
      << "an unauthenticated bind bound the pod";
  auto f = client("client")->Post("/filter", args, "application/json");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status, 200);
  EXPECT_EQ(json::parse(f->body)["NodeNames"], json::array({"a"}));
  auto b = client("client")->Post("/bind", bind, "application/json");
  ASSERT_TRUE(b);
  EXPECT_EQ(json::parse(b->body)["Error"], "");
  EXPECT_EQ((*api().get("pods", "default", "p"))["spec"]["nodeName"], "a");
}

// Two replicas on one Lease: only the leader's bind succeeds; when it stops,
// the other takes over.
TEST_F(SchedulerApiTest, OnlyTheLeaderBinds) {
  auto client2 = connect(kubeconfig_);
  ASSERT_TRUE(client2);
  K8sBindBackend backend2(*client2, std::chrono::seconds(300));
  Extender ext2(cache, config, &backend2, &metrics);
  auto make = [](k8s::Client& c, const std::string& id) {
    return std::make_unique<k8s::LeaderElector>(
        c, k8s::LeaderElectionConfig{.lease_namespace = "default",
                                     .lease_name = "hami-scheduler",
                                     .identity = id,
                                     .lease_duration = std::chrono::seconds(2),
                                     .renew_deadline = std::chrono::milliseconds(1500),
                                     .retry_period = std::chrono::milliseconds(100)});
  };
  auto e1 = make(client(), "one");
  auto e2 = make(*client2, "two");
  ext->set_leader_check([&](std::chrono::milliseconds) { return e1->is_leader(); });
  ext2.set_leader_check([&](std::chrono::milliseconds) { return e2->is_leader(); });
  e1->start();
  ASSERT_TRUE(test::wait_until([&] { return e1->is_leader(); }));
  e2->start();
  ASSERT_TRUE(test::wait_until([&] { return e2->holder() == "one"; }));
  EXPECT_FALSE(e2->is_leader());

  json p = create("p", {{"nvidia.com/gpu", "1"}});
  EXPECT_NE(ext2.bind({"default", "p", uid(p), "a"}).find("not the leader"), std::string::npos);
  EXPECT_EQ(ext->bind({"default", "p", uid(p), "a"}), "");

  e1->stop();  // releases the lease
  ASSERT_TRUE(test::wait_until([&] { return e2->is_leader(); }, 10s));
  EXPECT_FALSE(e1->is_leader());
  json q = create("q", {{"nvidia.com/gpu", "1"}});
  EXPECT_NE(ext->bind({"default", "q", uid(q), "b"}).find("not the leader"), std::string::npos);
  EXPECT_EQ(ext2.bind({"default", "q", uid(q), "b"}), "");
  e2->stop();
}

}  // namespace
}  // namespace hami::scheduler
