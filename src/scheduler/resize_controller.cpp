#include "scheduler/resize_controller.hpp"

#include <chrono>
#include <map>

#include "common/log.hpp"
#include "k8s/paths.hpp"
#include "protocol/annotations.hpp"
#include "protocol/decision.hpp"
#include "protocol/device_codec.hpp"
#include "scheduler/feed.hpp"
#include "scheduler/pod_request.hpp"
#include "scheduler/resize.hpp"

namespace hami::scheduler {
namespace {

using k8s::string_annotation;
using nlohmann::json;
using Kind = ResizeOutcome::Kind;

std::string who(const k8s::Pod& pod) {
  return pod.meta.ns + "/" + pod.meta.name;
}

// Container names by allocation position: init containers first, unless the
// allocation leaves them out (upstream v2.10 schedulers, as Allocate reads it).
std::vector<std::string> container_names(const k8s::Pod& pod, size_t entries) {
  std::vector<std::string> out;
  if (pod.init_containers.empty() || entries != pod.containers.size()) {
    for (const k8s::Container& c : pod.init_containers)
      out.push_back(c.name);
  }
  for (const k8s::Container& c : pod.containers)
    out.push_back(c.name);
  return out;
}

// "main GPU-a 4000->8000 MiB 30->60 %", for the Event and the log.
std::string changes(const fit::PodDevices& before, const fit::PodDevices& after,
                    const std::vector<std::string>& names) {
  std::string out;
  for (size_t c = 0; c < before.size() && c < after.size(); ++c) {
    for (size_t i = 0; i < before[c].size() && i < after[c].size(); ++i) {
      const fit::ContainerDevice& a = before[c][i];
      const fit::ContainerDevice& b = after[c][i];
      if (a == b) continue;
      out += out.empty() ? "" : "; ";
      out += (c < names.size() ? names[c] : "#" + std::to_string(c)) + " " + a.uuid + " " +
             std::to_string(a.mem_mib) + "->" + std::to_string(b.mem_mib) + " MiB, " +
             std::to_string(a.cores) + "->" + std::to_string(b.cores) + " %";
    }
  }
  return out;
}

}  // namespace

bool ResizeController::wants(const json& pod) {
  const std::string* request = string_annotation(pod, kResizeAnnotation);
  const std::string* handled = string_annotation(pod, kResizeHandled);
  if (request == nullptr) return handled != nullptr;
  return handled == nullptr || *handled != *request;
}

k8s::Result<json> ResizeController::patch(const k8s::Pod& pod, const json& annotations) {
  json body = {
      {"metadata", {{"resourceVersion", pod.meta.resource_version}, {"annotations", annotations}}}};
  return client_.merge_patch(k8s::pod_path(pod.meta.ns, pod.meta.name), body);
}

ResizeOutcome ResizeController::refuse(const k8s::Pod& pod, const std::string& request,
                                       const std::string& why) {
  std::string message = why.rfind(kReasonResize, 0) == 0 ? why : kReasonResize + (": " + why);
  if (auto r = patch(pod, {{kResizeHandled, request}}); !r) {
    return {Kind::kRetry, "pod " + who(pod) + ": cannot record the refused resize (" + message +
                              "): " + r.error().message};
  }
  log::warn("pod %s: resize '%s' refused: %s; nothing changed", who(pod).c_str(),
            request.substr(0, 256).c_str(), message.c_str());
  if (events_ != nullptr) {
    events_->record({pod.meta.ns, pod.meta.name, pod.meta.uid}, EventType::kWarning, kReasonResize,
                    message);
  }
  return {Kind::kRefused, std::move(message)};
}

ResizeOutcome ResizeController::handle(const json& json_pod) {
  if (!wants(json_pod)) return {};
  auto parsed = k8s::Pod::from_json(json_pod);
  if (!parsed) return {Kind::kNone, "not a pod: " + parsed.error().message};
  const k8s::Pod& pod = *parsed;
  if (pod.phase == "Succeeded" || pod.phase == "Failed") return {Kind::kNone, "the pod ended"};
  const auto& an = pod.meta.annotations;
  auto req = an.find(kResizeAnnotation);
  if (req == an.end()) {
    // The request was removed: so goes its mark, and the same request can be
    // asked again.
    if (auto r = patch(pod, {{kResizeHandled, nullptr}}); !r)
      return {Kind::kRetry,
              "pod " + who(pod) + ": cannot clear " + kResizeHandled + ": " + r.error().message};
    return {};
  }
  const std::string& request = req->second;
  // Answered once the pod is bound and its node has allocated it: until
  // then the device plugin matches hami.io/vgpu-devices-to-allocate against
  // the allocation, entry for entry. Each step brings the pod back here.
  if (pod.node_name.empty()) return {Kind::kNone, "the pod is not bound yet"};
  if (auto phase = an.find(protocol::kBindPhase);
      phase != an.end() && phase->second != protocol::kPhaseSuccess) {
    if (phase->second != protocol::kPhaseFailed)
      return {Kind::kNone, "the pod's GPUs are being allocated"};
    return refuse(pod, request, "the node could not allocate the pod's GPUs");
  }
  auto targets = parse_resize(request);
  if (!targets)
    return refuse(pod, request, std::string(kResizeAnnotation) + " " + targets.error().message);
  std::string distrusted;
  auto charge = pod_charge(pod, config_.decisions, &distrusted);
  if (!charge) return refuse(pod, request, charge.error().message);
  if (!distrusted.empty()) return refuse(pod, request, distrusted);
  if (!*charge) return refuse(pod, request, "the pod holds no GPUs the scheduler gave it");
  auto allocation = protocol::decode_pod_devices(an.at(protocol::kDevicesAllocated));
  if (!allocation) return refuse(pod, request, allocation.error().message);
  const std::vector<std::string> names = container_names(pod, allocation->size());

  fit::PodOptions options;
  options.user = (*charge)->charges.empty() ? fit::kUserUndeclared : (*charge)->charges[0].user;
  if (auto r = pod_request(pod, config_); r && r->prepared) options = r->prepared->options();

  // Checked, and the new sizes charged, under the cache's exclusive lock:
  // a bind fitting on this node meanwhile sees either the old or the new.
  const PodCharge old = **charge;
  std::string encoded;
  std::string signature;
  ResizeDecision d;
  std::string failed;
  cache_.with_exclusive([&](ClusterCache& c) {
    // What the feed counts for the pod, set again in case this copy of the
    // pod is newer than the last the feed saw (a replace, never a second charge).
    c.set_pod_unlocked(pod.meta.uid, old);
    const fit::NodeDevices* node = c.node_unlocked(old.node);
    if (node == nullptr) {
      failed = "its node " + old.node + " has no registered GPUs";
      return;
    }
    ResizeQuota quota;
    quota.ns = pod.meta.ns;
    quota.used = c.ns_usage(pod.meta.ns);
    if (quotas_ != nullptr && quotas_->any()) {
      quota.check = [&](const std::string& ns, const NamespaceUsage& used, int64_t mem,
                        int64_t cores) {
        return quotas_->check(ns, used, QuotaRequest{.mem_mib = mem, .cores = cores});
      };
    }
    d = decide_resize({*node, *allocation, names, *targets, options}, quota);
    if (!d.refusal.empty() || !d.changed) return;
    auto text = protocol::encode_pod_devices(d.devices);
    if (!text) {
      failed = text.error().message;
      return;
    }
    encoded = std::move(*text);
    k8s::Pod resized = pod;
    resized.meta.annotations[protocol::kDevicesAllocated] = encoded;
    if (config_.decisions.keys) {
      signature = config_.decisions.keys->sign(protocol::decision_of(resized));
      resized.meta.annotations[protocol::kDecisionSignature] = signature;
    }
    auto next = pod_charge(resized, config_.decisions);
    if (!next || !*next) {
      failed = "the resized decision would not be honoured";
      return;
    }
    c.set_pod_unlocked(pod.meta.uid, std::move(**next));
  });
  if (!failed.empty()) return refuse(pod, request, failed);
  if (!d.refusal.empty()) return refuse(pod, request, d.refusal);

  json changes_json = {{kResizeHandled, request}};
  if (d.changed) {
    changes_json[protocol::kDevicesAllocated] = encoded;
    if (!signature.empty()) changes_json[protocol::kDecisionSignature] = signature;
  }
  if (auto r = patch(pod, changes_json); !r) {
    // Not written: the cache goes back to what the pod holds, unless the
    // watch has replaced the entry since.
    if (d.changed) {
      cache_.with_exclusive([&](ClusterCache& c) {
        const PodCharge* now = c.pod_unlocked(pod.meta.uid);
        if (now != nullptr && now->charges != old.charges) c.set_pod_unlocked(pod.meta.uid, old);
        return 0;
      });
    }
    return {Kind::kRetry,
            "pod " + who(pod) + ": cannot write the resized allocation: " + r.error().message};
  }
  if (!d.changed) return {Kind::kApplied, "the pod already has the sizes asked for"};
  const std::string what = changes(*allocation, d.devices, names);
  log::info("pod %s resized on %s: %s", who(pod).c_str(), old.node.c_str(), what.c_str());
  if (events_ != nullptr) {
    events_->record({pod.meta.ns, pod.meta.name, pod.meta.uid}, EventType::kNormal, kReasonResized,
                    "resized: " + what);
  }
  return {Kind::kApplied, what};
}

ResizeWorker::ResizeWorker(ResizeController& controller, Source source, std::function<bool()> leads)
    : controller_(controller), source_(std::move(source)), leads_(std::move(leads)) {}

ResizeWorker::~ResizeWorker() {
  stop();
}

void ResizeWorker::start() {
  std::lock_guard lk(mu_);
  if (thread_.joinable() || stop_) return;
  thread_ = std::thread([this] { run(); });
}

void ResizeWorker::stop() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ResizeWorker::notify(const json& pod) {
  if (!ResizeController::wants(pod)) return;
  const json& md = pod.value("metadata", json::object());
  auto key = std::make_pair(md.value("namespace", ""), md.value("name", ""));
  {
    std::lock_guard lk(mu_);
    if (!queued_.insert(key).second) return;
    queue_.push_back(std::move(key));
  }
  cv_.notify_all();
}

void ResizeWorker::resync(const std::vector<json>& pods) {
  for (const json& p : pods)
    notify(p);
}

void ResizeWorker::run() {
  constexpr int kAttempts = 5;
  std::map<std::pair<std::string, std::string>, int> failures;
  std::unique_lock lk(mu_);
  while (true) {
    cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    auto key = std::move(queue_.front());
    queue_.pop_front();
    queued_.erase(key);
    lk.unlock();
    ResizeOutcome out;
    if (leads_()) {
      if (std::optional<json> pod = source_(key.first, key.second)) out = controller_.handle(*pod);
    }
    lk.lock();
    if (out.kind != ResizeOutcome::Kind::kRetry) {
      failures.erase(key);
      continue;
    }
    const int n = ++failures[key];
    if (n >= kAttempts) {
      log::error("%s; gave up after %d tries, the pod's next change tries again",
                 out.message.c_str(), n);
      failures.erase(key);
      continue;
    }
    log::warn("%s; trying again", out.message.c_str());
    // Backs off, still stoppable; the watch's newer copy may queue it first.
    cv_.wait_for(lk, std::chrono::milliseconds(200) * (1 << n), [&] { return stop_; });
    if (stop_) return;
    if (queued_.insert(key).second) queue_.push_back(std::move(key));
  }
}

}  // namespace hami::scheduler
