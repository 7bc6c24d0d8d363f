#include "tune/worker_pool.hpp"

#include <algorithm>

namespace octo {

WorkerPool::WorkerPool(int threads) {
  if (threads < 1) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads_ = threads;
  for (int w = 1; w < threads_; ++w) pool_.emplace_back([this, w] { loop(w); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : pool_) t.join();
}

void WorkerPool::work(int worker) {
  for (;;) {
    int index = 0;
    {
      std::lock_guard lock(mutex_);
      if (next_ >= n_ || error_) return;
      index = next_++;
    }
    try {
      (*job_)(index, worker);
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
  }
}

void WorkerPool::loop(int worker) {
  std::uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      ++running_;
    }
    work(worker);
    {
      std::lock_guard lock(mutex_);
      --running_;
    }
    done_.notify_all();
  }
}

void WorkerPool::run(int n, const std::function<void(int, int)>& fn) {
  if (n <= 0) return;
  if (threads_ == 1 || n == 1) {
    for (int i = 0; i < n; ++i) fn(i, 0);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    job_ = &fn;
    n_ = n;
    next_ = 0;
    error_ = nullptr;
    ++generation_;
  }
  wake_.notify_all();
  work(0);
  std::exception_ptr error;
  {
    std::unique_lock lock(mutex_);
    // Every index has been claimed; wait for the workers still inside a call.
    done_.wait(lock, [&] { return running_ == 0; });
    job_ = nullptr;
    n_ = 0;
    error = error_;
    error_ = nullptr;
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace octo
