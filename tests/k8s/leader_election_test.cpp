// Leases and leader election against the test API server: the Lease wire
// format, one leader among candidates, takeover after the lease expires (with
// an injected clock and with real threads), release on stop, and stepping
// down when renewals fail.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>

#include "fixture.hpp"
#include "k8s/leader_election.hpp"
#include "k8s/lease.hpp"

namespace hami::k8s {
namespace {

using nlohmann::json;
using test::ApiFixture;
using test::wait_until;
using namespace std::chrono_literals;

class LeaderElectionTest : public ApiFixture {
 protected:
  LeaderElectionConfig config(const std::string& id) {
    return {.lease_namespace = "kube-system",
            .lease_name = "hami-scheduler",
            .identity = id,
            .lease_duration = 1s,
            .renew_deadline = 500ms,
            .retry_period = 50ms};
  }
  std::optional<json> lease() { return api().get("leases", "kube-system", "hami-scheduler"); }
  static Lease held(const std::string& name, const std::string& holder, int seconds, TimePoint at) {
    return Lease{.ns = "kube-system",
                 .name = name,
                 .holder_identity = holder,
                 .lease_duration_seconds = seconds,
                 .acquire_time = at,
                 .renew_time = at};
  }
};

TEST_F(LeaderElectionTest, LeaseRoundTrip) {
  const Lease l = held("x", "me", 15, TimePoint(std::chrono::seconds(1700000000)) + 123456us);
  auto created = create_lease(client(), l);
  ASSERT_TRUE(created) << created.error().message;
  const json stored = *api().get("leases", "kube-system", "x");
  EXPECT_EQ(stored["spec"]["renewTime"], "2023-11-14T22:13:20.123456Z");
  EXPECT_EQ(stored["spec"]["leaseDurationSeconds"], 15);
  EXPECT_EQ(stored["spec"]["leaseTransitions"], 0);
  auto got = get_lease(client(), "kube-system", "x");
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(got->holder_identity, "me");
  EXPECT_EQ(got->renew_time, l.renew_time);
  // A field we do not model survives an update; a stale version conflicts.
  json raw = stored;
  raw["spec"]["preferredHolder"] = "you";
  api().put("leases", raw);
  got = get_lease(client(), "kube-system", "x");
  Lease stale = *got;
  got->lease_transitions = 4;
  auto updated = update_lease(client(), *got);
  ASSERT_TRUE(updated) << updated.error().message;
  EXPECT_EQ(updated->raw["spec"]["preferredHolder"], "you");
  EXPECT_EQ(updated->lease_transitions, 4);
  auto conflict = update_lease(client(), stale);
  ASSERT_FALSE(conflict);
  EXPECT_TRUE(conflict.error().conflict());
}

TEST_F(LeaderElectionTest, InjectedClockTakeover) {
  TimePoint now = TimePoint(std::chrono::seconds(1700000000));
  auto clock = [&now] { return now; };
  auto a_cfg = config("a");
  a_cfg.lease_duration = 10s;
  a_cfg.now = clock;
  auto b_cfg = a_cfg;
  b_cfg.identity = "b";
  LeaderElector a(client(), a_cfg);
  LeaderElector b(client(), b_cfg);

  EXPECT_TRUE(a.try_acquire_or_renew());
  EXPECT_FALSE(b.try_acquire_or_renew());
  EXPECT_EQ(b.holder(), "a");
  now += 9s;
  EXPECT_TRUE(a.try_acquire_or_renew());
  // b's countdown restarts when b sees the renewal (its own clock, as in client-go).
  EXPECT_FALSE(b.try_acquire_or_renew());
  now += 9s;
  EXPECT_FALSE(b.try_acquire_or_renew());
  now += 2s;  // 11 s since b saw the last renewal
  EXPECT_TRUE(b.try_acquire_or_renew());
  const json l = *lease();
  EXPECT_EQ(l["spec"]["holderIdentity"], "b");
  EXPECT_EQ(l["spec"]["leaseTransitions"], 1);
  EXPECT_EQ(l["spec"]["leaseDurationSeconds"], 10);
  // MicroTime: six fraction digits, UTC (std::regex trips GCC 12 warnings under ASan).
  const std::string renew = l["spec"]["renewTime"];
  EXPECT_EQ(renew.size(), 27u) << renew;
  EXPECT_EQ(renew.substr(19, 1), ".") << renew;
  EXPECT_EQ(renew.back(), 'Z') << renew;
  EXPECT_TRUE(parse_time(renew)) << renew;
  EXPECT_EQ(l["spec"]["acquireTime"], l["spec"]["renewTime"]);
  // The old leader's next renewal finds b holding a fresh lease.
  EXPECT_FALSE(a.try_acquire_or_renew());
  EXPECT_EQ(a.holder(), "b");
}

TEST_F(LeaderElectionTest, ExactlyOneLeadsAndTheOtherTakesOver) {
  std::atomic<int> a_started{0}, a_stopped{0};
  auto a_cfg = config("a");
  // Long enough that a loaded machine does not make a miss its renewals.
  a_cfg.lease_duration = 2s;
  a_cfg.renew_deadline = 1500ms;
  a_cfg.release_on_stop = false;  // a crash: nobody hands the lease over
  a_cfg.on_started_leading = [&] { ++a_started; };
  a_cfg.on_stopped_leading = [&] { ++a_stopped; };
  LeaderElector a(client(), a_cfg);
  auto b_cfg = a_cfg;
  b_cfg.identity = "b";
  b_cfg.release_on_stop = true;
  b_cfg.on_started_leading = nullptr;
  b_cfg.on_stopped_leading = nullptr;
  LeaderElector b(client(), b_cfg);
  a.start();
  ASSERT_TRUE(wait_until([&] { return a.is_leader(); }));
  b.start();
  // Both campaign for a while: b never leads while a renews.
  const auto until = std::chrono::steady_clock::now() + 400ms;
  while (std::chrono::steady_clock::now() < until) {
    ASSERT_TRUE(a.is_leader());
    ASSERT_FALSE(b.is_leader());
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(b.holder(), "a");
  const auto stopped_at = std::chrono::steady_clock::now();
  a.stop();
  EXPECT_EQ(a_stopped.load(), 1);
  ASSERT_TRUE(wait_until([&] { return b.is_leader(); }, 5s));
  // Not before the lease ran out (2 s, less the up to 60 ms b saw of it).
  EXPECT_GE(std::chrono::steady_clock::now() - stopped_at, 1900ms);
  EXPECT_EQ((*lease())["spec"]["holderIdentity"], "b");
  EXPECT_EQ((*lease())["spec"]["leaseTransitions"], 1);
  EXPECT_EQ(a_started.load(), 1);
}

// A replica started while the lease is still held by one gone without
// releasing it (a reinstall, a killed pod) waits in await_leadership until
// the lease runs out and it leads; one beside a leader that renews is told
// no as soon as it has seen a renewal.
TEST_F(LeaderElectionTest, AwaitLeadershipWaitsOutAGoneHolderButNotALiveOne) {
  ASSERT_TRUE(
      create_lease(client(), held("hami-scheduler", "gone", 1, std::chrono::system_clock::now())));
  LeaderElector b(client(), config("b"));
  b.start();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(b.await_leadership(5s));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 900ms);  // the lease ran out first
  EXPECT_EQ(b.holder(), "b");

  auto live_cfg = config("c");
  live_cfg.lease_duration = 2s;
  live_cfg.renew_deadline = 1500ms;
  LeaderElector c(client(), live_cfg);
  b.stop();  // released: c takes it at once
  c.start();
  ASSERT_TRUE(wait_until([&] { return c.is_leader(); }));
  auto d_cfg = live_cfg;
  d_cfg.identity = "d";
  LeaderElector d(client(), d_cfg);
  d.start();
  const auto t1 = std::chrono::steady_clock::now();
  EXPECT_FALSE(d.await_leadership(5s));
  // Told within a few of c's renewals, not after the 5 s.
  EXPECT_LT(std::chrono::steady_clock::now() - t1, 2s);
  d.stop();
  EXPECT_FALSE(d.await_leadership(5s));  // stopped: at once
}

TEST_F(LeaderElectionTest, ReleaseOnStopHandsOverAtOnce) {
  auto a_cfg = config("a");
  a_cfg.lease_duration = 30s;
  a_cfg.renew_deadline = 20s;
  auto b_cfg = a_cfg;
  b_cfg.identity = "b";
  LeaderElector a(client(), a_cfg);
  LeaderElector b(client(), b_cfg);
  a.start();
  ASSERT_TRUE(wait_until([&] { return a.is_leader(); }));
  b.start();
  ASSERT_TRUE(wait_until([&] { return b.holder() == "a"; }));
  a.stop();
  EXPECT_EQ((*lease())["spec"].value("holderIdentity", ""), "");
  // Far sooner than the 30 s lease.
  ASSERT_TRUE(wait_until([&] { return b.is_leader(); }, 3s));
}

// A replica being stopped (its pod deleted) does not wait out the client's
// 30 s reads and retries to release the lease: one quick try, then the
// lease expires on its own.
TEST_F(LeaderElectionTest, ReleaseOnStopGivesUpQuicklyWhenTheServerStalls) {
  auto cfg = config("a");
  cfg.lease_duration = 30s;
  cfg.renew_deadline = 20s;
  LeaderElector a(client(), cfg);
  a.start();
  ASSERT_TRUE(wait_until([&] { return a.is_leader(); }));
  api().inject({.path_prefix = lease_path("kube-system"), .status = 0, .count = -1, .delay = 5s});
  const auto t0 = std::chrono::steady_clock::now();
  a.stop();
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(took, 4s) << "stop() waited "
                      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                      << " ms on a stalled API server";
  EXPECT_FALSE(a.is_leader());
}

TEST_F(LeaderElectionTest, StepsDownWhenRenewalsFail) {
  std::atomic<int> started{0}, stopped{0};
  auto cfg = config("a");
  cfg.on_started_leading = [&] { ++started; };
  cfg.on_stopped_leading = [&] { ++stopped; };
  LeaderElector a(client(), cfg);
  a.start();
  ASSERT_TRUE(wait_until([&] { return a.is_leader(); }));
  api().inject({.path_prefix = lease_path("kube-system"), .status = 500, .count = -1});
  const auto failing_since = std::chrono::steady_clock::now();
  ASSERT_TRUE(wait_until([&] { return !a.is_leader(); }, 5s));
  // The renew deadline (500 ms) plus a retry and the request retries, with
  // room for a loaded machine.
  EXPECT_LT(std::chrono::steady_clock::now() - failing_since, 2500ms);
  // The elector stops claiming leadership before it calls back, so the
  // callback may still be running when is_leader() turns false.
  ASSERT_TRUE(wait_until([&] { return stopped.load() == 1; }, 2s));
  api().clear_faults();
  ASSERT_TRUE(wait_until([&] { return a.is_leader(); }, 5s));
  ASSERT_TRUE(wait_until([&] { return started.load() == 2; }, 2s));
}

}  // namespace
}  // namespace hami::k8s
