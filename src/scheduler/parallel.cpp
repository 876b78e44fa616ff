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

void ParallelFor::work(size_t index) {
  uint64_t seen = 0;
  for (;;) {
    const Body* body;
    size_t begin, end;
    {
      std::unique_lock l(mu_);
      cv_.wait(l, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (index >= shares_) continue;  // this run used fewer shares
      body = body_;
      begin = n_ * index / shares_;
      end = n_ * (index + 1) / shares_;
    }
    (*body)(begin, end, index);
    {
      std::lock_guard l(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }
}

void ParallelFor::run(size_t n, const Body& body, size_t min_per_share) {
  size_t shares = std::min(workers_.size() + 1, min_per_share ? n / min_per_share : n);
  if (shares <= 1) {
    body(0, n, 0);
    return;
  }
  std::lock_guard serial(run_mu_);
  {
    std::lock_guard l(mu_);
    body_ = &body;
    n_ = n;
    shares_ = shares;
    pending_ = shares - 1;
    ++generation_;
  }
  cv_.notify_all();
  body(0, n / shares, 0);
  std::unique_lock l(mu_);
  done_cv_.wait(l, [&] { return pending_ == 0; });
  body_ = nullptr;
}

}  // namespace hami::scheduler
