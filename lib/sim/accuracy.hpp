#pragma once
/// Simulator accuracy: a plan's prediction beside what `octorun PLAN --report R` measured when it
/// ran that plan. The prediction is the simulator's (the plan re-simulated with its embedded
/// inputs); the measured side is the run report's (plan/run_report.hpp) measurement:
///   iteration time   predicted makespan vs measured pipeline_time_ms (first op start to last op
///                    end over all ranks, the simulator's definition of one iteration); the
///                    measured step wall time (with the gradient all-reduce and the optimizer,
///                    which the simulator does not model) is shown beside it without an error;
///   busy time        per pipeline device: Σ compute op time (replicas averaged);
///   bubble ratio     1 − Σ busy / (devices × iteration time); its error is in percentage points;
///   peak memory      per device: static (parameter state as the plan defines it, lib/plan/CONTRACTS.md
///                    "Memory") + peak activations; measured activations are the device memory
///                    above the step's start at its peak (the most of any replica), so both sides
///                    share the static part and its definition.
/// Relative errors are (predicted − measured) / measured: positive when the plan over-predicts.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "plan/plan.hpp"
#include "plan/run_report.hpp"
#include "sim/simulator.hpp"

namespace octo {

/// One compared figure.
struct AccuracyRow {
  enum class Metric : std::uint8_t { IterationTime, StepTime, Busy, Bubble, PeakMemory, PeakActivation };
  Metric metric = Metric::IterationTime;
  int device = -1;  ///< pipeline device of a per-device row; -1 for whole-iteration figures
  double predicted = 0;
  double measured = 0;
  /// Relative error in % ((predicted − measured) / measured × 100), or for the bubble ratio the
  /// difference in percentage points. NaN when it is undefined (nothing measured; no prediction).
  double error = 0;
  bool has_prediction = true;  ///< false for figures the simulator does not model (StepTime)
};

/// "iteration time", "busy time", ... as printed and written.
[[nodiscard]] std::string_view to_string(AccuracyRow::Metric metric);
/// The unit of a row's values: ms, % (bubble) or bytes.
[[nodiscard]] std::string_view unit_of(AccuracyRow::Metric metric);

/// Mean time of one compute op kind of one stage: the plan's cost (with the per-op overhead)
/// against the run's mean (the report's measured.stage_ms). Shows which ops the costs miss.
struct StageOpRow {
  int stage = 0;
  OpKind kind = OpKind::F;
  double predicted_ms = 0;
  double measured_ms = 0;
  double error = 0;  ///< relative, %
};

struct AccuracyComparison {
  std::string plan_source, report_source;
  std::string model, method;
  int devices = 0, dp = 1, microbatches = 0, measured_steps = 0;
  std::vector<AccuracyRow> rows;
  /// Per stage and op kind (empty when the report has no stage_ms or no SimInput was given).
  std::vector<StageOpRow> stage_ops;
  /// Σ over ops of predicted vs measured op time (the plan's op counts): the part of the
  /// iteration-time error that comes from the op costs rather than the schedule and transport.
  double op_time_error = 0;
  /// Largest absolute errors by figure (%, bubble in points); NaN when there is no such row.
  double iteration_error = 0;
  double busy_error = 0;
  double bubble_error_points = 0;
  double memory_error = 0;
  double activation_error = 0;
  /// Things the reader should know (the report was made from a different plan version, ...).
  std::vector<std::string> notes;
};

/// Throws octo::Error naming both files unless `report` describes a run of `plan`: its pipeline
/// devices, replicas, ranks, stages, micro-batches, micro-batch size, sequence length and model.
void check_report_belongs(const Plan& plan, const RunReport& report, const std::string& plan_source,
                          const std::string& report_source);

/// Compares `predicted` (the simulation of `plan` with `input`) with the run report. Throws
/// octo::InputError naming `report_source` and the JSON path for a figure that does not fit the plan
/// (a device it lacks, stage times of another stage count), and octo::Error when the report does
/// not belong to the plan (pipeline devices, data-parallel size, stages, micro-batches or their
/// shape, model differ).
[[nodiscard]] AccuracyComparison compare_run(const Plan& plan, const SimInput& input,
                                             const SimResult& predicted, const RunReport& report,
                                             const std::string& plan_source,
                                             const std::string& report_source);

/// Same, reading the report from its JSON first (run_report_from_json: its errors are located).
[[nodiscard]] AccuracyComparison compare_run(const Plan& plan, const SimInput& input,
                                             const SimResult& predicted, const nlohmann::json& report,
                                             const std::string& plan_source,
                                             const std::string& report_source);

/// Same, re-simulating `plan` with its embedded inputs (sim_input.hpp).
[[nodiscard]] AccuracyComparison compare_run(const Plan& plan, const RunReport& report,
                                             const std::string& plan_source,
                                             const std::string& report_source);

/// The comparison as JSON: plan, report, model, method, devices, dp, microbatches,
/// measured_steps, rows [{metric, device?, unit, predicted, measured, error, error_unit}],
/// stage_ops [{stage, op, predicted_ms, measured_ms, error_pct}],
/// summary {iteration_time_error_pct, max_busy_error_pct, bubble_error_points,
/// max_peak_memory_error_pct, max_peak_activation_error_pct, op_time_error_pct}, notes.
[[nodiscard]] nlohmann::json accuracy_json(const AccuracyComparison& comparison);

/// The side-by-side table as printed by `octoplan accuracy`.
[[nodiscard]] std::string accuracy_table(const AccuracyComparison& comparison);

}  // namespace octo
