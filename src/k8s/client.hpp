#pragma once
// A narrow Kubernetes API client: JSON over HTTPS (cpp-httplib), the verbs our
// daemons need and the API's concurrency semantics (resourceVersion, 409 on
// conflict, watch resume and 410 on expired history). Every call returns a
// k8s::Result; nothing throws. A Client is safe to use from several threads: it
// keeps a small pool of keep-alive connections, and each watch gets its own.
//
//   auto cfg = hami::k8s::Config::auto_detect();
//   auto client = hami::k8s::Client::from_config(*cfg);
//   auto pods = client->list(hami::k8s::pod_path("default"), {.label_selector = "app=x"});
//   client->watch(pod_path("default"), {.resource_version = pods->resource_version},
//                 [](const hami::k8s::WatchEvent& e) { ...; return true; }, stop_token);
//   client->patch_annotations(pod_path("default", "p"), {{"hami.io/bind-phase", "success"}});
//
// Requests that fail with 429 are retried for every verb (the server did not
// act on them); 5xx, timeouts and broken connections are retried only for
// idempotent ones (GET, PUT, DELETE, merge PATCH). Retries back off
// exponentially with jitter, capped, and honour Retry-After.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "k8s/config.hpp"
#include "k8s/error.hpp"

namespace hami::k8s {

struct ClientOptions {
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds request_timeout{30000};  // per read or write, not per request
  std::string user_agent = "hami-cpp/0.1";
  int max_attempts = 5;  // per request, counting the first
  std::chrono::milliseconds backoff_initial{100};
  std::chrono::milliseconds backoff_max{5000};
  size_t max_idle_connections = 4;
};

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  std::string resource_version;  // "" or "0" (any), or a minimum to serve
  int64_t limit = 0;             // page size; 0 leaves it to the server
};

struct ObjectList {
  std::vector<nlohmann::json> items;
  std::string resource_version;  // watch from here to see every later change
};

struct WatchOptions {
  std::string resource_version;  // "" or "0": the server first sends current objects as ADDED
  std::string label_selector;
  std::string field_selector;
  bool allow_bookmarks = true;
  std::optional<int> timeout_seconds;  // the server ends the stream after this
};

struct WatchEvent {
  enum class Type { kAdded, kModified, kDeleted, kBookmark };
  Type type;
  nlohmann::json object;  // for a bookmark, only kind, apiVersion and metadata.resourceVersion
};
const char* to_string(WatchEvent::Type t);

enum class WatchEnd {
  kClosed,   // the server ended the stream; resume from the last resourceVersion seen
  kStopped,  // the stop token was triggered or the callback returned false
  kExpired,  // 410: the resourceVersion is too old; list again
};

// Return false to end the watch.
using WatchCallback = std::function<bool(const WatchEvent&)>;

// The merge patch {"metadata": {"annotations": ...}} that sets each change
// (nullopt removes the annotation); callers may add other metadata to it.
nlohmann::json annotations_patch(const std::map<std::string, std::optional<std::string>>& changes);

// Builds a merge patch from the current object for read_modify_patch: nullopt
// means "nothing to change", an error aborts.
using PatchFn = std::function<Result<std::optional<nlohmann::json>>(const nlohmann::json& current)>;

struct PatchRetry {
  int max_attempts = 5;  // on 409 Conflict
};

class Client {
 public:
  // Checks the certificates and keys in `config`; connects on first use.
  static hami::Result<Client> from_config(const Config& config, ClientOptions options = {});
  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;
  ~Client();

  Result<nlohmann::json> get(const std::string& path);
  // Every page (following `continue`) concatenated.
  Result<ObjectList> list(const std::string& path, const ListOptions& options = {});
  // Streams events to `on_event` until the server ends the stream, the callback
  // returns false or `stop` is triggered (which interrupts a blocked read). An
  // ERROR event or a status other than 200 is an error, except 410 (kExpired).
  Result<WatchEnd> watch(const std::string& path, const WatchOptions& options,
                         const WatchCallback& on_event, std::stop_token stop = {});

  Result<nlohmann::json> create(const std::string& collection_path, const nlohmann::json& object);
  // PUT. With metadata.resourceVersion set, 409 Conflict when the object changed since.
  Result<nlohmann::json> update(const std::string& path, const nlohmann::json& object);
  // JSON merge patch (RFC 7386). A metadata.resourceVersion in the patch is a precondition.
  Result<nlohmann::json> merge_patch(const std::string& path, const nlohmann::json& patch);
  Result<nlohmann::json> del(const std::string& path);

  // GET the object, build a patch with `make_patch`, send it with the object's
  // resourceVersion as precondition; on 409 re-read and try again, backing off,
  // up to retry.max_attempts. Returns the patched (or unchanged) object.
  Result<nlohmann::json> read_modify_patch(const std::string& path, const PatchFn& make_patch,
                                           PatchRetry retry = {});
  // Sets annotations (nullopt removes one). With `retry`, the patch carries the
  // resourceVersion it was computed from (read_modify_patch); without, it is one
  // unconditional merge patch.
  Result<nlohmann::json> patch_annotations(
      const std::string& path, const std::map<std::string, std::optional<std::string>>& changes,
      std::optional<PatchRetry> retry = std::nullopt);

  // POST pods/<name>/binding: assigns the pod to `node`; 409 when already bound.
  // `uid`, when not empty, must match the pod's (API servers from 1.22 check
  // it). `annotations` are set on the pod in the same update.
  Result<void> bind_pod(const std::string& ns, const std::string& name, const std::string& uid,
                        const std::string& node,
                        const std::map<std::string, std::string>& annotations = {});

  const Config& config() const;

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hami::k8s
