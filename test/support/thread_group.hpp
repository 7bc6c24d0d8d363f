#pragma once
// An in-process nn::Group for layer tests: the T members of a group are std::threads of one
// process sharing memory (CPU device pointers are host pointers), and every collective of
// nn/group.hpp is done by reading the other members' buffers between two barriers. Sums run in
// rank order, so every member gets bit-identical results, as from a real all-reduce. A member
// that throws aborts the group: the others throw instead of waiting forever.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "nn/group.hpp"

namespace octo::nn::test {

/// What the members of one group share.
class ThreadHub {
 public:
  ThreadHub(int size, std::string name) : size_(size), name_(std::move(name)), in_(size), counts_(size) {}

  [[nodiscard]] int size() const { return size_; }
  [[nodiscard]] const std::string& name() const { return name_; }

  /// Waits until every member has arrived (throws when the group was aborted or after 60 s).
  void sync() {
    std::unique_lock lock(mutex_);
    if (aborted_) throw std::runtime_error(name_ + ": aborted by another member");
    const long generation = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    if (!cv_.wait_for(lock, std::chrono::seconds(60), [&] { return generation_ != generation || aborted_; }))
      throw std::runtime_error(name_ + ": timed out in a collective");
    if (aborted_) throw std::runtime_error(name_ + ": aborted by another member");
  }
  void abort() {
    std::lock_guard lock(mutex_);
    aborted_ = true;
    cv_.notify_all();
  }

  std::vector<const float*>& in() { return in_; }
  std::vector<std::span<const std::size_t>>& counts() { return counts_; }

 private:
  int size_;
  std::string name_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0;
  long generation_ = 0;
  bool aborted_ = false;
  std::vector<const float*> in_;
  std::vector<std::span<const std::size_t>> counts_;
};

class ThreadGroup final : public Group {
 public:
  ThreadGroup(ThreadHub& hub, int rank) : hub_(hub), rank_(rank) {}

  [[nodiscard]] int rank() const override { return rank_; }
  [[nodiscard]] int size() const override { return hub_.size(); }
  [[nodiscard]] std::string describe() const override {
    return hub_.name() + " (rank " + std::to_string(rank_) + " of " + std::to_string(hub_.size()) + ")";
  }

  void all_reduce_sum(float* data, std::size_t n) override {
    reduce(data, n, [](float a, float b) { return a + b; });
  }
  void all_reduce_max(float* data, std::size_t n) override {
    reduce(data, n, [](float a, float b) { return a > b ? a : b; });
  }
  void all_gather(const float* in, float* out, std::size_t n) override {
    post(in);
    for (int r = 0; r < size(); ++r)
      for (std::size_t i = 0; i < n; ++i) out[r * n + i] = hub_.in()[r][i];
    hub_.sync();
  }
  void reduce_scatter_sum(const float* in, float* out, std::size_t n) override {
    post(in);
    for (std::size_t i = 0; i < n; ++i) {
      float s = hub_.in()[0][rank_ * n + i];
      for (int r = 1; r < size(); ++r) s += hub_.in()[r][rank_ * n + i];
      out[i] = s;
    }
    hub_.sync();
  }
  void all_to_all_v(const float* in, std::span<const std::size_t> send_counts, float* out,
                    std::span<const std::size_t> recv_counts) override {
    if (send_counts.size() != static_cast<std::size_t>(size()) || recv_counts.size() != send_counts.size())
      throw std::runtime_error(describe() + ": all_to_all_v with counts for the wrong group size");
    hub_.counts()[rank_] = send_counts;
    post(in);
    std::size_t at = 0;
    for (int p = 0; p < size(); ++p) {
      const std::span<const std::size_t> theirs = hub_.counts()[p];
      std::size_t from = 0;
      for (int q = 0; q < rank_; ++q) from += theirs[q];
      if (theirs[rank_] != recv_counts[p])
        throw std::runtime_error(describe() + ": all_to_all_v receive count does not match the sender's");
      for (std::size_t i = 0; i < recv_counts[p]; ++i) out[at + i] = hub_.in()[p][from + i];
      at += recv_counts[p];
    }
    hub_.sync();
  }

 private:
  void post(const float* in) {
    hub_.in()[rank_] = in;
    hub_.sync();
  }
  template <typename Op>
  void reduce(float* data, std::size_t n, Op op) {
    post(data);
    std::vector<float> result(n);
    for (std::size_t i = 0; i < n; ++i) {
      float s = hub_.in()[0][i];
      for (int r = 1; r < size(); ++r) s = op(s, hub_.in()[r][i]);
      result[i] = s;
    }
    hub_.sync();  // every member has read every input: now overwrite
    std::copy(result.begin(), result.end(), data);
  }

  ThreadHub& hub_;
  int rank_;
};

/// The tensor and expert groups of a stage of tp x ep ranks (ep consecutive data ranks), in the
/// Megatron order of plan/rank_layout.hpp: rank = tp_rank + tp * ep_rank.
class ThreadGrid {
 public:
  ThreadGrid(int tp, int ep) : tp_(tp), ep_(ep) {
    for (int q = 0; q < ep; ++q)
      tp_hubs_.push_back(std::make_unique<ThreadHub>(tp, "tensor group " + std::to_string(q)));
    for (int r = 0; r < tp; ++r)
      ep_hubs_.push_back(std::make_unique<ThreadHub>(ep, "expert group " + std::to_string(r)));
    for (int q = 0; q < ep; ++q)
      for (int r = 0; r < tp; ++r) {
        tp_groups_.push_back(std::make_unique<ThreadGroup>(*tp_hubs_[q], r));
        ep_groups_.push_back(std::make_unique<ThreadGroup>(*ep_hubs_[r], q));
      }
  }
  [[nodiscard]] int size() const { return tp_ * ep_; }
  [[nodiscard]] int tp_rank(int rank) const { return rank % tp_; }
  [[nodiscard]] int ep_rank(int rank) const { return rank / tp_; }
  [[nodiscard]] LayerGroups groups(int rank) const {
    return LayerGroups{tp_groups_[rank].get(), ep_groups_[rank].get()};
  }

  /// Runs fn(rank) on one thread per rank; rethrows the first exception (the others are aborted).
  void run(const std::function<void(int)>& fn) {
    std::vector<std::exception_ptr> errors(size());
    std::atomic<int> first{-1};
    std::vector<std::thread> threads;
    for (int rank = 0; rank < size(); ++rank)
      threads.emplace_back([&, rank] {
        try {
          fn(rank);
        } catch (...) {
          errors[rank] = std::current_exception();
          int none = -1;
          first.compare_exchange_strong(none, rank);
          for (auto& h : tp_hubs_) h->abort();
          for (auto& h : ep_hubs_) h->abort();
        }
      });
    for (auto& t : threads) t.join();
    if (first >= 0) std::rethrow_exception(errors[first]);  // the cause, not an aborted member
  }

 private:
  int tp_, ep_;
  std::vector<std::unique_ptr<ThreadHub>> tp_hubs_, ep_hubs_;
  std::vector<std::unique_ptr<ThreadGroup>> tp_groups_, ep_groups_;
};

}  // namespace octo::nn::test
