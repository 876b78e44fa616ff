#pragma once
// The test API server's object store: etcd's semantics as the API exposes
// them. One global, monotonically increasing resourceVersion across all types;
// uid and creationTimestamp assigned on create; preconditions on
// resourceVersion (and uid for delete and binding) answered with 409; a
// bounded history of changes for watches and consistent paginated lists, with
// anything older than the window answered with 410. Thread-safe.
//
//   Store store(10000);
//   auto pod = store.create(*find_resource("pods"), "default", pod_json);  // 409 if it exists
//   auto changes = store.changes_after(rv, deadline);  // nullopt: rv was compacted (410)

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.hpp"
#include "support/apiserver/resources.hpp"

namespace hami::test {

// What the server answers with as a v1 Status.
struct StatusError {
  int code = 500;
  std::string reason;  // NotFound, AlreadyExists, Conflict, BadRequest, Expired, ...
  std::string message;
  nlohmann::json to_json() const;
};
template <class T>
using StoreResult = hami::Result<T, StatusError>;

enum class ChangeType { kAdded, kModified, kDeleted };

struct Change {
  uint64_t rv = 0;
  const ResourceType* type = nullptr;
  ChangeType change = ChangeType::kAdded;
  nlohmann::json object;    // the state after (for a delete: the last state, at rv)
  nlohmann::json previous;  // the state before; null for an add
};

class Store {
 public:
  explicit Store(size_t history_limit) : history_limit_(history_limit) {}

  StoreResult<nlohmann::json> create(const ResourceType& t, const std::string& ns,
                                     nlohmann::json object);
  StoreResult<nlohmann::json> get(const ResourceType& t, const std::string& ns,
                                  const std::string& name) const;

  struct Page {
    std::vector<nlohmann::json> items;
    uint64_t rv = 0;
    std::string continue_token;
  };
  // `ns` empty lists every namespace. With a continue token the page comes from
  // the same snapshot as the first one (410 once that left the history window).
  StoreResult<Page> list(const ResourceType& t, const std::string& ns,
                         const std::function<bool(const nlohmann::json&)>& filter, int64_t limit,
                         const std::string& continue_token) const;

  // PUT: metadata.resourceVersion, when set, must be current. status_only: the
  // status subresource (only status changes); otherwise status is kept for
  // types with a status subresource.
  StoreResult<nlohmann::json> update(const ResourceType& t, const std::string& ns,
                                     const std::string& name, nlohmann::json object,
                                     bool status_only);
  // RFC 7386 merge patch, or an RFC 6902 JSON patch when `patch` is an array.
  // A metadata.resourceVersion in a merge patch is a precondition.
  StoreResult<nlohmann::json> patch(const ResourceType& t, const std::string& ns,
                                    const std::string& name, const nlohmann::json& patch,
                                    bool status_only);
  // `preconditions`: DeleteOptions.preconditions {uid, resourceVersion}, may be null.
  StoreResult<nlohmann::json> remove(const ResourceType& t, const std::string& ns,
                                     const std::string& name, const nlohmann::json& preconditions);
  // pods/binding: sets spec.nodeName (409 when already set).
  StoreResult<nlohmann::json> bind(const std::string& ns, const std::string& name,
                                   const nlohmann::json& binding);

  // For tests: create or replace without preconditions.
  nlohmann::json put(const ResourceType& t, nlohmann::json object);
  std::vector<nlohmann::json> objects(const ResourceType& t, const std::string& ns = {}) const;

  uint64_t resource_version() const;
  // Current objects and the resourceVersion they are consistent with.
  std::pair<std::vector<nlohmann::json>, uint64_t> snapshot(const ResourceType& t,
                                                            const std::string& ns) const;
  // Changes (of every type) after `after`, waiting until `deadline` for one;
  // returns early, possibly empty, on wake(). nullopt: `after` is older than
  // the history window.
  std::optional<std::vector<Change>> changes_after(
      uint64_t after, std::chrono::steady_clock::time_point deadline) const;
  // Drops the history: a watch or continue token from before now gets 410.
  void compact();
  void wake();
  void set_history_limit(size_t limit);

 private:
  using Objects = std::map<std::string, nlohmann::json>;  // "ns/name" → object
  StoreResult<nlohmann::json> replace(const ResourceType& t, const std::string& key,
                                      nlohmann::json next);
  void record(const ResourceType& t, ChangeType c, const nlohmann::json& object,
              nlohmann::json previous);
  Objects state_at(const ResourceType& t, uint64_t rv) const;
  uint64_t bump() { return ++rv_; }

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::map<const ResourceType*, Objects> objects_;
  // Starts above 0 as etcd's revision does: "0" means "any version" to a watch,
  // so an empty list must not hand that out as its resourceVersion.
  uint64_t rv_ = 1;
  std::deque<Change> history_;
  size_t history_limit_;
  uint64_t compacted_ = 0;  // changes at or below this rv are gone
  uint64_t wake_ = 0;
};

}  // namespace hami::test
