// Watches and the reflector against the test API server: event order,
// bookmarks, selector transitions, large events split across reads, stop,
// 410 handling; the reflector's resume without loss or duplication and its
// relist after compaction.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "fixture.hpp"
#include "k8s/reflector.hpp"

namespace hami::k8s {
namespace {

using nlohmann::json;
using test::ApiFixture;
using test::make_node;
using test::make_pod;
using test::wait_until;
using ::testing::HasSubstr;

std::string rv_of(const json& obj) {
  return obj["metadata"]["resourceVersion"];
}
std::string name_of(const json& obj) {
  return obj["metadata"]["name"];
}

// Runs a watch on its own thread and records what arrives.
class Recorder {
 public:
  Recorder(Client& client, std::string path, WatchOptions options)
      : thread_([this, &client, path = std::move(path), options] {
          auto r = client.watch(
              path, options,
              [this](const WatchEvent& e) {
                std::lock_guard lock(mu_);
                events_.push_back(e);
                return true;
              },
              stop_.get_token());
          std::lock_guard lock(mu_);
          end_ = std::move(r);
          done_ = true;
        }) {}
  ~Recorder() {
    stop_.request_stop();
    thread_.join();
  }
  std::vector<WatchEvent> events() {
    std::lock_guard lock(mu_);
    return events_;
  }
  size_t count(WatchEvent::Type t) {
    std::lock_guard lock(mu_);
    return std::count_if(events_.begin(), events_.end(),
                         [t](const auto& e) { return e.type == t; });
  }
  bool done() {
    std::lock_guard lock(mu_);
    return done_;
  }
  std::optional<Result<WatchEnd>> end() {
    std::lock_guard lock(mu_);
    return end_;
  }
  void stop() { stop_.request_stop(); }

 private:
  std::mutex mu_;
  std::vector<WatchEvent> events_;
  std::optional<Result<WatchEnd>> end_;
  bool done_ = false;
  std::stop_source stop_;
  std::thread thread_;
};

class WatchTest : public ApiFixture {};

TEST_F(WatchTest, EventsArriveInOrder) {
  api().put("pods", make_pod("before"));
  const std::string start = std::to_string(api().resource_version());
  Recorder rec(client(), pod_path("default"),
               {.resource_version = start, .allow_bookmarks = false});
  ASSERT_TRUE(wait_until([&] { return api().open_watches() == 1; }));
  ASSERT_TRUE(client().create(pod_path("default"), make_pod("a")));
  ASSERT_TRUE(client().patch_annotations(pod_path("default", "a"), {{"k", "v"}}));
  ASSERT_TRUE(client().create(pod_path("default"), make_pod("b")));
  ASSERT_TRUE(client().del(pod_path("default", "a")));
  api().put("pods", make_pod("elsewhere", {}, "", "other"));  // another namespace: not seen
  ASSERT_TRUE(wait_until([&] { return rec.events().size() >= 4; }));
  rec.stop();
  ASSERT_TRUE(wait_until([&] { return rec.done(); }));
  const auto events = rec.events();
  ASSERT_EQ(events.size(), 4u);
  using T = WatchEvent::Type;
  const std::vector<std::pair<T, std::string>> want = {
      {T::kAdded, "a"}, {T::kModified, "a"}, {T::kAdded, "b"}, {T::kDeleted, "a"}};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(events[i].type, want[i].first) << i;
    EXPECT_EQ(name_of(events[i].object), want[i].second) << i;
    if (i > 0) {
      EXPECT_LT(std::stoull(rv_of(events[i - 1].object)), std::stoull(rv_of(events[i].object)));
    }
  }
  EXPECT_EQ(events[1].object["metadata"]["annotations"]["k"], "v");
  EXPECT_EQ(rec.end()->value(), WatchEnd::kStopped);
}

TEST_F(WatchTest, WithoutResourceVersionCurrentObjectsComeFirst) {
  api().put("pods", make_pod("x"));
  api().put("pods", make_pod("y"));
  Recorder rec(client(), pod_path("default"), {.allow_bookmarks = false});
  ASSERT_TRUE(wait_until([&] { return rec.events().size() == 2; }));
  api().put("pods", make_pod("z"));
  ASSERT_TRUE(wait_until([&] { return rec.events().size() == 3; }));
  const auto events = rec.events();
  EXPECT_EQ(name_of(events[0].object), "x");
  EXPECT_EQ(name_of(events[1].object), "y");
  EXPECT_EQ(name_of(events[2].object), "z");
  for (const auto& e : events)
    EXPECT_EQ(e.type, WatchEvent::Type::kAdded);
}

TEST_F(WatchTest, BookmarkCarriesTheLatestResourceVersion) {
  api().set_bookmark_interval(std::chrono::milliseconds(20));
  const std::string start = std::to_string(api().resource_version());
  Recorder rec(client(), pod_path("default"), {.resource_version = start});
  // Changes to other types move the global resourceVersion; the pods watch
  // learns about it only through bookmarks.
  const json node = api().put("nodes", make_node("n1"));
  ASSERT_TRUE(wait_until([&] {
    for (const auto& e : rec.events()) {
      if (e.type == WatchEvent::Type::kBookmark && rv_of(e.object) == rv_of(node)) return true;
    }
    return false;
  }));
  const auto events = rec.events();
  EXPECT_EQ(rec.count(WatchEvent::Type::kBookmark), events.size());
  EXPECT_EQ(events.back().object["kind"], "Pod");
}

TEST_F(WatchTest, SelectorsTurnChangesIntoAddAndDelete) {
  api().put("pods", make_pod("p"));
  Recorder rec(client(), pod_path("default"),
               {.resource_version = std::to_string(api().resource_version()),
                .label_selector = "gpu=yes",
                .allow_bookmarks = false});
  ASSERT_TRUE(wait_until([&] { return api().open_watches() == 1; }));
  ASSERT_TRUE(client().merge_patch(pod_path("default", "p"),
                                   {{"metadata", {{"labels", {{"gpu", "yes"}}}}}}));
  ASSERT_TRUE(client().merge_patch(pod_path("default", "p"),
                                   {{"metadata", {{"annotations", {{"a", "1"}}}}}}));
  ASSERT_TRUE(client().merge_patch(pod_path("default", "p"),
                                   {{"metadata", {{"labels", {{"gpu", nullptr}}}}}}));
  ASSERT_TRUE(wait_until([&] { return rec.events().size() == 3; }));
  const auto events = rec.events();
  EXPECT_EQ(events[0].type, WatchEvent::Type::kAdded);
  EXPECT_EQ(events[1].type, WatchEvent::Type::kModified);
  EXPECT_EQ(events[2].type, WatchEvent::Type::kDeleted);
}

TEST_F(WatchTest, LargeEventsSplitAcrossReadsArriveWhole) {
  Recorder rec(
      client(), pod_path("default"),
      {.resource_version = std::to_string(api().resource_version()), .allow_bookmarks = false});
  ASSERT_TRUE(wait_until([&] { return api().open_watches() == 1; }));
  json pod = make_pod("big");
  pod["metadata"]["annotations"]["blob"] = std::string(300 * 1024, 'x');
  api().put("pods", pod);
  api().put("pods", make_pod("small"));
  ASSERT_TRUE(wait_until([&] { return rec.events().size() == 2; }));
  const auto events = rec.events();
  EXPECT_EQ(events[0].object["metadata"]["annotations"]["blob"].get<std::string>().size(),
            300u * 1024);
  EXPECT_EQ(name_of(events[1].object), "small");
}

TEST_F(WatchTest, ServerTimeoutEndsTheStream) {
  auto r = client().watch(pod_path("default"),
                          {.resource_version = std::to_string(api().resource_version()),
                           .allow_bookmarks = false,
                           .timeout_seconds = 1},
                          [](const WatchEvent&) { return true; });
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, WatchEnd::kClosed);
}

TEST_F(WatchTest, StopInterruptsABlockedRead) {
  Recorder rec(
      client(), pod_path("default"),
      {.resource_version = std::to_string(api().resource_version()), .allow_bookmarks = false});
  ASSERT_TRUE(wait_until([&] { return api().open_watches() == 1; }));
  const auto t0 = std::chrono::steady_clock::now();
  rec.stop();
  ASSERT_TRUE(wait_until([&] { return rec.done(); }, std::chrono::seconds(2)));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  EXPECT_EQ(rec.end()->value(), WatchEnd::kStopped);
  // The server notices the closed stream as well.
  EXPECT_TRUE(wait_until([&] { return api().open_watches() == 0; }, std::chrono::seconds(2)));
}

TEST_F(WatchTest, CallbackCanEndTheWatch) {
  api().put("pods", make_pod("a"));
  api().put("pods", make_pod("b"));
  int seen = 0;
  auto r = client().watch(pod_path("default"), {}, [&](const WatchEvent&) { return ++seen < 1; });
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, WatchEnd::kStopped);
  EXPECT_EQ(seen, 1);
}

TEST_F(WatchTest, TooOldResourceVersionIsExpired) {
  api().put("pods", make_pod("a"));
  const std::string old = std::to_string(api().resource_version());
  api().put("pods", make_pod("b"));
  api().compact();
  auto r = client().watch(pod_path("default"), {.resource_version = old},
                          [](const WatchEvent&) { return true; });
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, WatchEnd::kExpired);
  // An HTTP 410 (a server without a watch cache answers that way) is the same.
  api().inject({.verb = "watch", .path_prefix = pod_path("default"), .status = 410});
  auto http = client().watch(pod_path("default"), {.resource_version = old},
                             [](const WatchEvent&) { return true; });
  ASSERT_TRUE(http) << http.error().message;
  EXPECT_EQ(*http, WatchEnd::kExpired);
}

TEST_F(WatchTest, ErrorsAreReported) {
  api().inject({.verb = "watch",
                .path_prefix = pod_path("default"),
                .status = 403,
                .message = "pods is forbidden"});
  auto r = client().watch(pod_path("default"), {}, [](const WatchEvent&) { return true; });
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().status, 403);
  EXPECT_THAT(r.error().message, HasSubstr("pods is forbidden"));
  auto bad = client().watch(pod_path("default"), {.field_selector = "spec.nope=1"},
                            [](const WatchEvent&) { return true; });
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().status, 400);
}

// --- reflector ----------------------------------------------------------------

// Every handler call, in order, as (type, name, resourceVersion).
struct Log {
  std::mutex mu;
  std::vector<std::tuple<char, std::string, std::string>> calls;
  ReflectorHandlers handlers() {
    auto add = [this](char t, const json& o) {
      std::lock_guard lock(mu);
      calls.emplace_back(t, name_of(o), rv_of(o));
    };
    return {.on_add = [add](const json& o) { add('A', o); },
            .on_update = [add](const json&, const json& o) { add('U', o); },
            .on_delete = [add](const json& o) { add('D', o); }};
  }
  size_t size() {
    std::lock_guard lock(mu);
    return calls.size();
  }
  // The reflector updates its store before it calls the handlers, so a
  // caller that sees the store caught up may still be ahead of the calls.
  bool reaches(size_t n) {
    return wait_until([&] { return size() >= n; });
  }
};

ReflectorOptions fast_reflector() {
  return {.page_size = 7,
          .backoff_initial = std::chrono::milliseconds(5),
          .backoff_max = std::chrono::milliseconds(50)};
}

// uid → object, for comparing a cache with the server.
std::map<std::string, json> by_uid(const std::vector<json>& objects) {
  std::map<std::string, json> out;
  for (const auto& o : objects)
    out[o["metadata"]["uid"]] = o;
  return out;
}

class ReflectorTest : public ApiFixture {
 protected:
  bool caught_up(const Reflector& r) {
    return wait_until([&] {
      return r.resource_version() == std::to_string(api().resource_version()) &&
             by_uid(r.items()) == by_uid(api().objects("pods"));
    });
  }
};

TEST_F(ReflectorTest, ListsThenFollowsChanges) {
  for (int i = 0; i < 30; ++i)
    api().put("pods", make_pod(std::string("p").append(std::to_string(i))));
  Log log;
  Reflector r(client(), core_path("pods"), fast_reflector(), log.handlers());
  EXPECT_FALSE(r.has_synced());
  r.start();
  ASSERT_TRUE(r.wait_for_sync(std::chrono::seconds(5)));
  EXPECT_EQ(r.size(), 30u);
  EXPECT_EQ(log.size(), 30u);
  EXPECT_EQ(api().requests("list"), 5u);  // pages of 7
  ASSERT_TRUE(client().patch_annotations(pod_path("default", "p3"), {{"k", "v"}}));
  ASSERT_TRUE(client().del(pod_path("default", "p4")));
  ASSERT_TRUE(client().create(pod_path("default"), make_pod("new")));
  ASSERT_TRUE(caught_up(r));
  EXPECT_EQ((*r.get("default", "p3"))["metadata"]["annotations"]["k"], "v");
  EXPECT_FALSE(r.get("default", "p4"));
  EXPECT_TRUE(r.get("default", "new"));
  ASSERT_TRUE(log.reaches(33));
  std::lock_guard lock(log.mu);
  ASSERT_EQ(log.calls.size(), 33u);
  EXPECT_EQ(std::get<0>(log.calls[30]), 'U');
  EXPECT_EQ(std::get<0>(log.calls[31]), 'D');
  EXPECT_EQ(std::get<0>(log.calls[32]), 'A');
}

TEST_F(ReflectorTest, ResumesAfterClosedStreamsWithoutLossOrDuplicates) {
  api().set_bookmark_interval(std::chrono::milliseconds(10));
  Log log;
  Reflector r(client(), pod_path("default"), fast_reflector(), log.handlers());
  r.start();
  ASSERT_TRUE(r.wait_for_sync(std::chrono::seconds(5)));
  ASSERT_TRUE(wait_until([&] { return api().open_watches() == 1; }));
  size_t changes = 0;
  for (int i = 0; i < 300; ++i) {
    const std::string name = std::string("p").append(std::to_string(i % 40));
    if (i % 7 == 6) {
      if (api().remove("pods", "default", name)) ++changes;
    } else {
      api().put("pods", make_pod(name, {{"i", std::to_string(i)}}));
      ++changes;
    }
    // Streams end mid-flow; the writes go on while the reflector reconnects.
    if (i % 20 == 19) {
      const uint64_t watches = api().requests("watch");
      api().close_watches();
      api().put("pods", make_pod("while-away", {{"i", std::to_string(i)}}));
      ++changes;
      ASSERT_TRUE(wait_until([&] { return api().requests("watch") > watches; }));
    }
  }
  ASSERT_TRUE(caught_up(r));
  const auto stats = r.stats();
  EXPECT_EQ(stats.lists, 1u);  // resumed every time, never relisted
  EXPECT_GE(stats.watches, 16u);
  EXPECT_EQ(stats.events, changes);
  // One handler call per change, each resourceVersion once.
  ASSERT_TRUE(log.reaches(changes));
  std::lock_guard lock(log.mu);
  EXPECT_EQ(log.calls.size(), changes);
  std::set<std::string> rvs;
  for (const auto& [type, name, rv] : log.calls)
    EXPECT_TRUE(rvs.insert(rv).second) << rv;
}

TEST_F(ReflectorTest, RelistsAfterCompactionAndMatchesTheServer) {
  for (const char* n : {"keep", "change", "remove"})
    api().put("pods", make_pod(n));
  Log log;
  Reflector r(client(), pod_path("default"), fast_reflector(), log.handlers());
  r.start();
  ASSERT_TRUE(r.wait_for_sync(std::chrono::seconds(5)));
  ASSERT_EQ(log.size(), 3u);
  // Watches fail for a while; meanwhile the objects change and the history
  // the reflector would resume from is compacted away.
  api().inject({.verb = "watch", .path_prefix = pod_path("default"), .status = 503, .count = -1});
  api().close_watches();
  ASSERT_TRUE(wait_until([&] { return api().requests("watch") >= 3; }));
  api().put("pods", make_pod("change", {{"v", "2"}}));
  api().remove("pods", "default", "remove");
  api().put("pods", make_pod("added"));
  api().compact();
  api().clear_faults();
  ASSERT_TRUE(caught_up(r));
  const auto stats = r.stats();
  EXPECT_EQ(stats.lists, 2u);
  EXPECT_GE(stats.expired, 1u);
  EXPECT_GE(stats.errors, 1u);
  // The relist reported the differences as events.
  ASSERT_TRUE(log.reaches(6));
  std::lock_guard lock(log.mu);
  ASSERT_EQ(log.calls.size(), 6u);
  std::set<std::pair<char, std::string>> tail;
  for (size_t i = 3; i < 6; ++i)
    tail.emplace(std::get<0>(log.calls[i]), std::get<1>(log.calls[i]));
  EXPECT_EQ(tail, (std::set<std::pair<char, std::string>>{
                      {'U', "change"}, {'D', "remove"}, {'A', "added"}}));
}

TEST_F(ReflectorTest, FieldSelectorFollowsBinding) {
  Log log;
  ReflectorOptions o = fast_reflector();
  o.field_selector = "spec.nodeName=gpu-1";
  Reflector r(client(), core_path("pods"), o, log.handlers());
  r.start();
  ASSERT_TRUE(r.wait_for_sync(std::chrono::seconds(5)));
  const json pod = api().put("pods", make_pod("p"));
  api().put("pods", make_pod("other", {}, "gpu-2"));
  ASSERT_TRUE(client().bind_pod("default", "p", pod["metadata"]["uid"], "gpu-1"));
  ASSERT_TRUE(wait_until([&] { return r.size() == 1; }));
  ASSERT_TRUE(client().del(pod_path("default", "p")));
  ASSERT_TRUE(wait_until([&] { return r.size() == 0; }));
  std::lock_guard lock(log.mu);
  ASSERT_EQ(log.calls.size(), 2u);
  EXPECT_EQ(std::get<0>(log.calls[0]), 'A');
  EXPECT_EQ(std::get<0>(log.calls[1]), 'D');
}

TEST_F(ReflectorTest, StopsPromptlyAndRetriesAFailingList) {
  api().inject({.verb = "list", .path_prefix = pod_path("default"), .status = 500, .count = 6});
  Reflector r(client(), pod_path("default"), fast_reflector());
  r.start();
  ASSERT_TRUE(r.wait_for_sync(std::chrono::seconds(5)));
  EXPECT_GE(r.stats().errors, 1u);
  ASSERT_TRUE(wait_until([&] { return api().open_watches() == 1; }));
  const auto t0 = std::chrono::steady_clock::now();
  r.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
}

}  // namespace
}  // namespace hami::k8s
