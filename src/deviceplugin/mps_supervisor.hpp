#pragma once
// Keeps one MPS control daemon running for each GPU the plugin shares through
// MPS: starts it (or reuses one already answering) with its pipe and log
// directories under <hook-path>/vgpu (mps::mps_pipe_dir, the directory Allocate
// mounts into MPS pods), checks it every interval, restarts it when it stops
// answering, reports the GPU down while it is, and stops every daemon when the
// plugin shuts down. Health goes out through a callback (the plugin passes
// DeviceState::set_mps_health, so kubelet sees the GPU's devices Unhealthy).
//
//   MpsSupervisor mps({.root = "/usr/local/vgpu", .gpu_uuids = {"GPU-…"}},
//                     [&](const std::string& uuid, bool up, const std::string& why) {
//                       state.set_mps_health(uuid, up, why);
//                     });
//   mps.start();   // every GPU reported down until its daemon answers
//   ...
//   mps.stop();    // quit each daemon (SIGKILL after stop_timeout)

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "mps/control_daemon.hpp"

namespace hami::deviceplugin {

struct MpsSupervisorOptions {
  std::filesystem::path root;            // <hook-path>/vgpu: daemons in <root>/mps/<uuid>
  std::vector<std::string> gpu_uuids;    // the GPUs in MPS mode
  std::filesystem::path control_binary;  // empty: nvidia-cuda-mps-control from PATH
  std::chrono::milliseconds check_interval{std::chrono::seconds(5)};
  std::chrono::milliseconds start_timeout{std::chrono::seconds(15)};
  std::chrono::milliseconds stop_timeout{std::chrono::seconds(10)};
  // A daemon that fails to start is tried again after 1 s, doubling up to this.
  std::chrono::milliseconds max_backoff{std::chrono::seconds(60)};
};

// up == false comes with the reason (for the log and Allocate's refusal).
using MpsHealthFn =
    std::function<void(const std::string& uuid, bool up, const std::string& reason)>;

class MpsSupervisor {
 public:
  MpsSupervisor(MpsSupervisorOptions options, MpsHealthFn health);
  ~MpsSupervisor();  // stop()
  MpsSupervisor(const MpsSupervisor&) = delete;
  MpsSupervisor& operator=(const MpsSupervisor&) = delete;

  // Reports every GPU down ("starting"), then checks and starts on a thread of
  // its own, the first pass at once.
  void start();
  // Ends the thread, then stops every daemon. Idempotent.
  void stop();
  // One pass on the caller's thread (the thread's loop body; tests call it
  // without start()): each daemon that does not answer is (re)started.
  void check_once();
  // How many times a daemon was started after it had been up (for the log).
  int restarts(const std::string& uuid) const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    std::string uuid;
    mps::ControlDaemon daemon;
    bool up = false;
    bool ever_up = false;
    int restarts = 0;
    Clock::time_point next_try{};
    std::chrono::milliseconds backoff{1000};
  };
  void check(Entry& e);

  MpsSupervisorOptions options_;
  MpsHealthFn health_;
  std::vector<std::unique_ptr<Entry>> entries_;
  mutable std::mutex mu_;  // entries' counters, read by restarts()
  std::condition_variable_any wake_;
  std::jthread thread_;
  bool stopped_ = false;
};

}  // namespace hami::deviceplugin
