// Events the scheduler records on pods, written through the real client to
// the test API server: upstream's reasons and wording, the pod as
// involvedObject, one series per pod and reason however often a pending pod
// is filtered, the queue bounded (drops counted, record never waits), and
// bind's pod label hami.io/vgpu-node.
#include "scheduler/events.hpp"

#include <gtest/gtest.h>

#include <optional>

#include "k8s/fixture.hpp"
#include "scheduler/extender.hpp"
#include "scheduler/feed.hpp"
#include "scheduler/helpers.hpp"
#include "scheduler/k8s_backend.hpp"

namespace hami::scheduler {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

class SchedulerEventsTest : public test::ApiFixture {
 protected:
  void SetUp() override {
    test::ApiFixture::SetUp();
    for (const char* n : {"a", "b"}) {
      api().put("nodes", test::sched_node(n, 2, 16000));
      feed.node_changed(*api().get("nodes", "", n));
    }
    backend.emplace(client(), std::chrono::seconds(300));
    config.node_lock_wait = 0ms;
    events.emplace(&client(), EventOptions{.component = "hami-scheduler", .instance = "test-0"});
    ext.emplace(cache, config, &*backend, &metrics);
    ext->set_events(&*events);
  }
  json create(const std::string& name, std::map<std::string, std::string> limits) {
    return api().put("pods", test::bindable_pod(name, limits));
  }
  k8s::Pod pod_of(const json& p) { return *k8s::Pod::from_json(p); }
  std::vector<json> events_with(const std::string& reason) {
    std::vector<json> out;
    for (json& e : api().objects("events", "default")) {
      if (e.value("reason", "") == reason) out.push_back(std::move(e));
    }
    return out;
  }
  uint64_t event_writes() {
    return api().requests("create", "/api/v1/namespaces/default/events") +
           api().requests("patch", "/api/v1/namespaces/default/events");
  }

  ClusterCache cache;
  CacheFeed feed{cache};
  SchedulerConfig config;
  Metrics metrics;
  std::optional<K8sBindBackend> backend;
  std::optional<EventRecorder> events;
  std::optional<Extender> ext;
  const std::vector<std::string> nodes{"a", "b"};
};

TEST_F(SchedulerEventsTest, FilterFailureIsAWarningWithTheReasons) {
  json p = create("big", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "20000"}});
  FilterResult f = ext->filter(pod_of(p), nodes);
  ASSERT_TRUE(f.nodes.empty());
  events->flush();
  auto ev = events_with("FilteringFailed");
  ASSERT_EQ(ev.size(), 1u) << json(api().objects("events")).dump();
  const json& e = ev[0];
  EXPECT_EQ(e["type"], "Warning");
  EXPECT_EQ(e["message"], "2 nodes 2/2 CardInsufficientMemory(a,b)");
  EXPECT_EQ(e["involvedObject"]["kind"], "Pod");
  EXPECT_EQ(e["involvedObject"]["namespace"], "default");
  EXPECT_EQ(e["involvedObject"]["name"], "big");
  EXPECT_EQ(e["involvedObject"]["uid"], p["metadata"]["uid"]);
  EXPECT_EQ(e["source"]["component"], "hami-scheduler");
  EXPECT_EQ(e["count"], 1);
  EXPECT_TRUE(e.contains("firstTimestamp"));
  EXPECT_TRUE(e.contains("lastTimestamp"));
}

TEST_F(SchedulerEventsTest, BurstOfFailingFiltersIsOneSeries) {
  json p = create("big", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "20000"}});
  const k8s::Pod pod = pod_of(p);
  for (int i = 0; i < 100; ++i)
    ASSERT_TRUE(ext->filter(pod, nodes).nodes.empty());
  events->flush();
  auto ev = events_with("FilteringFailed");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0]["count"], 100);
  // One create, and the count written once when flushed (at most one more
  // if the burst straddled the aggregation interval).
  EXPECT_LE(event_writes(), 3u);
  EXPECT_GE(event_writes(), 1u);
  EXPECT_EQ(events->stats().aggregated, 99u);
}

TEST_F(SchedulerEventsTest, ChangedMessageIsCombinedIntoTheSeries) {
  const PodRef ref{"default", "p", "uid-p"};
  events->record(ref, EventType::kWarning, "FilteringFailed", "1 nodes x(a)");
  events->flush();
  events->record(ref, EventType::kWarning, "FilteringFailed", "2 nodes y(a,b)");
  events->flush();
  auto ev = events_with("FilteringFailed");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0]["count"], 2);
  EXPECT_EQ(ev[0]["message"], "(combined from similar events): 2 nodes y(a,b)");
}

TEST_F(SchedulerEventsTest, ExpiredEventStartsANewOne) {
  const PodRef ref{"default", "p", "uid-p"};
  events->record(ref, EventType::kWarning, "FilteringFailed", "m");
  events->flush();
  auto ev = events_with("FilteringFailed");
  ASSERT_EQ(ev.size(), 1u);
  // The API server's event TTL removes it; the series goes on in a new one.
  ASSERT_TRUE(api().remove("events", "default", ev[0]["metadata"]["name"]));
  events->record(ref, EventType::kWarning, "FilteringFailed", "m");
  events->flush();
  ev = events_with("FilteringFailed");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0]["count"], 2);
}

TEST_F(SchedulerEventsTest, BindRecordsSuccessAndLabelsThePod) {
  json p = create("p", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}});
  FilterResult f = ext->filter(pod_of(p), nodes);
  ASSERT_EQ(f.nodes.size(), 2u);
  ASSERT_EQ(ext->bind({"default", "p", p["metadata"]["uid"], "a"}), "");
  events->flush();
  auto ok = events_with("FilteringSucceed");
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(ok[0]["type"], "Normal");
  EXPECT_EQ(ok[0]["message"], "2 nodes fit(a,b), 0 nodes not fit");
  auto bound = events_with("BindingSucceed");
  ASSERT_EQ(bound.size(), 1u);
  EXPECT_EQ(bound[0]["message"], "Successfully binding node [a] to default/p");
  EXPECT_EQ(bound[0]["involvedObject"]["uid"], p["metadata"]["uid"]);
  auto after = api().get("pods", "default", "p");
  ASSERT_TRUE(after);
  EXPECT_EQ((*after)["metadata"]["labels"]["hami.io/vgpu-node"], "a") << after->dump();
}

TEST_F(SchedulerEventsTest, BindFailureIsAWarning) {
  json p = create("big", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "20000"}});
  EXPECT_NE(ext->bind({"default", "big", p["metadata"]["uid"], "a"}), "");
  events->flush();
  auto ev = events_with("BindingFailed");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0]["type"], "Warning");
  EXPECT_NE(ev[0]["message"].get<std::string>().find("CardInsufficientMemory"), std::string::npos)
      << ev[0].dump();
  auto after = api().get("pods", "default", "big");
  EXPECT_FALSE((*after)["metadata"].contains("labels") &&
               (*after)["metadata"]["labels"].contains("hami.io/vgpu-node"));
}

TEST_F(SchedulerEventsTest, FullQueueDropsInsteadOfWaiting) {
  // The API server takes its time over the first write; the worker is
  // stuck in it while 20 more pods' events arrive at a queue of 4.
  EventRecorder slow(&client(), EventOptions{.queue_limit = 4});
  api().inject({.verb = "create",
                .path_prefix = "/api/v1/namespaces/default/events",
                .status = 0,
                .count = 1,
                .delay = 1000ms});
  slow.record({"default", "p0", "u0"}, EventType::kWarning, "FilteringFailed", "m");
  ASSERT_TRUE(test::wait_until(
      [&] { return api().requests("create", "/api/v1/namespaces/default/events") == 1; }));
  for (int i = 1; i <= 20; ++i) {
    PodRef ref{"default", "p", "u"};
    ref.name += std::to_string(i);
    ref.uid += std::to_string(i);
    slow.record(ref, EventType::kWarning, "FilteringFailed", "m");
  }
  auto s = slow.stats();
  EXPECT_EQ(s.recorded + s.dropped, 21u);
  EXPECT_GE(s.dropped, 16u);
  // A label patch has its own queue: the events' backlog does not drop it.
  api().put("pods", test::sched_pod("lp", {}));
  slow.label_pod("default", "lp", {{"hami.io/vgpu-node", "a"}});
  EXPECT_EQ(slow.stats().dropped, s.dropped);
  slow.flush();
  EXPECT_EQ((*api().get("pods", "default", "lp"))["metadata"]["labels"]["hami.io/vgpu-node"], "a");
  s = slow.stats();
  EXPECT_EQ(s.created, s.recorded);
  EXPECT_EQ(events_with("FilteringFailed").size(), s.recorded);
  PrometheusText out;
  slow.render(out);
  std::string line = "hami_scheduler_events_total{result=\"dropped\"} ";
  line += std::to_string(s.dropped);
  EXPECT_NE(out.text().find(line + "\n"), std::string::npos) << out.text();
}

// A backlog must not hold the scheduler's exit: Kubernetes kills a pod that
// has not stopped within its grace period. Paced at 1 write a second and with
// the API server taking 200 ms per write, 40 queued events would take 40 s;
// the recorder writes for its budget, unpaced, and drops the rest.
TEST_F(SchedulerEventsTest, ShutdownWritesWhatItCanInItsBudgetAndDropsTheRest) {
  api().inject({.verb = "create",
                .path_prefix = "/api/v1/namespaces/default/events",
                .status = 0,
                .count = 100,
                .delay = 200ms});
  std::optional<EventRecorder> slow;
  slow.emplace(&client(), EventOptions{.qps = 1, .burst = 1});
  for (int i = 0; i < 40; ++i) {
    PodRef ref{"default", "p", "u"};
    ref.name += std::to_string(i);
    ref.uid += std::to_string(i);
    slow->record(ref, EventType::kNormal, "BindingSucceed", "m");
  }
  const auto t0 = std::chrono::steady_clock::now();
  slow.reset();
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(took, EventRecorder::kShutdownBudget + 3s);
  const size_t written = events_with("BindingSucceed").size();
  EXPECT_GT(written, 1u) << "nothing written unpaced within the budget";
  EXPECT_LT(written, 40u);
}

}  // namespace
}  // namespace hami::scheduler
