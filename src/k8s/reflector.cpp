#include "k8s/reflector.hpp"

#include <random>

#include "common/log.hpp"

namespace hami::k8s {
namespace {

using nlohmann::json;

std::string string_at(const json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains("metadata")) return {};
  const json& meta = obj["metadata"];
  if (!meta.is_object() || !meta.contains(key) || !meta[key].is_string()) return {};
  return meta[key].get<std::string>();
}

}  // namespace

Reflector::Reflector(Client& client, std::string path, ReflectorOptions options,
                     ReflectorHandlers handlers)
    : client_(client),
      path_(std::move(path)),
      options_(std::move(options)),
      handlers_(std::move(handlers)) {}

Reflector::~Reflector() {
  stop();
}

std::string Reflector::key_of(const json& object) {
  return string_at(object, "namespace") + "/" + string_at(object, "name");
}

void Reflector::start() {
  if (thread_.joinable()) return;
  stop_source_ = std::stop_source();
  thread_ = std::thread([this, token = stop_source_.get_token()] { run(token); });
}

void Reflector::stop() {
  stop_source_.request_stop();
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Reflector::has_synced() const {
  std::lock_guard lock(mu_);
  return synced_;
}

bool Reflector::wait_for_sync(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return synced_; });
}

std::vector<json> Reflector::items() const {
  std::lock_guard lock(mu_);
  std::vector<json> out;
  out.reserve(by_uid_.size());
  for (const auto& [uid, obj] : by_uid_)
    out.push_back(obj);
  return out;
}

std::optional<json> Reflector::get(std::string_view ns, std::string_view name) const {
  std::lock_guard lock(mu_);
  const auto key = uid_by_key_.find(std::string(ns) + "/" + std::string(name));
  if (key == uid_by_key_.end()) return std::nullopt;
  return by_uid_.at(key->second);
}

size_t Reflector::size() const {
  std::lock_guard lock(mu_);
  return by_uid_.size();
}

std::string Reflector::resource_version() const {
  std::lock_guard lock(mu_);
  return resource_version_;
}

Reflector::Stats Reflector::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void Reflector::wait(std::stop_token stop, std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, d, [&] { return stop.stop_requested(); });
}

bool Reflector::relist() {
  auto list = client_.list(path_, {.label_selector = options_.label_selector,
                                   .field_selector = options_.field_selector,
                                   .limit = options_.page_size});
  if (!list) {
    log::warn("reflector %s: list: %s", path_.c_str(), list.error().message.c_str());
    std::lock_guard lock(mu_);
    ++stats_.errors;
    return false;
  }
  std::map<std::string, json> fresh;
  for (json& obj : list->items) {
    const std::string uid = string_at(obj, "uid");
    if (uid.empty()) {
      log::warn("reflector %s: listed object %s has no uid; skipped", path_.c_str(),
                key_of(obj).c_str());
      continue;
    }
    fresh.emplace(uid, std::move(obj));
  }
  std::map<std::string, json> old;
  {
    std::lock_guard lock(mu_);
    old.swap(by_uid_);
    by_uid_ = fresh;
    uid_by_key_.clear();
    for (const auto& [uid, obj] : by_uid_)
      uid_by_key_[key_of(obj)] = uid;
    resource_version_ = list->resource_version;
    ++stats_.lists;
  }
  // Report what changed while we were not watching, as a watch would have.
  for (const auto& [uid, obj] : old) {
    if (!fresh.count(uid) && handlers_.on_delete) handlers_.on_delete(obj);
  }
  for (const auto& [uid, obj] : fresh) {
    const auto it = old.find(uid);
    if (it == old.end()) {
      if (handlers_.on_add) handlers_.on_add(obj);
    } else if (string_at(it->second, "resourceVersion") != string_at(obj, "resourceVersion")) {
      if (handlers_.on_update) handlers_.on_update(it->second, obj);
    }
  }
  {
    std::lock_guard lock(mu_);
    synced_ = true;
  }
  cv_.notify_all();
  return true;
}

void Reflector::apply(const WatchEvent& event) {
  const std::string rv = string_at(event.object, "resourceVersion");
  if (event.type == WatchEvent::Type::kBookmark) {
    std::lock_guard lock(mu_);
    if (!rv.empty()) resource_version_ = rv;
    ++stats_.bookmarks;
    return;
  }
  const std::string uid = string_at(event.object, "uid");
  if (uid.empty()) {
    log::warn("reflector %s: %s event for %s without a uid; skipped", path_.c_str(),
              to_string(event.type), key_of(event.object).c_str());
    return;
  }
  std::optional<json> previous;
  {
    std::lock_guard lock(mu_);
    const auto it = by_uid_.find(uid);
    if (it != by_uid_.end()) previous = it->second;
    if (event.type == WatchEvent::Type::kDeleted) {
      if (it != by_uid_.end()) {
        uid_by_key_.erase(key_of(it->second));
        by_uid_.erase(it);
      }
    } else {
      by_uid_[uid] = event.object;
      uid_by_key_[key_of(event.object)] = uid;
    }
    if (!rv.empty()) resource_version_ = rv;
    ++stats_.events;
  }
  if (event.type == WatchEvent::Type::kDeleted) {
    if (handlers_.on_delete) handlers_.on_delete(event.object);
  } else if (previous) {
    if (handlers_.on_update) handlers_.on_update(*previous, event.object);
  } else if (handlers_.on_add) {
    handlers_.on_add(event.object);
  }
}

void Reflector::run(std::stop_token stop) {
  std::mt19937 rng{std::random_device{}()};
  std::uniform_real_distribution<double> spread(1.0, 2.0);
  auto backoff = options_.backoff_initial;
  auto fail = [&] {
    wait(stop, backoff);
    backoff = std::min(backoff * 2, options_.backoff_max);
  };
  bool need_list = true;
  while (!stop.stop_requested()) {
    if (need_list) {
      if (!relist()) {
        fail();
        continue;
      }
      need_list = false;
      backoff = options_.backoff_initial;
    }
    WatchOptions wo;
    wo.resource_version = resource_version();
    wo.label_selector = options_.label_selector;
    wo.field_selector = options_.field_selector;
    wo.allow_bookmarks = true;
    wo.timeout_seconds =
        static_cast<int>(static_cast<double>(options_.watch_timeout.count()) * spread(rng));
    {
      std::lock_guard lock(mu_);
      ++stats_.watches;
    }
    uint64_t seen = 0;
    const auto began = std::chrono::steady_clock::now();
    auto end = client_.watch(
        path_, wo,
        [&](const WatchEvent& e) {
          apply(e);
          ++seen;
          return true;
        },
        stop);
    if (!end) {
      log::warn("reflector %s: watch: %s", path_.c_str(), end.error().message.c_str());
      const bool gone = end.error().gone();
      {
        std::lock_guard lock(mu_);
        ++stats_.errors;
        if (gone) ++stats_.expired;
      }
      // Resuming from an expired version would fail again: list instead.
      if (gone) {
        need_list = true;
      } else {
        fail();
      }
      continue;
    }
    if (*end == WatchEnd::kStopped) break;
    if (*end == WatchEnd::kExpired) {
      log::info("reflector %s: resourceVersion %s expired; listing again", path_.c_str(),
                wo.resource_version.c_str());
      std::lock_guard lock(mu_);
      ++stats_.expired;
      need_list = true;
      continue;
    }
    if (seen > 0) backoff = options_.backoff_initial;
    // A server that ends every watch at once must not turn this into a busy loop.
    if (seen == 0 && std::chrono::steady_clock::now() - began < std::chrono::seconds(1)) {
      wait(stop, options_.backoff_initial);
    }
  }
}

}  // namespace hami::k8s
