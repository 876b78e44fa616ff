#include "deviceplugin/mps_supervisor.hpp"

#include <algorithm>
#include <utility>

#include "common/log.hpp"
#include "mps/paths.hpp"

namespace hami::deviceplugin {

MpsSupervisor::MpsSupervisor(MpsSupervisorOptions options, MpsHealthFn health)
    : options_(std::move(options)), health_(std::move(health)) {
  for (const std::string& uuid : options_.gpu_uuids) {
    mps::DaemonOptions d;
    d.control_binary = options_.control_binary;
    d.binary_setting = "the nvidia-cuda-mps-control binary in the plugin's PATH";
    d.pipe_dir = mps::mps_pipe_dir(options_.root, uuid);
    d.log_dir = mps::mps_log_dir(options_.root, uuid);
    d.gpu_uuid = uuid;
    d.start_timeout = options_.start_timeout;
    d.stop_timeout = options_.stop_timeout;
    entries_.push_back(std::make_unique<Entry>(Entry{uuid, mps::ControlDaemon(std::move(d))}));
  }
}

MpsSupervisor::~MpsSupervisor() {
  stop();
}

void MpsSupervisor::start() {
  if (entries_.empty()) return;
  for (const auto& e : entries_)
    health_(e->uuid, false, "MPS control daemon not started yet");
  thread_ = std::jthread([this](std::stop_token st) {
    while (!st.stop_requested()) {
      check_once();
      std::unique_lock lk(mu_);
      wake_.wait_for(lk, st, options_.check_interval, [] { return false; });
    }
  });
}

void MpsSupervisor::stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
  if (stopped_) return;
  stopped_ = true;
  for (const auto& e : entries_) {
    const auto pid = e->daemon.pid();
    if (auto r = e->daemon.stop(); !r) {
      log::error("stopping the MPS control daemon of GPU %s: %s", e->uuid.c_str(),
                 r.error().message.c_str());
    } else if (pid) {
      log::info("stopped the MPS control daemon of GPU %s (pid %d)", e->uuid.c_str(), *pid);
    }
  }
}

void MpsSupervisor::check_once() {
  for (const auto& e : entries_)
    check(*e);
}

int MpsSupervisor::restarts(const std::string& uuid) const {
  std::lock_guard lk(mu_);
  for (const auto& e : entries_)
    if (e->uuid == uuid) return e->restarts;
  return 0;
}

void MpsSupervisor::check(Entry& e) {
  if (Clock::now() < e.next_try) return;
  auto answers = e.daemon.check();
  if (answers) {
    if (!e.up) {
      // Found answering without our start: a daemon left by an earlier run.
      e.up = e.ever_up = true;
      health_(e.uuid, true, {});
    }
    return;
  }
  if (e.up) {
    log::error(
        "the MPS control daemon of GPU %s stopped answering (%s); its GPU is unhealthy "
        "until it runs again; restarting it",
        e.uuid.c_str(), answers.error().message.c_str());
    e.up = false;
    health_(e.uuid, false, "MPS control daemon not answering: " + answers.error().message);
  }
  auto started = e.daemon.start();
  if (!started) {
    const std::string why = "MPS control daemon cannot start: " + started.error().message;
    log::error("GPU %s is unhealthy: %s; trying again in %lld ms", e.uuid.c_str(), why.c_str(),
               static_cast<long long>(e.backoff.count()));
    health_(e.uuid, false, why);
    e.next_try = Clock::now() + e.backoff;
    e.backoff = std::min(e.backoff * 2, options_.max_backoff);
    return;
  }
  const auto pid = e.daemon.pid();
  {
    std::lock_guard lk(mu_);
    if (e.ever_up) ++e.restarts;
  }
  log::info("%s the MPS control daemon of GPU %s (pid %d, pipe directory %s)",
            *started == mps::Started::reused ? "reusing" : (e.ever_up ? "restarted" : "started"),
            e.uuid.c_str(), pid ? *pid : -1, e.daemon.options().pipe_dir.c_str());
  e.up = e.ever_up = true;
  e.backoff = std::chrono::milliseconds(1000);
  health_(e.uuid, true, {});
}

}  // namespace hami::deviceplugin
