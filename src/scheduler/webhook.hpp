#pragma once
// The admission webhook (upstream pkg/scheduler/webhook.go, §4), for
// AdmissionReview admission.k8s.io/v1 and v1beta1, answered in the version it
// came in.
//
// Every pod it sees, on CREATE and UPDATE: the annotations that record the
// scheduler's decision (protocol::kDecisionAnnotations: hami.io/vgpu-node,
// -devices-*, bind-phase, bind-time, ...) may be set, changed or removed only
// by the users in config.decision_writers (our scheduler's and device
// plugin's accounts); anyone else is refused with the annotations named. An
// UPDATE is only checked, never changed.
//
// On CREATE, with overwriteEnv (config.overwrite_env, upstream's key), every
// container that asks for no GPU, in any pod of ours, gets
// NVIDIA_VISIBLE_DEVICES=none (replacing a value it sets), so NVIDIA's
// runtime mounts it no GPU. Otherwise only pods that name one of our
// resources are changed:
//
//  - nvidia.com/gpu: <defaultGPUNum> injected when only gpumem, -percentage or
//    gpucores is given;
//  - nvidia.com/gpucores: 100 (exclusive) when the count is given without
//    cores and with no memory or 100 %;
//  - env CUDA_TASK_PRIORITY from nvidia.com/priority, GPU_CORE_UTILIZATION_POLICY
//    when gpuCorePolicy is not "default";
//  - spec.schedulerName set to ours (unless the pod belongs to another
//    scheduler; such pods are not changed at all);
//  - spec.runtimeClassName set to config.runtime_class_name (upstream's
//    runtimeClassName) when that is set and the pod names none;
//  - spec.securityContext.seccompProfile RuntimeDefault when neither the
//    pod nor its legacy annotation names a profile (config.gpu_pod_seccomp
//    "enforce" or "default"), so no process in it can unshare a user
//    namespace; with "enforce", Unconfined (pod or container, field or
//    legacy annotation) and an added SYS_ADMIN or ALL capability refused;
//  - refused with a clear message: what the filter or the device plugin's
//    Allocate would refuse, in their words (a quantity that is malformed or
//    too large, a priority other than 0 or 1, a bad scheduling annotation),
//    gpumem-percentage or gpucores outside 0..100, a privileged container, a
//    pod with spec.nodeName already set, and (given a QuotaTracker) a pod
//    that alone asks for more gpumem or gpucores than its namespace's
//    ResourceQuota allows ("exceeding resource quota: ...", upstream's words
//    first; gpumem-percentage counts 0 here, as upstream: the GPU is not
//    chosen yet). A pod that fits the quota alone but not beside the
//    namespace's other pods is admitted and waits in filter until room frees.
//
// The changes are a JSONPatch (RFC 6902) with JSON-Pointer escaping (RFC 6901:
// "~" → "~0", "/" → "~1", so nvidia.com/gpu is ".../limits/nvidia.com~1gpu").
//
//   std::string reply = hami::scheduler::admit(body, config);   // never throws
//
// A body that is not an AdmissionReview gets an answer with allowed=false and
// the reason (uid echoed when it can be read), so the API server logs why.

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/json_limits.hpp"
#include "common/result.hpp"
#include "scheduler/config.hpp"
#include "scheduler/quota.hpp"

namespace hami::scheduler {

// The API server sends the pod being created (at most ~3 MiB, its own
// request limit) and, for updates, the old one.
inline constexpr size_t kMaxAdmissionBody = 8u << 20;
inline constexpr JsonLimits kAdmissionJsonLimits{};

// RFC 6901 escaping of one reference token.
std::string json_pointer_escape(std::string_view token);

struct AdmissionDecision {
  bool allowed = true;
  std::string message;  // why, when refused
  nlohmann::json patch = nlohmann::json::array();
};

// The decision for one pod object (the request's `object`); `ns` stands in
// for a pod without metadata.namespace (the request's namespace).
AdmissionDecision mutate_pod(const nlohmann::json& pod, const SchedulerConfig& config,
                             const QuotaTracker* quotas = nullptr, const std::string& ns = {});

// The whole exchange: AdmissionReview in, AdmissionReview out (JSON text).
std::string admit(std::string_view body, const SchedulerConfig& config,
                  const QuotaTracker* quotas = nullptr);

}  // namespace hami::scheduler
