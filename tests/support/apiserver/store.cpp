#include "support/apiserver/store.hpp"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <random>

#include "k8s/base64.hpp"
#include "k8s/time.hpp"

namespace hami::test {
namespace {

using nlohmann::json;

std::string str_at(const json& obj, const char* a, const char* b) {
  if (!obj.is_object() || !obj.contains(a) || !obj[a].is_object()) return {};
  const json& inner = obj[a];
  if (!inner.contains(b) || !inner[b].is_string()) return {};
  return inner[b].get<std::string>();
}

std::string key_of(const std::string& ns, const std::string& name) {
  return ns + "/" + name;
}
std::string key_of(const json& obj) {
  return key_of(str_at(obj, "metadata", "namespace"), str_at(obj, "metadata", "name"));
}

std::string new_uid() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const uint64_t a = rng(), b = rng();
  char buf[40];
  std::snprintf(buf, sizeof buf, "%08x-%04x-4%03x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xFFFF), static_cast<unsigned>(a & 0xFFF),
                static_cast<unsigned>(0x8000 | ((b >> 48) & 0x3FFF)),
                static_cast<unsigned long long>(b & 0xFFFFFFFFFFFFULL));
  return buf;
}

StatusError not_found(const ResourceType& t, const std::string& name) {
  return {404, "NotFound", t.plural + " \"" + name + "\" not found"};
}
StatusError conflict(const ResourceType& t, const std::string& name) {
  return {409, "Conflict",
          "Operation cannot be fulfilled on " + t.plural + " \"" + name +
              "\": the object has been modified; please apply your changes to the latest "
              "version and try again"};
}
StatusError bad_request(const std::string& msg) {
  return {400, "BadRequest", msg};
}
// The real server's object-meta validation: a write that would change the
// UID is refused as invalid (so a client can pin a patch to one object).
std::optional<StatusError> changes_uid(const ResourceType& t, const std::string& name,
                                       const json& written, const json& stored) {
  const std::string uid = str_at(written, "metadata", "uid");
  if (uid.empty() || uid == str_at(stored, "metadata", "uid")) return std::nullopt;
  return StatusError{422, "Invalid",
                     t.kind + " \"" + name + "\" is invalid: metadata.uid: Invalid value: \"" +
                         uid + "\": field is immutable"};
}

// Equal apart from the resourceVersion: an update that changes nothing is not
// a change (the real server does not bump the version either).
bool same_content(json a, json b) {
  if (a.contains("metadata") && a["metadata"].is_object()) a["metadata"].erase("resourceVersion");
  if (b.contains("metadata") && b["metadata"].is_object()) b["metadata"].erase("resourceVersion");
  return a == b;
}

}  // namespace

json StatusError::to_json() const {
  return {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
          {"status", "Failure"}, {"message", message}, {"reason", reason},
          {"code", code}};
}

void Store::record(const ResourceType& t, ChangeType c, const json& object, json previous) {
  history_.push_back({rv_, &t, c, object, std::move(previous)});
  while (history_.size() > history_limit_) {
    compacted_ = history_.front().rv;
    history_.pop_front();
  }
  cv_.notify_all();
}

StoreResult<json> Store::create(const ResourceType& t, const std::string& ns, json obj) {
  if (!obj.is_object()) return bad_request("the body is not a JSON object");
  json& meta = obj["metadata"];
  if (!meta.is_object()) return bad_request("metadata: not an object");
  if (t.namespaced) {
    const std::string obj_ns = str_at(obj, "metadata", "namespace");
    if (!obj_ns.empty() && obj_ns != ns) {
      return bad_request(
          "the namespace of the provided object does not match the namespace sent on the "
          "request");
    }
    meta["namespace"] = ns;
  } else {
    meta.erase("namespace");
  }
  std::string name = str_at(obj, "metadata", "name");
  if (name.empty()) {
    const std::string prefix = str_at(obj, "metadata", "generateName");
    if (prefix.empty()) return bad_request("metadata.name or metadata.generateName is required");
    name = prefix + new_uid().substr(0, 5);
    meta["name"] = name;
  }
  obj["apiVersion"] = t.api_version();
  obj["kind"] = t.kind;
  std::lock_guard lock(mu_);
  Objects& objs = objects_[&t];
  const std::string key = key_of(ns, name);
  if (objs.count(key))
    return StatusError{409, "AlreadyExists", t.plural + " \"" + name + "\" already exists"};
  meta["uid"] = new_uid();
  meta["creationTimestamp"] = k8s::format_time(std::chrono::system_clock::now());
  meta.erase("deletionTimestamp");
  if (t.plural == "pods") {
    // Defaults the real server applies that our daemons look at.
    if (!obj["spec"].is_object()) obj["spec"] = json::object();
    if (!obj["spec"].contains("schedulerName")) obj["spec"]["schedulerName"] = "default-scheduler";
    if (!obj["status"].is_object()) obj["status"] = json::object();
    if (!obj["status"].contains("phase")) obj["status"]["phase"] = "Pending";
  }
  meta["resourceVersion"] = std::to_string(bump());
  objs[key] = obj;
  record(t, ChangeType::kAdded, obj, nullptr);
  return obj;
}

StoreResult<json> Store::get(const ResourceType& t, const std::string& ns,
                             const std::string& name) const {
  std::lock_guard lock(mu_);
  const auto type = objects_.find(&t);
  if (type == objects_.end()) return not_found(t, name);
  const auto it = type->second.find(key_of(ns, name));
  if (it == type->second.end()) return not_found(t, name);
  return it->second;
}

Store::Objects Store::state_at(const ResourceType& t, uint64_t rv) const {
  Objects state;
  if (const auto type = objects_.find(&t); type != objects_.end()) state = type->second;
  for (auto it = history_.rbegin(); it != history_.rend() && it->rv > rv; ++it) {
    if (it->type != &t) continue;
    const std::string key = key_of(it->object);
    if (it->change == ChangeType::kAdded) {
      state.erase(key);
    } else {
      state[key] = it->previous;
    }
  }
  return state;
}

StoreResult<Store::Page> Store::list(const ResourceType& t, const std::string& ns,
                                     const std::function<bool(const json&)>& filter, int64_t limit,
                                     const std::string& continue_token) const {
  std::lock_guard lock(mu_);
  Page page;
  page.rv = rv_;
  std::string start;  // list keys after this one
  if (!continue_token.empty()) {
    const auto raw = k8s::base64_decode(continue_token);
    const json c = raw ? json::parse(*raw, nullptr, false) : json();
    if (!c.is_object() || !c.contains("rv") || !c["rv"].is_number_unsigned() ||
        !c.contains("start") || !c["start"].is_string()) {
      return bad_request("continue key is not valid");
    }
    page.rv = c["rv"].get<uint64_t>();
    start = c["start"].get<std::string>();
    if (page.rv < compacted_) {
      return StatusError{410, "Expired",
                         "The provided continue parameter is too old to display a consistent "
                         "list result. You can start a new list without the continue "
                         "parameter."};
    }
  }
  const Objects state = state_at(t, page.rv);
  const std::string prefix = ns.empty() ? "" : ns + "/";
  for (auto it = start.empty() ? state.begin() : state.upper_bound(start); it != state.end();
       ++it) {
    if (!prefix.empty() && it->first.compare(0, prefix.size(), prefix) != 0) continue;
    if (filter && !filter(it->second)) continue;
    if (limit > 0 && static_cast<int64_t>(page.items.size()) == limit) {
      const json c = {{"rv", page.rv}, {"start", key_of(page.items.back())}};
      page.continue_token = k8s::base64_encode(c.dump());
      break;
    }
    page.items.push_back(it->second);
  }
  return page;
}

StoreResult<json> Store::replace(const ResourceType& t, const std::string& key, json next) {
  Objects& objs = objects_[&t];
  const json& old = objs.at(key);
  // What the client may not change.
  for (const char* field : {"name", "namespace", "uid", "creationTimestamp"}) {
    if (old["metadata"].contains(field)) {
      next["metadata"][field] = old["metadata"][field];
    } else {
      next["metadata"].erase(field);
    }
  }
  next["apiVersion"] = t.api_version();
  next["kind"] = t.kind;
  next["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"];
  if (same_content(old, next)) return old;
  json previous = old;
  next["metadata"]["resourceVersion"] = std::to_string(bump());
  objs[key] = next;
  record(t, ChangeType::kModified, next, std::move(previous));
  return next;
}

StoreResult<json> Store::update(const ResourceType& t, const std::string& ns,
                                const std::string& name, json obj, bool status_only) {
  if (!obj.is_object() || !obj["metadata"].is_object()) {
    return bad_request("the body is not an object with metadata");
  }
  const std::string body_name = str_at(obj, "metadata", "name");
  if (!body_name.empty() && body_name != name) {
    return bad_request("the name of the object (" + body_name +
                       ") does not match the name on the URL (" + name + ")");
  }
  std::lock_guard lock(mu_);
  Objects& objs = objects_[&t];
  const std::string key = key_of(ns, name);
  const auto it = objs.find(key);
  if (it == objs.end()) return not_found(t, name);
  const std::string want_rv = str_at(obj, "metadata", "resourceVersion");
  if (!want_rv.empty() && want_rv != str_at(it->second, "metadata", "resourceVersion")) {
    return conflict(t, name);
  }
  if (auto bad = changes_uid(t, name, obj, it->second)) return *bad;
  json next;
  if (status_only) {
    next = it->second;
    next["status"] = obj.contains("status") ? obj["status"] : json();
  } else {
    next = std::move(obj);
    if (t.status_subresource) {
      if (it->second.contains("status")) {
        next["status"] = it->second["status"];
      } else {
        next.erase("status");
      }
    }
  }
  return replace(t, key, std::move(next));
}

StoreResult<json> Store::patch(const ResourceType& t, const std::string& ns,
                               const std::string& name, const json& patch, bool status_only) {
  std::lock_guard lock(mu_);
  Objects& objs = objects_[&t];
  const std::string key = key_of(ns, name);
  const auto it = objs.find(key);
  if (it == objs.end()) return not_found(t, name);
  json next = it->second;
  if (patch.is_array()) {
    try {
      next = next.patch(patch);
    } catch (const json::exception& e) {
      return StatusError{422, "Invalid", std::string("the JSON patch does not apply: ") + e.what()};
    }
  } else if (patch.is_object()) {
    const std::string want_rv = str_at(patch, "metadata", "resourceVersion");
    if (!want_rv.empty() && want_rv != str_at(it->second, "metadata", "resourceVersion")) {
      return conflict(t, name);
    }
    if (auto bad = changes_uid(t, name, patch, it->second)) return *bad;
    next.merge_patch(patch);
  } else {
    return bad_request("the patch is neither a JSON object nor a JSON patch array");
  }
  if (!next.is_object() || !next["metadata"].is_object()) {
    return StatusError{422, "Invalid", "the patched object has no metadata"};
  }
  if (status_only) {
    json only = it->second;
    only["status"] = next.contains("status") ? next["status"] : json();
    next = std::move(only);
  } else if (t.status_subresource) {
    if (it->second.contains("status")) {
      next["status"] = it->second["status"];
    } else {
      next.erase("status");
    }
  }
  return replace(t, key, std::move(next));
}

StoreResult<json> Store::remove(const ResourceType& t, const std::string& ns,
                                const std::string& name, const json& pre) {
  std::lock_guard lock(mu_);
  Objects& objs = objects_[&t];
  const auto it = objs.find(key_of(ns, name));
  if (it == objs.end()) return not_found(t, name);
  if (pre.is_object()) {
    const std::string uid = pre.value("uid", "");
    const std::string rv = pre.value("resourceVersion", "");
    if ((!uid.empty() && uid != str_at(it->second, "metadata", "uid")) ||
        (!rv.empty() && rv != str_at(it->second, "metadata", "resourceVersion"))) {
      return StatusError{409, "Conflict",
                         "Precondition failed: the object's uid or resourceVersion differs"};
    }
  }
  json last = it->second;
  objs.erase(it);
  last["metadata"]["resourceVersion"] = std::to_string(bump());
  record(t, ChangeType::kDeleted, last, last);
  return last;
}

StoreResult<json> Store::bind(const std::string& ns, const std::string& name, const json& binding) {
  const ResourceType& pods = *find_resource("pods");
  const std::string node =
      binding.is_object() && binding.contains("target") ? binding["target"].value("name", "") : "";
  if (node.empty()) return bad_request("Binding: target.name is required");
  std::lock_guard lock(mu_);
  Objects& objs = objects_[&pods];
  const std::string key = key_of(ns, name);
  const auto it = objs.find(key);
  if (it == objs.end()) return not_found(pods, name);
  const std::string uid = str_at(binding, "metadata", "uid");
  if (!uid.empty() && uid != str_at(it->second, "metadata", "uid")) {
    return StatusError{409, "Conflict",
                       "Operation cannot be fulfilled on pods/binding \"" + name +
                           "\": Precondition failed: UID in precondition: " + uid +
                           ", UID in object meta: " + str_at(it->second, "metadata", "uid")};
  }
  const std::string bound = str_at(it->second, "spec", "nodeName");
  if (!bound.empty()) {
    return StatusError{409, "Conflict",
                       "Operation cannot be fulfilled on pods/binding \"" + name + "\": pod " +
                           name + " is already assigned to node \"" + bound + "\""};
  }
  json next = it->second;
  next["spec"]["nodeName"] = node;
  // As the real API server (BindingREST): the Binding's annotations are set
  // on the pod in the same update.
  if (const json* md = binding.contains("metadata") ? &binding["metadata"] : nullptr;
      md && md->is_object() && md->contains("annotations") && (*md)["annotations"].is_object()) {
    for (const auto& [k, v] : (*md)["annotations"].items()) {
      if (!v.is_string())
        return bad_request("Binding: metadata.annotations." + k + " is not a string");
      next["metadata"]["annotations"][k] = v;
    }
  }
  json& conditions = next["status"]["conditions"];
  if (!conditions.is_array()) conditions = json::array();
  conditions.push_back(
      {{"type", "PodScheduled"},
       {"status", "True"},
       {"lastTransitionTime", k8s::format_time(std::chrono::system_clock::now())}});
  return replace(pods, key, std::move(next));
}

json Store::put(const ResourceType& t, json obj) {
  if (!obj["metadata"].is_object()) obj["metadata"] = json::object();
  if (!t.namespaced) obj["metadata"].erase("namespace");
  obj["apiVersion"] = t.api_version();
  obj["kind"] = t.kind;
  std::lock_guard lock(mu_);
  Objects& objs = objects_[&t];
  const std::string key = key_of(obj);
  const auto it = objs.find(key);
  json previous;
  if (it != objs.end()) {
    previous = it->second;
    obj["metadata"]["uid"] = previous["metadata"]["uid"];
    obj["metadata"]["creationTimestamp"] = previous["metadata"]["creationTimestamp"];
  } else {
    if (str_at(obj, "metadata", "uid").empty()) obj["metadata"]["uid"] = new_uid();
    obj["metadata"]["creationTimestamp"] = k8s::format_time(std::chrono::system_clock::now());
  }
  obj["metadata"]["resourceVersion"] = std::to_string(bump());
  objs[key] = obj;
  record(t, previous.is_null() ? ChangeType::kAdded : ChangeType::kModified, obj,
         std::move(previous));
  return obj;
}

std::vector<json> Store::objects(const ResourceType& t, const std::string& ns) const {
  return snapshot(t, ns).first;
}

uint64_t Store::resource_version() const {
  std::lock_guard lock(mu_);
  return rv_;
}

std::pair<std::vector<json>, uint64_t> Store::snapshot(const ResourceType& t,
                                                       const std::string& ns) const {
  std::lock_guard lock(mu_);
  std::vector<json> out;
  if (const auto type = objects_.find(&t); type != objects_.end()) {
    for (const auto& [key, obj] : type->second) {
      if (ns.empty() || str_at(obj, "metadata", "namespace") == ns) out.push_back(obj);
    }
  }
  return {std::move(out), rv_};
}

std::optional<std::vector<Change>> Store::changes_after(
    uint64_t after, std::chrono::steady_clock::time_point deadline) const {
  std::unique_lock lock(mu_);
  const uint64_t woken = wake_;
  cv_.wait_until(lock, deadline,
                 [&] { return rv_ > after || after < compacted_ || wake_ != woken; });
  if (after < compacted_) return std::nullopt;
  std::vector<Change> out;
  // History is ordered by rv; find the first change after `after`.
  auto it = std::lower_bound(history_.begin(), history_.end(), after + 1,
                             [](const Change& c, uint64_t rv) { return c.rv < rv; });
  for (; it != history_.end(); ++it)
    out.push_back(*it);
  return out;
}

void Store::compact() {
  std::lock_guard lock(mu_);
  history_.clear();
  compacted_ = rv_;
  cv_.notify_all();
}

void Store::wake() {
  std::lock_guard lock(mu_);
  ++wake_;
  cv_.notify_all();
}

void Store::set_history_limit(size_t limit) {
  std::lock_guard lock(mu_);
  history_limit_ = limit;
  while (history_.size() > history_limit_) {
    compacted_ = history_.front().rv;
    history_.pop_front();
  }
}

}  // namespace hami::test
