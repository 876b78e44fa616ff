#include "k8s/leader_election.hpp"

#include <random>

#include "common/log.hpp"

namespace hami::k8s {
namespace {

// The part of a lease that changes when its holder acts; a change restarts the
// expiry countdown.
bool same_record(const Lease& a, const Lease& b) {
  return a.holder_identity == b.holder_identity && a.renew_time == b.renew_time &&
         a.acquire_time == b.acquire_time && a.lease_transitions == b.lease_transitions &&
         a.lease_duration_seconds == b.lease_duration_seconds;
}

}  // namespace

LeaderElector::LeaderElector(Client& client, LeaderElectionConfig config)
    : client_(client), config_(std::move(config)) {
  if (config_.renew_deadline >= config_.lease_duration) {
    // A leader still believing in its lease after others may take it over
    // would break mutual exclusion.
    config_.renew_deadline =
        std::chrono::duration_cast<std::chrono::milliseconds>(config_.lease_duration) * 2 / 3;
    log::warn("leader election %s: renew deadline must be below the lease duration; using %lld ms",
              config_.lease_name.c_str(), static_cast<long long>(config_.renew_deadline.count()));
  }
}

LeaderElector::~LeaderElector() {
  stop();
}

TimePoint LeaderElector::now() const {
  return config_.now ? config_.now() : std::chrono::system_clock::now();
}

std::string LeaderElector::holder() const {
  std::lock_guard lock(mu_);
  return holder_;
}

void LeaderElector::start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this] { run(); });
}

void LeaderElector::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool LeaderElector::try_acquire_or_renew() {
  const TimePoint t = now();
  Lease want;
  want.ns = config_.lease_namespace;
  want.name = config_.lease_name;
  want.holder_identity = config_.identity;
  want.lease_duration_seconds = static_cast<int>(config_.lease_duration.count());
  want.acquire_time = t;
  want.renew_time = t;

  auto current = get_lease(client_, config_.lease_namespace, config_.lease_name);
  if (!current && current.error().not_found()) {
    auto created = create_lease(client_, want);
    if (!created) {
      log::info("leader election %s: create: %s", config_.lease_name.c_str(),
                created.error().message.c_str());
      return false;
    }
    std::lock_guard lock(mu_);
    observed_ = *created;
    observed_time_ = t;
    holder_ = config_.identity;
    return true;
  }
  if (!current) {
    log::warn("leader election %s: %s", config_.lease_name.c_str(),
              current.error().message.c_str());
    return false;
  }

  {
    std::lock_guard lock(mu_);
    if (!observed_ || !same_record(*observed_, *current)) {
      seen_renewed_ = observed_.has_value();
      observed_ = *current;
      observed_time_ = t;
    }
    holder_ = current->holder_identity;
    const bool held_by_other =
        !current->holder_identity.empty() && current->holder_identity != config_.identity;
    const auto duration = std::chrono::seconds(current->lease_duration_seconds.value_or(0));
    if (held_by_other && observed_time_ + duration > t) return false;
  }

  Lease next = *current;
  next.lease_duration_seconds = want.lease_duration_seconds;
  next.renew_time = t;
  if (current->holder_identity != config_.identity) {
    next.holder_identity = config_.identity;
    next.acquire_time = t;
    next.lease_transitions = current->lease_transitions + 1;
  }
  auto updated = update_lease(client_, next);
  if (!updated) {
    // A conflict means another candidate wrote first; nothing to report.
    if (!updated.error().conflict()) {
      log::warn("leader election %s: %s", config_.lease_name.c_str(),
                updated.error().message.c_str());
    }
    return false;
  }
  std::lock_guard lock(mu_);
  observed_ = *updated;
  observed_time_ = t;
  holder_ = config_.identity;
  return true;
}

bool LeaderElector::held_by_live_other() const {
  return !holder_.empty() && holder_ != config_.identity && observed_ && seen_renewed_ &&
         now() - observed_time_ <
             std::chrono::seconds(observed_->lease_duration_seconds.value_or(0));
}

bool LeaderElector::await_leadership(std::chrono::milliseconds max) {
  if (leader_) return true;
  std::unique_lock lock(mu_);
  // The loop notifies cv_ after every attempt.
  cv_.wait_for(lock, max, [this] { return leader_.load() || stopping_ || held_by_live_other(); });
  return leader_.load();
}

void LeaderElector::release() {
  // On the way out: one quick try with a client of its own, not the
  // shared one's 30 s reads and retries (a pod being deleted waited ~23 s
  // here). A release that fails costs the next leader one lease duration.
  auto quick = Client::from_config(client_.config(),
                                   ClientOptions{.connect_timeout = std::chrono::seconds(2),
                                                 .request_timeout = std::chrono::seconds(2),
                                                 .max_attempts = 1});
  Client& client = quick ? *quick : client_;
  auto current = get_lease(client, config_.lease_namespace, config_.lease_name);
  if (!current) {
    log::warn("leader election %s: release: %s; the lease expires on its own",
              config_.lease_name.c_str(), current.error().message.c_str());
    return;
  }
  if (current->holder_identity != config_.identity) return;
  Lease next = *current;
  const TimePoint t = now();
  next.holder_identity.clear();
  next.lease_duration_seconds = 1;
  next.renew_time = t;
  next.acquire_time = t;
  if (auto r = update_lease(client, next); !r) {
    log::warn("leader election %s: release: %s; the lease expires on its own",
              config_.lease_name.c_str(), r.error().message.c_str());
  }
}

void LeaderElector::run() {
  std::mt19937 rng{std::random_device{}()};
  std::uniform_real_distribution<double> jitter(1.0, 1.2);
  auto last_renew = std::chrono::steady_clock::now();
  std::string last_holder;
  for (;;) {
    const bool held = try_acquire_or_renew();
    const auto steady_now = std::chrono::steady_clock::now();
    if (held) {
      last_renew = steady_now;
      if (!leader_.exchange(true)) {
        log::info("leader election %s: %s is now the leader", config_.lease_name.c_str(),
                  config_.identity.c_str());
        if (config_.on_started_leading) config_.on_started_leading();
      }
    } else if (leader_ &&
               (holder() != config_.identity || steady_now - last_renew > config_.renew_deadline)) {
      // Someone else holds the lease, or we could not renew in time: either
      // way another replica may be leading by now.
      leader_ = false;
      log::warn("leader election %s: lost the lease (holder \"%s\"); stepping down",
                config_.lease_name.c_str(), holder().c_str());
      if (config_.on_stopped_leading) config_.on_stopped_leading();
    }
    {
      std::lock_guard lock(mu_);  // so a waiter in await_leadership cannot miss it
    }
    cv_.notify_all();
    if (const std::string h = holder(); h != last_holder) {
      last_holder = h;
      if (config_.on_new_leader) config_.on_new_leader(h);
    }

    // Candidates wait a little longer than the leader, so they do not all hit
    // the server in step.
    auto wait = config_.retry_period;
    if (!leader_) {
      wait = std::chrono::milliseconds(
          static_cast<int64_t>(static_cast<double>(config_.retry_period.count()) * jitter(rng)));
    }
    std::unique_lock lock(mu_);
    if (cv_.wait_for(lock, wait, [this] { return stopping_; })) break;
  }
  if (leader_) {
    if (config_.release_on_stop) release();
    leader_ = false;
    if (config_.on_stopped_leading) config_.on_stopped_leading();
  }
}

}  // namespace hami::k8s
