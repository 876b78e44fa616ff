#pragma once
// The scheduler's settings that the extender, the webhook and bind share:
// resource names and defaults (upstream's device config `nvidia:` block),
// policy defaults (flags), the scheduler name and node-lock timeout.
//
//   hami::scheduler::SchedulerConfig cfg;              // upstream's defaults
//   auto r = hami::scheduler::apply_device_config_file(cfg, "/device-config.yaml");
//   if (!r) die(r.error().message);

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "fit/options.hpp"
#include "fit/resources.hpp"
#include "protocol/container_contract.hpp"
#include "protocol/decision.hpp"

namespace hami::scheduler {

struct SchedulerConfig {
  fit::ResourceConfig resources;
  std::string priority_name = protocol::kResourcePriority;
  int32_t default_gpu_num = 1;              // injected when only mem/cores are given
  std::string gpu_core_policy = "default";  // default | force | disable
  // Upstream's runtimeClassName: the webhook sets it as spec.runtimeClassName
  // of a GPU pod that names none ("" = leave pods alone).
  std::string runtime_class_name;
  // Upstream's overwriteEnv: the webhook gives every container that asks for
  // no GPU NVIDIA_VISIBLE_DEVICES=none, so a runtime that exposes GPUs by
  // that variable shows it none.
  bool overwrite_env = false;
  fit::PolicyDefaults policy;  // --node-scheduler-policy, --gpu-scheduler-policy
  std::string scheduler_name = "hami-scheduler";
  bool force_overwrite_default_scheduler = true;
  std::chrono::seconds node_lock_timeout{300};
  // How long bind waits for another pod's node lock (released once kubelet
  // has allocated that pod) before failing; below the extender httpTimeout.
  std::chrono::milliseconds node_lock_wait{2000};
  // The longest a bind may take from arrival to answer, waits for a worker
  // and for node locks included: well below kube-scheduler's extender
  // httpTimeout (--extender-http-timeout), so that a bind that cannot be
  // done in time answers "no" and kube-scheduler retries the pod, instead
  // of kube-scheduler giving up while the bind goes on and then finding
  // the pod "already bound".
  std::chrono::milliseconds bind_deadline{10000};
  // Whether bind may place a pod on another node its filter found fitting
  // when kube-scheduler's choice no longer fits or is locked (--bind-redirect).
  bool bind_redirect = true;
  // --legacy-metrics (upstream's flag): also export upstream's old metric names.
  bool legacy_metrics = false;
  // Signs bind's decisions (--decision-key-file) and says which pods' the
  // cache counts (--trusted-schedulers).
  protocol::DecisionTrust decisions;
  // Users (AdmissionReview userInfo.username) the webhook lets set, change or
  // remove the decision annotations (--decision-writers): our scheduler's and
  // device plugin's accounts. Nobody else may, on create or update.
  std::vector<std::string> decision_writers;
  // What the webhook does about a GPU pod's seccomp profile (--gpu-pod-seccomp):
  // enforce: RuntimeDefault where the pod sets none; Unconfined, and
  //          capabilities that lift the profile (SYS_ADMIN, ALL), refused;
  // default: RuntimeDefault where the pod sets none, nothing refused;
  // off:     nothing.
  std::string gpu_pod_seccomp = "enforce";
};

// The bind deadline for kube-scheduler's extender httpTimeout: a third of
// it, at most 10 s (and at least 1 ms).
std::chrono::milliseconds bind_deadline_for(std::chrono::milliseconds http_timeout);

// Reads upstream's device config YAML (its `nvidia:` block: resourceCountName,
// resourceMemoryName, resourceMemoryPercentageName, resourceCoreName,
// resourcePriorityName, defaultMemory, defaultCores, defaultGPUNum,
// memoryFactor, gpuCorePolicy, runtimeClassName, overwriteEnv). Keys match case-insensitively;
// other keys are ignored (the device plugin reads them). Errors name the key.
Result<void> apply_device_config_text(SchedulerConfig& cfg, const std::string& text,
                                      const std::string& source);
Result<void> apply_device_config_file(SchedulerConfig& cfg, const std::string& path);

}  // namespace hami::scheduler
