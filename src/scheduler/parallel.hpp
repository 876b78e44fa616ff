#pragma once
// A small persistent thread pool for splitting one request's per-node work
// (filter, prioritize over thousands of nodes) across the machine's cores.
// The calling thread does one share itself, so a pool of N threads uses N+1
// cores; run() returns when every share is done. Threads are started once:
// a request pays a wake-up (~10 µs), not a thread creation.
//
//   ParallelFor pool(std::thread::hardware_concurrency() - 1);
//   pool.run(nodes.size(), [&](size_t begin, size_t end, size_t share) { ... });
//
// run() may be called from several threads at once; calls are serialised
// (a second request waits for the pool, then uses it), which is still faster
// than doing the whole of each request on one core.

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

  // Shares = threads + 1, each a contiguous range; share 0 runs on the caller.
  // With fewer than min_per_share items per share, all runs on the caller.
  void run(size_t n, const Body& body, size_t min_per_share = 256);
  size_t shares() const { return workers_.size() + 1; }

 private:
  void work(size_t index);

  std::mutex run_mu_;  // one run() at a time
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable done_cv_;
  const Body* body_ = nullptr;
  size_t n_ = 0;
  size_t shares_ = 0;
  size_t pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace hami::scheduler
