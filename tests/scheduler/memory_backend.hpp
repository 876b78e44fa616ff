#pragma once
// A BindBackend that keeps pods and node locks in memory, for the extender's
// tests and the benchmark: the real bind code path (fit, reserve, lock,
// bind with annotations, roll back) without HTTP. Failures can be scripted
// per step. The node lock follows upstream's rule (held by another pod ⇒
// contention); a held lock is not waited for, unless block_waits() makes a
// bind that may wait block until unblock_waits().

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "k8s/objects.hpp"
#include "scheduler/extender.hpp"

namespace hami::test {

class MemoryBackend : public scheduler::BindBackend {
 public:
  void add_pod(const nlohmann::json& pod) {
    std::lock_guard l(mu_);
    const auto& m = pod["metadata"];
    pods_[m.value("namespace", "default") + "/" + m["name"].get<std::string>()] = pod;
  }
  nlohmann::json pod(const std::string& ns, const std::string& name) {
    std::lock_guard l(mu_);
    return pods_.at(ns + "/" + name);
  }
  std::string lock_holder(const std::string& node) {
    std::lock_guard l(mu_);
    auto it = locks_.find(node);
    return it == locks_.end() ? "" : it->second;
  }
  void set_lock(const std::string& node, const std::string& holder) {
    std::lock_guard l(mu_);
    locks_[node] = holder;
  }
  // Makes the next call of `step` ("lock", "bind") fail.
  void fail_next(const std::string& step) {
    std::lock_guard l(mu_);
    fail_.insert(step);
  }
  int binds() const {
    std::lock_guard l(mu_);
    return binds_;
  }
  int lock_calls() const {
    std::lock_guard l(mu_);
    return lock_calls_;
  }
  // What the last lock_node call was allowed to wait.
  std::chrono::milliseconds last_wait() const {
    std::lock_guard l(mu_);
    return last_wait_;
  }
  int pod_reads() const {
    std::lock_guard l(mu_);
    return reads_;
  }
  void block_waits() {
    std::lock_guard l(mu_);
    block_ = true;
  }
  void unblock_waits() {
    {
      std::lock_guard l(mu_);
      block_ = false;
    }
    cv_.notify_all();
  }
  int waiting() const {
    std::lock_guard l(mu_);
    return waiting_;
  }
  // The device plugin's side: Allocate done, lock released.
  void release_all_locks() {
    std::lock_guard l(mu_);
    locks_.clear();
  }

  // Run inside get_pod and lock_node, before they act: what happens while
  // bind waits for the API server.
  std::function<void()> on_get_pod;
  std::function<void(const std::string& node)> on_lock;

  Result<k8s::Pod> get_pod(const std::string& ns, const std::string& name) override {
    if (on_get_pod) on_get_pod();
    std::lock_guard l(mu_);
    ++reads_;
    auto it = pods_.find(ns + "/" + name);
    if (it == pods_.end()) return Error{"pods \"" + name + "\" not found"};
    auto p = k8s::Pod::from_json(it->second);
    if (!p) return p.error();
    return std::move(*p);
  }
  Result<void, scheduler::LockError> lock_node(const std::string& node, const std::string& ns,
                                               const std::string& name,
                                               std::chrono::milliseconds wait) override {
    if (on_lock) on_lock(node);
    std::unique_lock l(mu_);
    ++lock_calls_;
    last_wait_ = wait;
    if (fail_.erase("lock")) return scheduler::LockError{false, "injected lock failure"};
    const std::string me = ns + "/" + name;
    auto it = locks_.find(node);
    if (it != locks_.end() && it->second != me && wait.count() > 0 && block_) {
      ++waiting_;
      cv_.wait(l, [&] { return !block_; });
      --waiting_;
      it = locks_.find(node);
    }
    if (it != locks_.end() && it->second != me) {
      return scheduler::LockError{
          true, "node " + node + " has been locked by " + it->second + ": node lock contention"};
    }
    locks_[node] = me;
    return {};
  }
  void unlock_node(const std::string& node, const std::string& ns,
                   const std::string& name) override {
    std::lock_guard l(mu_);
    auto it = locks_.find(node);
    if (it != locks_.end() && it->second == ns + "/" + name) locks_.erase(it);
  }
  Result<void> bind(const std::string& ns, const std::string& name, const std::string&,
                    const std::string& node,
                    const std::map<std::string, std::string>& annotations) override {
    std::lock_guard l(mu_);
    if (fail_.erase("bind")) return Error{"injected bind failure"};
    auto it = pods_.find(ns + "/" + name);
    if (it == pods_.end()) return Error{"pods \"" + name + "\" not found"};
    for (const auto& [k, v] : annotations)
      it->second["metadata"]["annotations"][k] = v;
    it->second["spec"]["nodeName"] = node;
    ++binds_;
    return {};
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool block_ = false;
  int waiting_ = 0;
  int lock_calls_ = 0;
  std::chrono::milliseconds last_wait_{0};
  std::map<std::string, nlohmann::json> pods_;
  std::map<std::string, std::string> locks_;
  std::set<std::string> fail_;
  int binds_ = 0;
  int reads_ = 0;
};

}  // namespace hami::test
