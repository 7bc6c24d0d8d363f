#pragma once
/// What `octoplan plan` and `octoplan compare` print and write with --report: the tuned plan's
/// stages and devices, and the table of the tuned plan against the ten baselines.

#include <nlohmann/json.hpp>
#include <string>

#include "cost/inputs.hpp"
#include "tune/tuner.hpp"

namespace octo {

/// One progress line: "octoplan: [  3.2 s] local search: partition   best  1549.1 ms  bubble  6.2%  (1234
/// evaluations)".
[[nodiscard]] std::string format_progress(const TuneProgress& progress);

/// "" when the plan's ranks (pipeline devices x TP x DP) fill the cluster, else a line saying how
/// many of its devices stay idle and the --dp that would use them, as Megatron-LM derives DP from the
/// world size: "note: the plan uses 4 of the 8 devices of h100x8; --dp 2 would run a replica on the
/// rest\n".
[[nodiscard]] std::string idle_devices_note(const ClusterSpec& cluster, const Plan& plan);

/// Layer labels of [first, end) in compact form: "embedding M-M-M*"; long runs are shortened in
/// the middle.
[[nodiscard]] std::string stage_labels(const PlannerInputs& inputs, int first, int end);

/// The readable summary of a tuned plan: inputs, search, stages (layer ranges and labels, device,
/// work per micro-batch), devices (stages, busy/idle, peak memory vs limit), iteration time,
/// bubble, tokens/s and the speed-up over the best baseline.
[[nodiscard]] std::string format_plan_summary(const PlannerInputs& inputs, const TuneResult& result);

/// The same figures as JSON (the --report of `octoplan plan`).
[[nodiscard]] nlohmann::json plan_summary_json(const PlannerInputs& inputs, const TuneResult& result);

/// One table: octopipe and every baseline (iteration time, bubble ratio, max peak memory and
/// whether it fits, tokens/s, speed-up of octopipe over it), skipped baselines with their reason,
/// and the speed-up over the best baseline.
[[nodiscard]] std::string format_comparison(const PlannerInputs& inputs, const TuneResult& result);

/// The comparison as JSON: {"model", "cluster", "devices", "microbatches", "memory_limit_bytes",
/// "methods": [{"name", "iteration_time_ms", "bubble_ratio", "peak_memory_bytes", "fits_memory",
/// "tokens_per_s", "recompute", "speedup"} or {"name", "skipped"}], "best_baseline",
/// "best_baseline_fits", "speedup_vs_best_baseline", "search": {...}}.
[[nodiscard]] nlohmann::json comparison_json(const PlannerInputs& inputs, const TuneResult& result);

}  // namespace octo
