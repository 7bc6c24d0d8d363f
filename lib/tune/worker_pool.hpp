#pragma once
/// A small fixed thread pool for the tuner: run(n, fn) calls fn(index, worker) for every index in
/// [0, n) and returns when all are done. `worker` (0..threads−1) identifies the thread so callers
/// can keep one Simulator per worker. The calling thread takes part as worker 0.

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace octo {

class WorkerPool {
 public:
  /// `threads` < 1 means std::thread::hardware_concurrency() (at least 1).
  explicit WorkerPool(int threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  [[nodiscard]] int threads() const { return threads_; }

  /// Runs fn(i, worker) for i in [0, n). The first exception thrown by fn is rethrown here after
  /// all started calls have finished.
  void run(int n, const std::function<void(int index, int worker)>& fn);

 private:
  void loop(int worker);
  void work(int worker);

  int threads_ = 1;
  std::vector<std::thread> pool_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int, int)>* job_ = nullptr;
  int n_ = 0;
  int next_ = 0;
  int running_ = 0;
  std::uint64_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace octo
