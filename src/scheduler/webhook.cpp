#include "scheduler/webhook.hpp"

#include <algorithm>
#include <cctype>

#include "fit/quantity.hpp"
#include "fit/resources.hpp"
#include "k8s/base64.hpp"
#include "k8s/objects.hpp"
#include "protocol/container_contract.hpp"
#include "protocol/decision.hpp"
#include "scheduler/pod_request.hpp"

namespace hami::scheduler {
namespace {

using nlohmann::json;

const json* member(const json& o, const char* key) {
  if (!o.is_object()) return nullptr;
  auto it = o.find(key);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

// The limit or request of `name`, limits first (as the fitting reads it).
const json* resource(const json& container, const std::string& name) {
  const json* res = member(container, "resources");
  if (res == nullptr) return nullptr;
  for (const char* part : {"limits", "requests"}) {
    const json* m = member(*res, part);
    if (m != nullptr) {
      if (const json* v = member(*m, name.c_str())) return v;
    }
  }
  return nullptr;
}

std::string quantity_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  return v.dump();
}

std::optional<std::string_view> find(const k8s::StringMap& m, std::string_view name) {
  auto it = m.find(std::string(name));
  if (it == m.end()) return std::nullopt;
  return std::string_view(it->second);
}

// What the filter (pod_request) or the device plugin's Allocate
// (task_priority) would refuse, in their words; "" if neither would. The pod
// is checked as it will be after the patch, with the default count added.
std::string refused_downstream(k8s::Pod pod, const SchedulerConfig& config) {
  const auto& rc = config.resources;
  auto ours = [&](const k8s::Container& c) {
    for (const std::string* n :
         {&rc.count_name, &rc.memory_name, &rc.memory_percentage_name, &rc.cores_name}) {
      if (c.limits.count(*n) || c.requests.count(*n)) return true;
    }
    return false;
  };
  for (auto* list : {&pod.init_containers, &pod.containers}) {
    for (k8s::Container& c : *list) {
      if (!ours(c)) continue;
      if (!c.limits.count(rc.count_name) && !c.requests.count(rc.count_name) &&
          config.default_gpu_num > 0) {
        c.limits[rc.count_name] = std::to_string(config.default_gpu_num);
      }
      auto limits = [&](std::string_view n) { return find(c.limits, n); };
      auto requests = [&](std::string_view n) { return find(c.requests, n); };
      auto prio = fit::task_priority(limits, requests, config.priority_name);
      if (!prio) return "container " + c.name + ": " + prio.error().message;
    }
  }
  auto r = pod_request(pod, config);
  if (!r) return r.error().message;
  return "";
}

struct ContainerEdit {
  std::string path;  // "/spec/containers/0"
  const json* container;
  bool ours = false;
};

const json* annotations_of(const json& object) {
  const json* md = member(object, "metadata");
  const json* an = md ? member(*md, "annotations") : nullptr;
  return an != nullptr && an->is_object() ? an : nullptr;
}

// The decision annotations whose value differs between `old_pod` (nullptr on
// create) and `pod`: set, changed or removed.
std::vector<std::string> decision_changes(const json* old_pod, const json& pod) {
  const json* before = old_pod ? annotations_of(*old_pod) : nullptr;
  const json* after = annotations_of(pod);
  std::vector<std::string> out;
  for (const char* key : protocol::kDecisionAnnotations) {
    const json* a = before ? member(*before, key) : nullptr;
    const json* b = after ? member(*after, key) : nullptr;
    if ((a == nullptr) != (b == nullptr) || (a != nullptr && *a != *b)) out.emplace_back(key);
  }
  return out;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names)
    out += (out.empty() ? "" : ", ") + n;
  return out;
}

// Only the scheduler decides (docs/security.md): the annotations that record
// its decision are the scheduler's and the device plugin's to write. Refused,
// not stripped: a pod created with them was copied from a placed pod or
// forged, and its author learns which and what to remove; an update cannot be
// stripped at all.
std::string decision_guard(const json* old_pod, const json& pod, const std::string& user,
                           const SchedulerConfig& config) {
  const std::vector<std::string> changed = decision_changes(old_pod, pod);
  if (changed.empty()) return "";
  const auto& w = config.decision_writers;
  if (!user.empty() && std::find(w.begin(), w.end(), user) != w.end()) return "";
  const std::string who = user.empty() ? "an unnamed user" : "user " + user;
  if (old_pod == nullptr) {
    return "pod carries " + joined(changed) +
           ": these annotations record where the HAMi scheduler placed a pod and which GPUs it "
           "gave it, and only the scheduler and the device plugin may write them; remove them "
           "(a manifest copied from a running pod has them)";
  }
  return who + " may not set, change or remove " + joined(changed) +
         ": only the HAMi scheduler and device plugin write them (--decision-writers)";
}

bool unconfined(const json* security_context) {
  const json* sp = security_context ? member(*security_context, "seccompProfile") : nullptr;
  const json* type = sp ? member(*sp, "type") : nullptr;
  return type != nullptr && type->is_string() && type->get<std::string>() == "Unconfined";
}

// Capabilities under which the runtime's default profile lets a container
// unshare, mount and set namespaces (containerd's and Docker's profiles
// allow them to CAP_SYS_ADMIN): with them the profile stops nothing.
std::string profile_lifting_capability(const json& container) {
  const json* sc = member(container, "securityContext");
  const json* caps = sc ? member(*sc, "capabilities") : nullptr;
  const json* add = caps ? member(*caps, "add") : nullptr;
  if (add == nullptr || !add->is_array()) return "";
  for (const json& c : *add) {
    if (!c.is_string()) continue;
    std::string name = c.get<std::string>();
    for (char& ch : name)
      ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    if (name.rfind("CAP_", 0) == 0) name.erase(0, 4);
    if (name == "SYS_ADMIN" || name == "ALL") return c.get<std::string>();
  }
  return "";
}

// What NVIDIA's container runtime reads to choose the GPUs it mounts.
constexpr const char* kEnvVisibleDevices = protocol::kEnvNvidiaVisible;

constexpr const char* kLegacyPodSeccomp = "seccomp.security.alpha.kubernetes.io/pod";
constexpr const char* kLegacyContainerSeccomp = "container.seccomp.security.alpha.kubernetes.io/";

// A user namespace takes the library out of the container (mount over
// /etc/ld.so.preload or the limits file inside it); the runtime's default
// seccomp profile refuses unshare(CLONE_NEWUSER) to a process without
// CAP_SYS_ADMIN. So a GPU pod runs under it unless it names a profile of its
// own, and (enforce) may not turn it off. The refusal, or "" with the patch
// extended.
std::string seccomp(const json& pod, const json* spec, const std::vector<ContainerEdit>& edits,
                    const std::string& mode, json& patch) {
  if (mode == "off") return "";
  const json* an = annotations_of(pod);
  const json* pod_sc = spec ? member(*spec, "securityContext") : nullptr;
  const json* legacy_pod = an ? member(*an, kLegacyPodSeccomp) : nullptr;
  if (mode == "enforce") {
    const char* turn_on =
        "; GPU pods run under the container runtime's default profile "
        "(RuntimeDefault) or a Localhost profile of the cluster's";
    if (unconfined(pod_sc) ||
        (legacy_pod && legacy_pod->is_string() && legacy_pod->get<std::string>() == "unconfined")) {
      return std::string(
                 "pod asks for seccomp profile Unconfined, which lets its processes "
                 "create user namespaces and mount over the GPU limits") +
             turn_on;
    }
    for (const ContainerEdit& c : edits) {
      const json* n = member(*c.container, "name");
      const std::string name = n && n->is_string() ? n->get<std::string>() : "?";
      const std::string legacy_key = kLegacyContainerSeccomp + name;
      const json* legacy = an ? member(*an, legacy_key.c_str()) : nullptr;
      if (unconfined(member(*c.container, "securityContext")) ||
          (legacy && legacy->is_string() && legacy->get<std::string>() == "unconfined")) {
        return "container " + name +
               " asks for seccomp profile Unconfined, which lets its processes create user "
               "namespaces and mount over the GPU limits" +
               turn_on;
      }
      if (std::string cap = profile_lifting_capability(*c.container); !cap.empty()) {
        return "container " + name + " adds capability " + cap +
               ", under which the seccomp profile lets it mount over the GPU limits; a GPU "
               "container may not have it";
      }
    }
  }
  const bool pod_has_profile =
      (pod_sc != nullptr && member(*pod_sc, "seccompProfile") != nullptr) || legacy_pod != nullptr;
  if (pod_has_profile) return "";
  const json profile = {{"type", "RuntimeDefault"}};
  if (pod_sc == nullptr) {
    patch.push_back({{"op", "add"},
                     {"path", "/spec/securityContext"},
                     {"value", {{"seccompProfile", profile}}}});
  } else {
    patch.push_back(
        {{"op", "add"}, {"path", "/spec/securityContext/seccompProfile"}, {"value", profile}});
  }
  return "";
}

}  // namespace

// Adds `name: value` to the container's limits, creating resources (or
// resources/limits) when absent; afterwards the limits exist.
static void add_limit(json& patch, const ContainerEdit& c, bool& has_resources, bool& has_limits,
                      const std::string& name, const std::string& value) {
  if (!has_resources) {
    patch.push_back(
        {{"op", "add"}, {"path", c.path + "/resources"}, {"value", {{"limits", {{name, value}}}}}});
  } else if (!has_limits) {
    patch.push_back(
        {{"op", "add"}, {"path", c.path + "/resources/limits"}, {"value", {{name, value}}}});
  } else {
    patch.push_back({{"op", "add"},
                     {"path", c.path + "/resources/limits/" + json_pointer_escape(name)},
                     {"value", value}});
  }
  has_resources = has_limits = true;
}

// Sets each variable in the container's env: replaces an entry of that
// name, else appends (creating env when the container has none).
static void set_env(json& patch, const ContainerEdit& c,
                    const std::vector<std::pair<std::string, std::string>>& env) {
  const json* existing = member(*c.container, "env");
  bool have_env = existing != nullptr && existing->is_array();
  for (const auto& [k, v] : env) {
    int replace_at = -1;
    if (existing != nullptr) {
      for (size_t i = 0; i < existing->size(); ++i) {
        const json* n = member((*existing)[i], "name");
        if (n && n->is_string() && n->get<std::string>() == k) replace_at = static_cast<int>(i);
      }
    }
    const json var = {{"name", k}, {"value", v}};
    if (replace_at >= 0) {
      patch.push_back({{"op", "replace"},
                       {"path", c.path + "/env/" + std::to_string(replace_at)},
                       {"value", var}});
    } else if (have_env) {
      patch.push_back({{"op", "add"}, {"path", c.path + "/env/-"}, {"value", var}});
    } else {
      patch.push_back({{"op", "add"}, {"path", c.path + "/env"}, {"value", json::array({var})}});
      have_env = true;
      existing = nullptr;  // later variables append to the array just created
    }
  }
}

std::string json_pointer_escape(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  for (char ch : token) {
    if (ch == '~') {
      out += "~0";
    } else if (ch == '/') {
      out += "~1";
    } else {
      out += ch;
    }
  }
  return out;
}

AdmissionDecision mutate_pod(const json& pod, const SchedulerConfig& config,
                             const QuotaTracker* quotas, const std::string& ns) {
  AdmissionDecision d;
  auto deny = [&](std::string why) {
    d.allowed = false;
    d.message = std::move(why);
    d.patch = json::array();
    return d;
  };
  if (!pod.is_object()) return deny("the request's object is not a pod");
  auto typed = k8s::Pod::from_json(pod);
  if (!typed) return deny("pod: " + typed.error().message);
  if (typed->containers.empty()) return deny("pod has no containers");
  const std::string& sched = typed->scheduler_name;
  if (!sched.empty() && sched != config.scheduler_name &&
      (sched != "default-scheduler" || !config.force_overwrite_default_scheduler)) {
    return d;  // another scheduler's pod (volcano, …): not ours to change
  }
  const json* spec = member(pod, "spec");
  std::vector<ContainerEdit> edits;
  for (const char* list : {"initContainers", "containers"}) {
    const json* cs = spec ? member(*spec, list) : nullptr;
    if (cs == nullptr || !cs->is_array()) continue;
    for (size_t i = 0; i < cs->size(); ++i) {
      edits.push_back({"/spec/" + std::string(list) + "/" + std::to_string(i), &(*cs)[i]});
    }
  }
  if (!requests_our_resources(*typed, config)) {
    // overwriteEnv: no container of a pod without GPUs sees one (upstream
    // changes every pod its webhook sees, not only GPU pods).
    if (config.overwrite_env) {
      for (const ContainerEdit& c : edits)
        set_env(d.patch, c, {{kEnvVisibleDevices, "none"}});
    }
    return d;
  }
  // Admitted, such a pod would only stay Pending with no reason given.
  if (std::string why = refused_downstream(*typed, config); !why.empty()) return deny(why);

  const auto& rc = config.resources;
  for (ContainerEdit& c : edits) {
    const json& ct = *c.container;
    const json* name_j = member(ct, "name");
    const std::string name = name_j && name_j->is_string() ? name_j->get<std::string>() : "?";
    const json* count = resource(ct, rc.count_name);
    const json* mem = resource(ct, rc.memory_name);
    const json* pct = resource(ct, rc.memory_percentage_name);
    const json* cores = resource(ct, rc.cores_name);
    const json* prio = resource(ct, config.priority_name);
    if (!count && !mem && !pct && !cores) {
      if (config.overwrite_env) set_env(d.patch, c, {{kEnvVisibleDevices, "none"}});
      continue;
    }
    c.ours = true;
    // Every quantity must be a whole number; say which one is not (what the
    // filter reads was checked above; this covers what it leaves alone).
    for (auto [n, v] : {std::pair{&rc.count_name, count},
                        {&rc.memory_name, mem},
                        {&rc.memory_percentage_name, pct},
                        {&rc.cores_name, cores}}) {
      if (v == nullptr) continue;
      auto q = fit::parse_whole_quantity(quantity_text(*v));
      if (!q) return deny("container " + name + ": " + *n + ": " + q.error().message);
      if (*q < 0) return deny("container " + name + ": " + *n + " must not be negative");
    }
    int64_t pct_value = -1;
    if (pct) {
      pct_value = *fit::parse_whole_quantity(quantity_text(*pct));
      if (pct_value > 100) {
        return deny("container " + name + ": " + rc.memory_percentage_name + " is " +
                    std::to_string(pct_value) + ", must be 0..100 (percent of one GPU's memory)");
      }
    }
    if (cores) {
      const int64_t v = *fit::parse_whole_quantity(quantity_text(*cores));
      if (v > 100) {
        return deny("container " + name + ": " + rc.cores_name + " is " + std::to_string(v) +
                    ", must be 0..100 (percent of one GPU's compute; 100 = exclusive)");
      }
    }
    const json* res = member(ct, "resources");
    bool has_resources = res != nullptr;
    bool has_limits = res != nullptr && member(*res, "limits") != nullptr;
    bool has_count = count != nullptr;
    if (!has_count && config.default_gpu_num > 0) {
      add_limit(d.patch, c, has_resources, has_limits, rc.count_name,
                std::to_string(config.default_gpu_num));
      has_count = true;
    }
    if (has_count && cores == nullptr && (pct_value == 100 || (mem == nullptr && pct == nullptr))) {
      // A pod that asks for a whole GPU's memory gets it exclusively
      // (upstream defaultExclusiveCoreIfNeeded, PR #1354).
      add_limit(d.patch, c, has_resources, has_limits, rc.cores_name, "100");
    }
    std::vector<std::pair<std::string, std::string>> env;
    if (prio) env.emplace_back(protocol::kEnvPriority, quantity_text(*prio));
    if (config.gpu_core_policy != "default") {
      env.emplace_back(protocol::kEnvCorePolicy, config.gpu_core_policy);
    }
    if (!has_count && config.overwrite_env) env.emplace_back(kEnvVisibleDevices, "none");
    set_env(d.patch, c, env);
  }
  for (const ContainerEdit& c : edits) {
    const json* sc = member(*c.container, "securityContext");
    const json* priv = sc ? member(*sc, "privileged") : nullptr;
    if (priv && priv->is_boolean() && priv->get<bool>()) {
      const json* n = member(*c.container, "name");
      return deny("container " + (n && n->is_string() ? n->get<std::string>() : "?") +
                  " is privileged: a privileged container bypasses the GPU limits, so it cannot "
                  "request " +
                  rc.count_name);
    }
  }
  if (!typed->node_name.empty()) {
    return deny("pod has node " + typed->node_name + " assigned: a GPU pod must be placed by " +
                config.scheduler_name +
                ", which chooses its GPUs; remove spec.nodeName (use a nodeSelector or node "
                "affinity to pick the node)");
  }
  if (std::string why = seccomp(pod, spec, edits, config.gpu_pod_seccomp, d.patch); !why.empty())
    return deny(why);
  if (!config.runtime_class_name.empty() && !(spec && member(*spec, "runtimeClassName"))) {
    d.patch.push_back(
        {{"op", "add"}, {"path", "/spec/runtimeClassName"}, {"value", config.runtime_class_name}});
  }
  if (!config.scheduler_name.empty() && sched != config.scheduler_name) {
    d.patch.push_back(
        {{"op", sched.empty() && !(spec && member(*spec, "schedulerName")) ? "add" : "replace"},
         {"path", "/spec/schedulerName"},
         {"value", config.scheduler_name}});
  }
  if (quotas != nullptr && quotas->any()) {
    // Judged on the pod as it will be created (the GPU count injected).
    json mutated = pod;
    try {
      mutated = pod.patch(d.patch);
    } catch (const json::exception&) {
      // Our own patch always applies; if not, judge the pod as sent.
    }
    auto final_pod = k8s::Pod::from_json(mutated);
    const std::string& pod_ns = typed->meta.ns.empty() ? ns : typed->meta.ns;
    if (final_pod && !pod_ns.empty()) {
      auto req = pod_request(*final_pod, config);
      if (req && req->prepared) {
        QuotaRequest need = quota_request(req->prepared->request());
        need.mem_percent = false;
        if (std::string why = quotas->check(pod_ns, NamespaceUsage{}, need); !why.empty())
          return deny("exceeding resource quota: " + why);
      }
    }
  }
  return d;
}

std::string admit(std::string_view body, const SchedulerConfig& config,
                  const QuotaTracker* quotas) {
  std::string api_version = "admission.k8s.io/v1";
  std::string uid;
  auto answer = [&](bool allowed, const std::string& message, const json& patch) {
    json response = {{"uid", uid}, {"allowed", allowed}};
    if (!allowed) response["status"] = {{"code", 403}, {"message", message}};
    if (allowed && !patch.empty()) {
      response["patchType"] = "JSONPatch";
      response["patch"] =
          k8s::base64_encode(patch.dump(-1, ' ', false, json::error_handler_t::replace));
    }
    return json{{"apiVersion", api_version}, {"kind", "AdmissionReview"}, {"response", response}}
        .dump(-1, ' ', false, json::error_handler_t::replace);
  };
  if (body.size() > kMaxAdmissionBody) {
    return answer(false,
                  "AdmissionReview: body of " + std::to_string(body.size()) +
                      " bytes is over the limit of " + std::to_string(kMaxAdmissionBody),
                  {});
  }
  if (auto ok = check_json_limits(body, kAdmissionJsonLimits); !ok) {
    return answer(false, "AdmissionReview: " + ok.error().message, {});
  }
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return answer(false, "AdmissionReview: body is not a JSON object", {});
  }
  if (const json* v = member(j, "apiVersion"); v && v->is_string()) {
    const auto s = v->get<std::string>();
    if (s == "admission.k8s.io/v1" || s == "admission.k8s.io/v1beta1") api_version = s;
  }
  const json* req = member(j, "request");
  if (req == nullptr || !req->is_object()) {
    return answer(false, "AdmissionReview: no request", {});
  }
  if (const json* u = member(*req, "uid"); u && u->is_string()) uid = u->get<std::string>();
  std::string operation = "CREATE";
  if (const json* o = member(*req, "operation"); o && o->is_string()) {
    operation = o->get<std::string>();
  }
  if (operation != "CREATE" && operation != "UPDATE") return answer(true, "", {});
  const json* object = member(*req, "object");
  if (object == nullptr) return answer(false, "AdmissionReview: request has no object", {});
  std::string user;
  if (const json* ui = member(*req, "userInfo")) {
    if (const json* u = member(*ui, "username"); u && u->is_string()) user = u->get<std::string>();
  }
  const json* old_object = nullptr;
  if (operation == "UPDATE") {
    old_object = member(*req, "oldObject");
    if (old_object == nullptr) {
      return answer(false, "AdmissionReview: an UPDATE request has no oldObject", {});
    }
  }
  if (std::string why = decision_guard(old_object, *object, user, config); !why.empty()) {
    return answer(false, why, {});
  }
  // An update is only checked: the pod was mutated when it was created.
  if (operation == "UPDATE") return answer(true, "", {});
  std::string ns;
  if (const json* n = member(*req, "namespace"); n && n->is_string()) ns = n->get<std::string>();
  AdmissionDecision d = mutate_pod(*object, config, quotas, ns);
  return answer(d.allowed, d.message, d.patch);
}

}  // namespace hami::scheduler
