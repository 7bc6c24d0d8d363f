#pragma once
/// The baselines a tuning run compares with and starts from (DESIGN.md "Tuner": the result is
/// never worse than the best baseline it evaluated): the ten schedules of sched/baseline.hpp. A
/// framework user whose run does not fit turns recompute on, so unless no plan can fit at all
/// (static memory alone exceeds the limit) the baselines may recompute to fit; each such baseline
/// also records its time without recompute.

#include <functional>
#include <string>
#include <vector>

#include "cost/inputs.hpp"
#include "sched/baseline.hpp"
#include "tune/tuner.hpp"

namespace octo {

struct BaselineField {
  std::vector<BaselineRun> runs;         ///< in baseline_methods() order
  std::vector<MethodSummary> summaries;  ///< one per run
  int best = -1;                         ///< the fastest baseline that fits, or -1
  int fastest = -1;                      ///< the fastest baseline, or -1
  bool recompute_to_fit = false;         ///< baselines were allowed to recompute to fit

  /// The baseline the search must beat: the best that fits, else the fastest.
  [[nodiscard]] const BaselineRun* incumbent() const;
  [[nodiscard]] const BaselineRun* fastest_run() const;
};

/// Runs the baselines. `can_fit`: some plan can fit the memory limit (else no recompute to fit).
/// `stop` (the search's wall-clock cap, an interrupt): the baselines after it are not built.
[[nodiscard]] BaselineField run_baseline_field(const PlannerInputs& inputs, bool can_fit,
                                               const std::function<bool()>& stop = {});

/// Predicted iteration time and peak memory of a baseline run (0 when it did not run).
[[nodiscard]] double iteration_ms(const BaselineRun& run);
[[nodiscard]] double peak_bytes(const BaselineRun& run);

}  // namespace octo
