#pragma once
// The scheduler's side of a live resize (docs/resize.md): a bound pod whose
// node has allocated it (hami.io/bind-phase success, or none where another
// scheduler bound it) and whose nvidia.com/vgpu-resize asks for something
// not yet answered is checked with
// decide_resize against the cache and the namespace's quotas, then
//
//  - accepted: the cache charges the new sizes at once (under its exclusive
//    lock, so a bind in between sees them), and one merge patch, conditional
//    on the resourceVersion the check read, rewrites
//    hami.io/vgpu-devices-allocated, signs the decision again (the device
//    plugin and the cache honour only a signature over the allocation as it
//    stands) and sets hami.io/vgpu-resize-handled to the request; a Normal
//    Event "Resized" says what changed. If the patch fails the cache gets
//    the old sizes back.
//  - refused: the request is recorded as handled, nothing else changes, and a
//    Warning Event "ResizeRefused" names the reason.
//
// A request equal to hami.io/vgpu-resize-handled is not redone, so a restart
// or a second replica that becomes leader answers only what is unanswered,
// and the cache counts a pod once (charges are keyed by its UID). To ask the
// same thing again after a refusal, remove the annotation (the mark goes with
// it) and set it again.
//
//   ResizeController resize(cache, config, client, &events, &quotas);
//   ResizeWorker worker(resize, [&](auto& ns, auto& n) { return pods.get(ns, n); }, leads);
//   pods handlers: worker.notify(pod);   on leading: worker.resync(pods.items());
//
// handle() is synchronous and the unit under test; the worker runs it off the
// watch thread, one pod at a time, from the watch's latest copy.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "k8s/client.hpp"
#include "scheduler/cache.hpp"
#include "scheduler/config.hpp"
#include "scheduler/events.hpp"
#include "scheduler/quota.hpp"

namespace hami::scheduler {

// The request last answered (accepted or refused), as its text.
inline constexpr const char* kResizeHandled = "hami.io/vgpu-resize-handled";
inline constexpr const char* kReasonResized = "Resized";

struct ResizeOutcome {
  enum class Kind {
    kNone,     // nothing asked, already answered, or not ours to answer yet
    kApplied,  // the allocation changed (or already was as asked) and is marked
    kRefused,  // marked, Event posted
    kRetry,    // the API refused the patch (conflict, outage): try again later
  };
  Kind kind = Kind::kNone;
  std::string message;
};

class ResizeController {
 public:
  // events and quotas may be null (no Events; no quota check).
  ResizeController(ClusterCache& cache, const SchedulerConfig& config, k8s::Client& client,
                   EventRecorder* events, const QuotaTracker* quotas)
      : cache_(cache), config_(config), client_(client), events_(events), quotas_(quotas) {}

  // Whether the pod (as JSON) carries a request not yet answered or a mark
  // whose request was removed: cheap, for watch callbacks.
  static bool wants(const nlohmann::json& pod);

  ResizeOutcome handle(const nlohmann::json& pod);

 private:
  ResizeOutcome refuse(const k8s::Pod& pod, const std::string& request, const std::string& why);
  // One merge patch of the pod's annotations, conditional on its resourceVersion.
  k8s::Result<nlohmann::json> patch(const k8s::Pod& pod, const nlohmann::json& annotations);

  ClusterCache& cache_;
  const SchedulerConfig& config_;
  k8s::Client& client_;
  EventRecorder* events_;
  const QuotaTracker* quotas_;
};

// Runs a ResizeController on its own thread: notify() queues a pod (by
// namespace/name) when the controller wants it; the thread takes the watch's
// latest copy through `source` and handles it while `leads()` holds. A
// kRetry is tried again after a pause, a few times; a conflict also comes
// back by itself with the watch's newer copy.
class ResizeWorker {
 public:
  using Source =
      std::function<std::optional<nlohmann::json>(const std::string& ns, const std::string& name)>;
  ResizeWorker(ResizeController& controller, Source source, std::function<bool()> leads);
  ~ResizeWorker();  // stop()
  ResizeWorker(const ResizeWorker&) = delete;
  ResizeWorker& operator=(const ResizeWorker&) = delete;

  void start();
  void stop();
  void notify(const nlohmann::json& pod);
  void resync(const std::vector<nlohmann::json>& pods);

 private:
  void run();

  ResizeController& controller_;
  Source source_;
  std::function<bool()> leads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::string, std::string>> queue_;
  std::set<std::pair<std::string, std::string>> queued_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace hami::scheduler
