#pragma once
// Leader election on a Lease, with client-go's semantics so our replicas and
// Go ones can share a lock: the holder renews every retry_period; another
// candidate takes over only when it has seen the lease unchanged for
// leaseDurationSeconds (measured on its own clock from when it observed the
// last change, so clock skew between nodes does not matter); a leader that
// cannot renew within renew_deadline steps down. Unlike client-go, a replica
// that stepped down campaigns again instead of returning.
//
//   hami::k8s::LeaderElector elector(client, {.lease_namespace = "kube-system",
//       .lease_name = "hami-scheduler", .identity = hostname,
//       .on_started_leading = [&] { cache.enable(); },
//       .on_stopped_leading = [&] { cache.disable(); }});
//   elector.start();  ...  elector.stop();   // releases the lease if leading
//
// Callbacks run on the elector's thread and must not call stop().

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "k8s/client.hpp"
#include "k8s/lease.hpp"

namespace hami::k8s {

struct LeaderElectionConfig {
  std::string lease_namespace;
  std::string lease_name;
  std::string identity;  // unique per replica, e.g. the pod name
  std::chrono::seconds lease_duration{15};
  std::chrono::milliseconds renew_deadline{10000};  // < lease_duration
  std::chrono::milliseconds retry_period{2000};
  bool release_on_stop = true;  // hand the lease over at once on stop()
  std::function<void()> on_started_leading;
  std::function<void()> on_stopped_leading;
  std::function<void(const std::string& holder)> on_new_leader;  // any holder change seen
  // Wall clock for the times written and the expiry check; tests inject one.
  std::function<TimePoint()> now;
};

class LeaderElector {
 public:
  LeaderElector(Client& client, LeaderElectionConfig config);
  ~LeaderElector();  // stop()
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  void start();
  // Stops campaigning; a leader releases the lease (release_on_stop) and gets
  // on_stopped_leading. Idempotent.
  void stop();
  bool is_leader() const { return leader_.load(); }
  // True once this replica leads, waiting up to `max` for that unless another
  // replica is seen renewing the lease (its record changed while this one
  // watched, within the lease's duration): none holds it, or the holder has
  // not been seen renewing (a replica gone without releasing it, whose lease
  // this one takes when it runs out). False at once while another replica
  // renews it, and when stopped.
  bool await_leadership(std::chrono::milliseconds max);
  std::string holder() const;  // the holder last observed, "" when none

  // One attempt to acquire or renew, as the loop makes it: true when this
  // replica holds the lease afterwards. For tests that drive an injected clock;
  // does not run callbacks.
  bool try_acquire_or_renew();

 private:
  void run();
  void release();
  TimePoint now() const;
  // Another replica holds the lease and was seen renewing it (under mu_).
  bool held_by_live_other() const;

  Client& client_;
  LeaderElectionConfig config_;
  std::atomic<bool> leader_{false};
  std::thread thread_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  // The lease record as last observed and when (our clock) it last changed.
  std::optional<Lease> observed_;
  TimePoint observed_time_{};
  bool seen_renewed_ = false;  // the observed record changed while watched
  std::string holder_;
};

}  // namespace hami::k8s
