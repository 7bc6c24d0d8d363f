#pragma once
/// One point of the tuner's search space — partition, placement, per-stage recompute and either
/// list scheduler options or an explicit op order — and its evaluation: list-schedule the compute
/// ops (or take the order as given), lower the comm ops (plan/lower.hpp), simulate the lowered plan
/// (sim/simulator.hpp). A candidate whose proven bound (sim/lower_bound.hpp) cannot beat the plan
/// it is compared with is pruned before any of that.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cost/inputs.hpp"
#include "plan/plan.hpp"
#include "sched/list_scheduler.hpp"
#include "sim/simulator.hpp"

namespace octo {

struct Candidate {
  std::vector<int> ends;                ///< stage ends (sched/partition.hpp)
  std::vector<int> device;              ///< stage → device
  std::vector<std::uint8_t> recompute;  ///< per stage (0/1)
  /// Scheduler options; activation_cap is filled in from the memory limit at evaluation.
  ListScheduleOptions schedule;
  /// Fraction of each device's free memory (limit − static) given to activations, (0, 1].
  double cap_scale = 1.0;
  /// An explicit compute-only op order (one list per device) that replaces the list scheduler,
  /// e.g. an improved order of the critical device; it belongs to this partition and placement,
  /// so a move that changes them starts from without_order().
  std::shared_ptr<const Programs> order;
  /// Where the order comes from: a registered schedule's name, or empty (the reorder moves).
  std::string order_name;

  [[nodiscard]] int stages() const { return static_cast<int>(ends.size()); }
  /// The same candidate, list-scheduled again.
  [[nodiscard]] Candidate without_order() const {
    Candidate c = *this;
    c.order.reset();
    c.order_name.clear();
    return c;
  }
  /// e.g. "12 stages wave, split B/W fill-idle oldest-first reserve, recompute 2/12".
  [[nodiscard]] std::string describe() const;
  friend bool operator==(const Candidate&, const Candidate&) = default;
};

/// Two candidates that are scheduled alike (an explicit order compared by its ops, not by pointer).
[[nodiscard]] bool same_schedule(const Candidate& a, const Candidate& b);

/// Two candidates of the same partition, placement and recompute choice (however scheduled).
[[nodiscard]] bool same_structure(const Candidate& a, const Candidate& b);

/// An explicit order's name with `tag` (what re-scheduled it) appended after ", ", unless the name
/// already ends with it; `tag` alone for an empty name.
[[nodiscard]] std::string with_order_tag(const std::string& name, std::string_view tag);

/// Relative tolerance of the tuner's comparisons of times: a makespan within it of another, or of a
/// bound, is no better (the simulator and the bounds sum the same times in other orders).
inline constexpr double kTimeTolerance = 1e-9;

/// `a_ms` is shorter than `b_ms` by more than kTimeTolerance.
[[nodiscard]] inline bool faster(double a_ms, double b_ms) { return a_ms < b_ms * (1 - kTimeTolerance); }

/// Compute ops of a plan of `stages` stages and `microbatches` micro-batches: F, B and W per stage
/// and micro-batch (a fused BW counts as two), the unit of the tuner's effort and size limits.
[[nodiscard]] inline std::int64_t compute_ops(int stages, int microbatches) {
  return static_cast<std::int64_t>(stages) * microbatches * 3;
}

/// Compute ops above which a serial re-scheduling of a structure's whole order (the slack moves,
/// O(ops log ops) per pass while a round's candidates are proposed; the elite's justification,
/// O(ops x ops per device) for each of 16 structures) is skipped: Nemotron-H-56B at PP 16 with 128
/// micro-batches has 36864 and would cost seconds.
inline constexpr std::int64_t kMaxReorderedOps = 20000;

/// What the search compares.
struct Evaluation {
  bool ok = false;      ///< scheduled and simulated
  bool pruned = false;  ///< not simulated: its lower bound already reached the bound asked for
  std::string problem;  ///< why not (infeasible memory, ...)
  double makespan_ms = 0;
  double bubble_ratio = 0;
  /// No schedule of this partition, placement and recompute choice is faster (the quick structure
  /// bound, sim/lower_bound.hpp: cheap enough for every candidate; reports give the full one).
  double structure_bound_ms = 0;
  bool fits_memory = false;
  std::int64_t max_peak_memory_bytes = 0;
  std::vector<double> busy_ms, idle_ms;  ///< per device
  std::vector<std::int64_t> peak_memory_bytes;
  std::vector<std::int64_t> static_bytes;
};

/// `e` reaches its structure bound within kTimeTolerance: no op order of its structure is faster.
[[nodiscard]] inline bool at_structure_bound(const Evaluation& e) {
  return e.makespan_ms <= e.structure_bound_ms * (1 + kTimeTolerance);
}

/// The evaluation fields of a simulation (ok, times, memory per device).
[[nodiscard]] Evaluation evaluation_of(const SimResult& result);

/// Evaluates candidates for one set of inputs. Thread-safe (const); each thread brings its own
/// Simulator.
class Evaluator {
 public:
  /// `memory_limit_bytes` per device (0 = unlimited).
  Evaluator(const PlannerInputs& inputs, int pp, int microbatches, double memory_limit_bytes);

  [[nodiscard]] int devices() const { return pp_; }
  [[nodiscard]] int microbatches() const { return m_; }
  [[nodiscard]] int layers() const { return static_cast<int>(inputs_.costs.layers.size()); }
  [[nodiscard]] const PlannerInputs& inputs() const { return inputs_; }
  [[nodiscard]] double memory_limit_bytes() const { return limit_; }

  /// The compute-only plan skeleton of a candidate (stages, sizes; no programs, no inputs).
  [[nodiscard]] Plan skeleton(const Candidate& c) const;
  /// The structure bound of a candidate's partition, placement and recompute choice
  /// (sim/lower_bound.hpp quick_structure_lower_bound): no schedule of it is faster.
  [[nodiscard]] double structure_bound_ms(const Candidate& c) const;
  /// The list-scheduling problem of a candidate (costs, transfers, recompute).
  [[nodiscard]] ListScheduleProblem problem(const Candidate& c, const SimInput& in) const;

  /// Schedules, lowers and simulates. `plan_out`, when given, receives the lowered plan. With
  /// `bound` > 0, a candidate that cannot beat it — its structure bound or its schedule's
  /// ideal-transfer makespan (both lower bounds of the simulated one) is >= bound — is returned
  /// pruned, without scheduling or without lowering and simulating. An explicit order that cannot
  /// run (a cycle through the devices) comes back with its problem, not as an error.
  [[nodiscard]] Evaluation evaluate(const Candidate& c, Simulator& sim, Plan* plan_out = nullptr,
                                    double bound = 0) const;

  /// What a candidate runs, as the whole-order schedulers (sched/slack_scheduler.hpp,
  /// sched/justify.hpp, sched/order_search.hpp) take it: its compute-only op order (list-scheduled,
  /// or its explicit order) and its list-scheduling problem. False, with `order` untouched, when
  /// the candidate cannot run.
  [[nodiscard]] bool compute_order(const Candidate& c, Simulator& sim, Programs& order,
                                   ListScheduleProblem& problem) const;

  /// Simulates an already complete (lowered) plan, e.g. a baseline.
  [[nodiscard]] Evaluation evaluate_plan(const Plan& plan, Simulator& sim) const;

  /// Fills the embedded inputs and identification fields of a plan made by evaluate().
  void complete(Plan& plan, const std::string& method) const;

 private:
  const PlannerInputs& inputs_;
  int pp_ = 1, m_ = 1;
  double limit_ = 0;
};

}  // namespace octo
