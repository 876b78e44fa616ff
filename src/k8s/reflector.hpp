#pragma once
// The informer pattern: list a collection, then watch it from the list's
// resourceVersion, keeping a local cache (uid → object JSON) and telling the
// owner about every add, update and delete. A watch that ends is resumed from
// the last resourceVersion seen (events are neither lost nor repeated); a 410
// (history compacted) makes it list again, and the differences between the old
// cache and the new list are reported as events; errors back off exponentially.
// Bookmarks only advance the resourceVersion. Runs on its own thread.
//
//   hami::k8s::Reflector pods(client, hami::k8s::core_path("pods"),
//                             {.field_selector = "spec.nodeName=" + node},
//                             {.on_add = [&](const nlohmann::json& p) { ... },
//                              .on_delete = [&](const nlohmann::json& p) { ... }});
//   pods.start();
//   if (!pods.wait_for_sync(std::chrono::seconds(30))) ...;
//   auto p = pods.get("default", "x");   // std::optional<nlohmann::json>
//   pods.stop();
//
// Handlers run on the reflector's thread, in event order, without its lock
// held (they may read the cache, which already reflects the event); they must
// not call stop().

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "k8s/client.hpp"

namespace hami::k8s {

struct ReflectorOptions {
  std::string label_selector;
  std::string field_selector;
  int64_t page_size = 500;  // list in pages of this many; 0 for one request
  // Each watch asks the server to end it after this, randomised up to twice as
  // long (as client-go does), so all watches do not restart together.
  std::chrono::seconds watch_timeout{300};
  std::chrono::milliseconds backoff_initial{200};
  std::chrono::milliseconds backoff_max{30000};
};

struct ReflectorHandlers {
  std::function<void(const nlohmann::json& object)> on_add;
  std::function<void(const nlohmann::json& old_object, const nlohmann::json& new_object)> on_update;
  std::function<void(const nlohmann::json& object)> on_delete;  // the last state known
};

class Reflector {
 public:
  Reflector(Client& client, std::string path, ReflectorOptions options = {},
            ReflectorHandlers handlers = {});
  ~Reflector();  // stop()
  Reflector(const Reflector&) = delete;
  Reflector& operator=(const Reflector&) = delete;

  void start();
  void stop();  // interrupts a blocked watch; idempotent

  // True once the first list has been applied.
  bool has_synced() const;
  bool wait_for_sync(std::chrono::milliseconds timeout) const;

  std::vector<nlohmann::json> items() const;
  std::optional<nlohmann::json> get(std::string_view ns, std::string_view name) const;
  size_t size() const;
  std::string resource_version() const;

  struct Stats {
    uint64_t lists = 0;    // successful lists (the first one included)
    uint64_t watches = 0;  // watch requests made
    uint64_t expired = 0;  // 410s that forced a relist
    uint64_t errors = 0;   // failed lists or watches
    uint64_t events = 0;   // ADDED/MODIFIED/DELETED applied from watches
    uint64_t bookmarks = 0;
  };
  Stats stats() const;

 private:
  void run(std::stop_token stop);
  bool relist();
  void apply(const WatchEvent& event);
  void wait(std::stop_token stop, std::chrono::milliseconds d);
  static std::string key_of(const nlohmann::json& object);

  Client& client_;
  std::string path_;
  ReflectorOptions options_;
  ReflectorHandlers handlers_;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::map<std::string, nlohmann::json> by_uid_;
  std::map<std::string, std::string> uid_by_key_;  // "ns/name" → uid
  std::string resource_version_;
  bool synced_ = false;
  Stats stats_;

  std::stop_source stop_source_;
  std::thread thread_;
};

}  // namespace hami::k8s
