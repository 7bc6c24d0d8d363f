#pragma once
/// The op graph of a compute-only schedule of one partition + placement: every compute op of
/// every (stage, micro-batch) with its duration (as the list scheduler and the simulator count
/// it) and its activation memory change, the data edges between them with their transfer delays
/// (plan/semantics.hpp's rules), and, for a given per-device order, the device edges. Timing an order gives
/// every op's earliest start (head) with ideal transfers (what ListSchedule::makespan_ms reports), its tail
/// (the longest path from its start to the end, its own duration included) and the critical path. Shared by
/// the schedulers that work on whole orders (sched/slack_scheduler.hpp, sched/order_search.hpp).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sched/list_scheduler.hpp"
#include "sched/op_slot.hpp"
#include "sched/schedule.hpp"

namespace octo {

class OpGraph {
 public:
  /// The ops of `problem` (split: B and W, else fused BW; R where a stage recomputes).
  OpGraph(const ListScheduleProblem& problem, bool split);

  /// Op ids index flat tables: (stage · M + mb) · kKinds + slot; not every id is an op (present).
  [[nodiscard]] int id(int s, int m, int slot) const { return (s * M_ + m) * op_slot::kKinds + slot; }
  [[nodiscard]] int stage_of(int op) const { return op / op_slot::kKinds / M_; }
  [[nodiscard]] int mb_of(int op) const { return (op / op_slot::kKinds) % M_; }
  [[nodiscard]] int dev(int s) const { return stage_device_[static_cast<std::size_t>(s)]; }
  [[nodiscard]] int dev_of(int op) const { return dev(stage_of(op)); }
  [[nodiscard]] std::size_t size() const { return present_.size(); }
  [[nodiscard]] bool present(int op) const { return present_[static_cast<std::size_t>(op)] != 0; }
  [[nodiscard]] double dur(int op) const { return dur_[static_cast<std::size_t>(op)]; }
  [[nodiscard]] OpKind kind(int op) const { return kind_[static_cast<std::size_t>(op)]; }
  /// Bytes the op allocates (> 0) or frees (< 0) on its device (plan/semantics.hpp's memory rules).
  [[nodiscard]] std::int64_t memory_change(int op) const { return mem_[static_cast<std::size_t>(op)]; }
  [[nodiscard]] bool split() const { return split_; }
  [[nodiscard]] int devices() const { return devices_; }
  [[nodiscard]] int stages() const { return static_cast<int>(stage_device_.size()); }
  [[nodiscard]] int microbatches() const { return M_; }
  /// The number of present ops.
  [[nodiscard]] int ops() const { return ops_; }

  /// fn(from, delay) for each data predecessor of `op`.
  template <class Fn>
  void for_each_pred(int op, Fn&& fn) const {
    for (int i = pred_begin_[static_cast<std::size_t>(op)]; i < pred_begin_[static_cast<std::size_t>(op) + 1];
         ++i)
      fn(pred_[static_cast<std::size_t>(i)].first, pred_[static_cast<std::size_t>(i)].second);
  }
  /// fn(to, delay) for each data successor of `op`.
  template <class Fn>
  void for_each_succ(int op, Fn&& fn) const {
    for (int i = succ_begin_[static_cast<std::size_t>(op)]; i < succ_begin_[static_cast<std::size_t>(op) + 1];
         ++i)
      fn(succ_[static_cast<std::size_t>(i)].first, succ_[static_cast<std::size_t>(i)].second);
  }
  [[nodiscard]] int pred_count(int op) const {
    return pred_begin_[static_cast<std::size_t>(op) + 1] - pred_begin_[static_cast<std::size_t>(op)];
  }

 private:
  std::vector<int> stage_device_;
  int devices_ = 1, M_ = 1, ops_ = 0;
  bool split_;
  std::vector<std::uint8_t> present_;
  std::vector<double> dur_;
  std::vector<OpKind> kind_;
  std::vector<std::int64_t> mem_;
  std::vector<int> pred_begin_, succ_begin_;
  std::vector<std::pair<int, double>> pred_, succ_;
};

/// One schedule as op ids per device, with its timing (filled by time_order).
struct TimedOrder {
  std::vector<std::vector<int>> order;  ///< per device
  std::vector<double> start;            ///< per op id: earliest start (head)
  std::vector<int> topo;                ///< a topological order of data + device edges
  double makespan = 0;
};

/// Throws octo::Error for a malformed problem (no stages, sizes that do not match, devices out of
/// range); `who` names the caller in the message.
void check_problem(const ListScheduleProblem& problem, std::string_view who);

/// True unless some op of `programs` is a fused BW.
[[nodiscard]] bool splits_backward(const Programs& programs);

/// `programs` (comm ops are skipped) as op ids of `g` into `t.order`, timed. Returns why it cannot
/// be (an op missing, repeated or on the wrong device, a cycle through the devices), or empty.
[[nodiscard]] std::string order_of(const OpGraph& g, const Programs& programs, TimedOrder& t);

/// A whole-order scheduler's start: the op graph of `problem` (split as `start` is) and `start` as
/// its ids, timed; `infeasible` says why `start` cannot be (order_of), or is empty.
struct StartOrder {
  OpGraph graph;
  TimedOrder timed;
  std::string infeasible;
};

/// check_problem (throws, naming `who`), then the graph and the timed start order of `start`.
[[nodiscard]] StartOrder start_order(const ListScheduleProblem& problem, const Programs& start,
                                     std::string_view who);

/// Times `t.order` as early as it allows; false on a cycle through the devices.
bool time_order(const OpGraph& g, TimedOrder& t);

/// Per op id: the longest path from the op's start to the end of the schedule `t` (timed) under
/// its device orders, the op's own duration included. head + tail = makespan on the critical path.
[[nodiscard]] std::vector<double> tails(const OpGraph& g, const TimedOrder& t);

/// Latest starts that keep `t`'s makespan under its device orders (makespan − tail).
[[nodiscard]] std::vector<double> latest_starts(const OpGraph& g, const TimedOrder& t);

/// One critical path of `t` (timed, `tail` from tails()): ops from time 0 to the makespan, each
/// starting exactly when its predecessor on the path (by data or by device) has delivered.
[[nodiscard]] std::vector<int> critical_path(const OpGraph& g, const TimedOrder& t,
                                             const std::vector<double>& tail);

/// Per device, the most activation bytes `t.order` holds at once (OpGraph::memory_change summed
/// along the device's order).
[[nodiscard]] std::vector<std::int64_t> activation_peaks(const OpGraph& g, const TimedOrder& t);

/// The compute-only programs of `t.order`.
[[nodiscard]] Programs programs_of(const OpGraph& g, const TimedOrder& t);

}  // namespace octo
