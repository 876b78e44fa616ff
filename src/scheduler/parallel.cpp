#include "scheduler/parallel.hpp"

#include <algorithm>

namespace hami::scheduler {

ParallelFor::ParallelFor(size_t threads) {
  workers_.reserve(threads);
  for (size_t i = 0; i < threads; ++i)
    workers_.emplace_back([this, i] { work(i + 1); });
}

ParallelFor::~ParallelFor() {
  {
    std::lock_guard l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_)
    t.join();
}

void ParallelFor::take_chunks(const Body& body, size_t share) {
  for (;;) {
    const size_t begin = next_.fetch_add(chunk_, std::memory_order_relaxed);
    if (begin >= n_) return;
    body(begin, std::min(begin + chunk_, n_), share);
  }
}

void ParallelFor::work(size_t index) {
  uint64_t seen = 0;
  for (;;) {
    const Body* body;
    {
      std::unique_lock l(mu_);
      cv_.wait(l, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      // A thread that wakes after the caller took the last chunk stays out:
      // the caller may already have returned.
      if (body_ == nullptr || next_.load(std::memory_order_relaxed) >= n_) continue;
      body = body_;
      ++active_;
    }
    take_chunks(*body, index);
    {
      std::lock_guard l(mu_);
      if (--active_ == 0) done_cv_.notify_one();
    }
  }
}

void ParallelFor::run(size_t n, const Body& body, size_t min_per_share) {
  if (workers_.empty() || n < 2 * std::max<size_t>(min_per_share, 1)) {
    body(0, n, 0);
    return;
  }
  std::lock_guard serial(run_mu_);
  {
    std::lock_guard l(mu_);
    body_ = &body;
    n_ = n;
    // Several chunks per thread, so one that starts late still gets a fair
    // part, but not so small that the shared counter becomes the work.
    chunk_ = std::max<size_t>(min_per_share / 4 + 1, n / (shares() * 8) + 1);
    next_.store(0, std::memory_order_relaxed);
    ++generation_;
  }
  cv_.notify_all();
  take_chunks(body, 0);
  std::unique_lock l(mu_);
  done_cv_.wait(l, [&] { return active_ == 0; });
  body_ = nullptr;
}

}  // namespace hami::scheduler
