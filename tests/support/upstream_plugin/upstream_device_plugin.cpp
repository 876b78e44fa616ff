#include "support/upstream_plugin/upstream_device_plugin.hpp"

#include <chrono>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <thread>

#include "k8s/paths.hpp"

namespace hami::test {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kRegister = "hami.io/node-nvidia-register";
constexpr const char* kLock = "hami.io/mutex.lock";
constexpr const char* kToAllocate = "hami.io/vgpu-devices-to-allocate";
constexpr const char* kAssignedNode = "hami.io/vgpu-node";
constexpr const char* kBindTime = "hami.io/bind-time";
constexpr const char* kBindPhase = "hami.io/bind-phase";
constexpr const char* kResource = "nvidia.com/gpu";
// nvidia.NvidiaGPUCommonWord: what PodAllocationTrySuccess looks for in the
// to-allocate annotation to decide that devices are still pending.
constexpr const char* kCommonWord = "NVIDIA";

// Go's encoding/json string: quotes, backslash and control characters
// escaped, and (HTML-safe by default) <, >, & and U+2028/U+2029 too.
std::string go_quote(const std::string& s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    char buf[8];
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '<':
      case '>':
      case '&':
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
        break;
      default:
        if (c < 0x20) {
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else if (c == 0xe2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
                   (static_cast<unsigned char>(s[i + 2]) == 0xa8 ||
                    static_cast<unsigned char>(s[i + 2]) == 0xa9)) {
          out += static_cast<unsigned char>(s[i + 2]) == 0xa8 ? "\\u2028" : "\\u2029";
          i += 2;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::vector<std::string> go_split(const std::string& s, char sep) {
  // strings.Split: n separators give n+1 pieces, empty ones included.
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t at = s.find(sep, start);
    if (at == std::string::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, at - start));
    start = at + 1;
  }
}

std::string anno(const json& obj, const char* key) {
  const json a = obj["metadata"].value("annotations", json::object());
  return a.contains(key) && a[key].is_string() ? a[key].get<std::string>() : std::string();
}
bool has_anno(const json& obj, const char* key) {
  return obj["metadata"].value("annotations", json::object()).contains(key);
}

// DecodeContainerDevices: ':' between devices, ',' between fields, at least
// UUID,Type,Usedmem,Usedcores; empty segments skipped.
std::optional<std::vector<UpstreamDevice>> decode_container(const std::string& s,
                                                            std::string* why) {
  std::vector<UpstreamDevice> out;
  if (s.empty()) return out;
  for (const std::string& d : go_split(s, ':')) {
    if (d.empty()) continue;
    const auto f = go_split(d, ',');
    if (f.size() < 4) {
      *why = "pod annotation format error, missing fields, do not use nodeName in task spec";
      return std::nullopt;
    }
    if (f[0].empty() || f[1].empty()) {
      *why = "pod annotation format error, missing device UUID or type";
      return std::nullopt;
    }
    try {
      size_t used = 0;
      const int mem = std::stoi(f[2], &used);
      if (used != f[2].size() || mem < 0) throw std::invalid_argument(f[2]);
      const int cores = std::stoi(f[3], &used);
      if (used != f[3].size() || cores < 0) throw std::invalid_argument(f[3]);
      out.push_back({f[0], f[1], mem, cores});
    } catch (const std::exception&) {
      *why = "invalid memory or core field in '" + d + "'";
      return std::nullopt;
    }
  }
  return out;
}

// EncodePodSingleDevice.
std::string encode_pod(const std::vector<std::vector<UpstreamDevice>>& slots) {
  std::string out;
  for (const auto& c : slots) {
    for (const UpstreamDevice& d : c)
      out += d.uuid + "," + d.type + "," + std::to_string(d.mem_mib) + "," +
             std::to_string(d.cores) + ":";
    out += ";";
  }
  return out;
}

int gpu_request(const json& container) {
  const json r = container.value("resources", json::object());
  for (const char* k : {"limits", "requests"}) {
    const json m = r.value(k, json::object());
    if (m.contains(kResource)) {
      try {
        return std::stoi(m[kResource].get<std::string>());
      } catch (const std::exception&) {
        return 0;
      }
    }
  }
  return 0;
}

std::vector<json> containers_in_order(const json& pod) {
  std::vector<json> out;
  for (const char* k : {"initContainers", "containers"})
    for (const json& c : pod["spec"].value(k, json::array()))
      out.push_back(c);
  return out;
}

}  // namespace

UpstreamDevicePlugin::UpstreamDevicePlugin(k8s::Client* client, std::string node,
                                           std::vector<UpstreamGpu> gpus, UpstreamOptions options)
    : client_(client), node_(std::move(node)), gpus_(std::move(gpus)), options_(options) {}

UpstreamDevicePlugin::~UpstreamDevicePlugin() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
}

std::string UpstreamDevicePlugin::register_annotation() const {
  // json.Marshal([]*DeviceInfo) of MarshalNodeDevices' copies: fields in
  // declaration order (id, index, count, devmem, devcore, type, numa, mode,
  // migProfiles, migtemplate, health, devicevendor, custominfo), each
  // omitempty; outside MIG mode the slices and maps are nil.
  std::string out = "[";
  for (size_t i = 0; i < gpus_.size(); ++i) {
    const UpstreamGpu& g = gpus_[i];
    std::string o;
    auto field = [&](const char* key, const std::string& value) {
      o += (o.empty() ? "" : ",") + std::string("\"") + key + "\":" + value;
    };
    const std::string type =
        g.nvml_name.rfind("NVIDIA", 0) == 0 ? g.nvml_name : "NVIDIA-" + g.nvml_name;
    if (!g.uuid.empty()) field("id", go_quote(g.uuid));
    if (g.index != 0) field("index", std::to_string(g.index));
    if (options_.split_count != 0) field("count", std::to_string(options_.split_count));
    if (g.mib != 0) field("devmem", std::to_string(g.mib));
    if (options_.core_scaling != 0) field("devcore", std::to_string(100 * options_.core_scaling));
    field("type", go_quote(type));
    if (g.numa != 0) field("numa", std::to_string(g.numa));
    field("mode", go_quote("hami-core"));
    field("health", "true");
    if (options_.pair_score_field) field("devicepairscore", "{}");
    out += (i ? ",{" : "{") + o + "}";
  }
  return out + "]";
}

std::string UpstreamDevicePlugin::start() {
  // util.PatchNodeAnnotations: {"metadata":{"annotations":{...}}} as a JSON
  // merge patch, nothing else on the node touched.
  auto r =
      client_->merge_patch(k8s::node_path(node_),
                           {{"metadata", {{"annotations", {{kRegister, register_annotation()}}}}}});
  if (!r) return "register on node " + node_ + ": " + r.error().message;
  thread_ = std::jthread([this](std::stop_token st) { run(st); });
  return "";
}

std::optional<UpstreamAllocation> UpstreamDevicePlugin::allocation(const std::string& ns,
                                                                   const std::string& name) const {
  std::lock_guard lk(mu_);
  auto it = done_.find(ns + "/" + name);
  if (it == done_.end()) return std::nullopt;
  return it->second;
}

void UpstreamDevicePlugin::run(std::stop_token st) {
  // kubelet's side: every pod bound here that asks for nvidia.com/gpu is
  // admitted once, and admission calls Allocate.
  while (!st.stop_requested()) {
    auto pods = client_->list(k8s::core_path("pods"), {.field_selector = "spec.nodeName=" + node_});
    if (pods) {
      for (const json& p : pods->items) {
        if (st.stop_requested()) return;
        const std::string uid = p["metadata"].value("uid", "");
        if (p["metadata"].contains("deletionTimestamp")) continue;
        {
          std::lock_guard lk(mu_);
          if (!seen_.insert(uid).second) continue;
        }
        bool wants_gpu = false;
        for (const json& c : containers_in_order(p))
          wants_gpu = wants_gpu || gpu_request(c) > 0;
        if (wants_gpu) allocate(p);
      }
    }
    std::this_thread::sleep_for(50ms);
  }
}

// util.GetPendingPod: the pod the node lock names; without a lock naming
// one, the first Pending pod here with a bind time, bind-phase allocating
// or success and hami.io/vgpu-node = this node.
std::optional<json> UpstreamDevicePlugin::pending_pod(std::string* why) {
  auto node = client_->get(k8s::node_path(node_));
  if (!node) {
    *why = node.error().message;
    return std::nullopt;
  }
  if (has_anno(*node, kLock)) {
    const auto parts = go_split(anno(*node, kLock), ',');
    if (parts.size() != 1 && parts.size() != 3) {
      *why = "malformed lock annotation: expected 3 parts, got " + std::to_string(parts.size());
      return std::nullopt;
    }
    if (parts.size() == 3 && !parts[1].empty() && !parts[2].empty()) {
      auto pod = client_->get(k8s::pod_path(parts[1], parts[2]));
      if (!pod) {
        *why = pod.error().message;
        return std::nullopt;
      }
      return *pod;
    }
  }
  auto pods = client_->list(k8s::core_path("pods"), {.field_selector = "spec.nodeName=" + node_});
  if (!pods) {
    *why = pods.error().message;
    return std::nullopt;
  }
  for (const json& p : pods->items) {
    if (p.value("status", json::object()).value("phase", "") != "Pending") continue;
    if (!has_anno(p, kBindTime) || !has_anno(p, kBindPhase)) continue;
    const std::string phase = anno(p, kBindPhase);
    if (phase != "allocating" && phase != "success") continue;
    if (has_anno(p, kAssignedNode) && anno(p, kAssignedNode) == node_) return p;
  }
  *why = "no binding pod found on node " + node_;
  return std::nullopt;
}

void UpstreamDevicePlugin::allocate(const json& trigger) {
  std::string why;
  auto pod = pending_pod(&why);
  if (!pod) {
    // Allocate returns the error to kubelet; no pod to mark.
    UpstreamAllocation a;
    a.ns = trigger["metadata"].value("namespace", "");
    a.name = trigger["metadata"].value("name", "");
    a.uid = trigger["metadata"].value("uid", "");
    a.error = why;
    std::lock_guard lk(mu_);
    done_[a.ns + "/" + a.name] = std::move(a);
    return;
  }
  UpstreamAllocation a;
  a.ns = (*pod)["metadata"].value("namespace", "");
  a.name = (*pod)["metadata"].value("name", "");
  a.uid = (*pod)["metadata"].value("uid", "");
  a.to_allocate = anno(*pod, kToAllocate);
  if (!has_anno(*pod, kToAllocate)) {
    a.error = "device request not found";
    return finish(std::move(a), false);
  }
  // DecodePodDevices: ';' between containers, every piece kept (the one
  // after the final ';' too), so slots stay positional.
  for (const std::string& c : go_split(a.to_allocate, ';')) {
    auto devs = decode_container(c, &why);
    if (!devs) {
      a.error = why;
      return finish(std::move(a), false);
    }
    a.slots.push_back(std::move(*devs));
  }
  std::set<std::string> registered;
  for (const UpstreamGpu& g : gpus_)
    registered.insert(g.uuid);
  // One ContainerRequest per container asking for nvidia.com/gpu, in
  // kubelet's order (init containers first): popNextContainerDevices.
  auto slots = a.slots;
  const auto containers = containers_in_order(*pod);
  const size_t n_init = (*pod)["spec"].value("initContainers", json::array()).size();
  for (const json& c : containers) {
    const int want = gpu_request(c);
    if (want == 0) continue;
    size_t i = 0;
    while (i < slots.size() && slots[i].empty())
      ++i;
    if (i == slots.size()) {
      a.error = "no pending device allocation found";
      return finish(std::move(a), false);
    }
    if (i >= containers.size()) {
      a.error = "container index " + std::to_string(i) +
                " out of range (init=" + std::to_string(n_init) +
                ", regular=" + std::to_string(containers.size() - n_init) + ")";
      return finish(std::move(a), false);
    }
    std::vector<UpstreamDevice> devs = std::move(slots[i]);
    slots[i].clear();
    if (static_cast<int>(devs.size()) < want) {
      a.error = "device number not matched";
      return finish(std::move(a), false);
    }
    // Upstream hands these UUIDs to the container runtime, which fails the
    // container start on a GPU this node lacks; the double fails here, so
    // the test sees it in the pod.
    for (const UpstreamDevice& d : devs)
      if (!registered.count(d.uuid)) {
        a.error = "unknown device: " + d.uuid;
        return finish(std::move(a), false);
      }
    a.served.emplace_back(containers[i].value("name", ""), std::move(devs));
  }
  // patchErasedAnnotation, then PodAllocationTrySuccess.
  auto erased =
      client_->merge_patch(k8s::pod_path(a.ns, a.name),
                           {{"metadata", {{"annotations", {{kToAllocate, encode_pod(slots)}}}}}});
  if (!erased) {
    a.error = "erase allocated containers annotation: " + erased.error().message;
    return finish(std::move(a), false);
  }
  finish(std::move(a), true);
}

void UpstreamDevicePlugin::finish(UpstreamAllocation a, bool ok) {
  const std::string path = k8s::pod_path(a.ns, a.name);
  bool release = true;
  if (ok) {
    // PodAllocationTrySuccess: read the pod again; success only once no
    // device of any vendor is left to allocate.
    auto refreshed = client_->get(path);
    if (!refreshed) {
      a.error = "get pod: " + refreshed.error().message;
      release = false;  // upstream returns here, lock kept
    } else if (anno(*refreshed, kToAllocate).find(kCommonWord) != std::string::npos) {
      release = false;  // more containers to come
    } else {
      a.phase = "success";
    }
  } else {
    a.phase = "failed";
  }
  if (!a.phase.empty()) {
    // util.PatchPodAnnotations (a JSON merge patch).
    auto r = client_->merge_patch(path, {{"metadata", {{"annotations", {{kBindPhase, a.phase}}}}}});
    if (!r) {
      a.error +=
          (a.error.empty() ? "" : "; ") + std::string("patch bind-phase: ") + r.error().message;
    }
  }
  if (release) release_node_lock(a.ns, a.name);
  std::lock_guard lk(mu_);
  done_[a.ns + "/" + a.name] = std::move(a);
}

// nodelock.ReleaseNodeLock(node, lock, pod, false): only a lock naming this
// pod; deleted by a merge patch carrying the node's resourceVersion, retried
// with retry.OnError's backoff (5 steps from 100 ms, factor 2, jitter 0.5).
void UpstreamDevicePlugin::release_node_lock(const std::string& ns, const std::string& name) {
  const std::string owner = "," + ns + "," + name;
  auto ends_with_owner = [&](const std::string& v) {
    return v.size() >= owner.size() && v.compare(v.size() - owner.size(), owner.size(), owner) == 0;
  };
  auto node = client_->get(k8s::node_path(node_));
  if (!node || !has_anno(*node, kLock)) return;
  if (!ends_with_owner(anno(*node, kLock))) return;
  std::mt19937 rng(std::random_device{}());
  auto pause = 100ms;
  for (int step = 0; step < 5; ++step) {
    if (step > 0) {
      std::uniform_real_distribution<double> jitter(1.0, 1.5);
      std::this_thread::sleep_for(
          std::chrono::duration_cast<std::chrono::milliseconds>(pause * jitter(rng)));
      pause *= 2;
    }
    auto current = client_->get(k8s::node_path(node_));
    if (!current) continue;
    if (!has_anno(*current, kLock) || !ends_with_owner(anno(*current, kLock))) return;
    const json patch = {
        {"metadata",
         {{"annotations", {{kLock, nullptr}}},
          {"resourceVersion", (*current)["metadata"].value("resourceVersion", "")}}}};
    if (client_->merge_patch(k8s::node_path(node_), patch)) return;
  }
}

}  // namespace hami::test
