#pragma once
// A small persistent thread pool for splitting one request's per-node work
// (filter, prioritize over thousands of nodes) across the machine's cores.
// The range is cut into chunks that the calling thread and the pool's threads
// take from a shared counter until none is left, so a pool thread the OS has
// not scheduled yet delays nothing: the caller does its chunks as well (on a
// busy 2-core machine, fixed halves made a request wait for a descheduled
// thread). Threads are started once: a request pays a wake-up (~10 µs), not a
// thread creation.
//
//   ParallelFor pool(std::thread::hardware_concurrency() - 1);
//   pool.run(nodes.size(), [&](size_t begin, size_t end, size_t share) { ... });
//
// `share` identifies the thread running the chunk (0: the caller, 1..threads:
// the pool's), for per-thread accumulators of size shares(). run() may be
// called from several threads at once; calls are serialised (a second request
// waits for the pool, then uses it).

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace hami::scheduler {

class ParallelFor {
 public:
  using Body = std::function<void(size_t begin, size_t end, size_t share)>;

  explicit ParallelFor(size_t threads);
  ~ParallelFor();
  ParallelFor(const ParallelFor&) = delete;
  ParallelFor& operator=(const ParallelFor&) = delete;

  // Calls body on contiguous chunks covering [0, n) exactly once. With fewer
  // than 2 * min_per_share items, all runs on the caller in one call.
  void run(size_t n, const Body& body, size_t min_per_share = 256);
  size_t shares() const { return workers_.size() + 1; }

 private:
  void work(size_t index);

  std::mutex run_mu_;  // one run() at a time
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable done_cv_;
  // Takes chunks until the counter passes n_.
  void take_chunks(const Body& body, size_t share);

  const Body* body_ = nullptr;  // null between runs
  size_t n_ = 0;
  size_t chunk_ = 0;
  std::atomic<size_t> next_{0};
  size_t active_ = 0;  // pool threads inside take_chunks for this run
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace hami::scheduler
