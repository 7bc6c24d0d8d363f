#pragma once
/// The typed run report: what `octorun PLAN --report R` measured running a plan, beside the plan's
/// prediction. octorun writes it (exec/train.cpp), `octoplan accuracy` reads it (sim/accuracy.hpp);
/// one to_json / run_report_from_json pair is the format. Units: times in ms unless a name ends in
/// `_us`, sizes in bytes (core/units.hpp).

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "plan/plan.hpp"
#include "plan/prediction.hpp"

namespace octo {

/// One rank's medians over the measured steps.
struct RankMeasurement {
  int rank = 0;
  int device = 0;   ///< pipeline device (plan/rank_layout.hpp: floor(rank / (tp·dp)))
  int replica = 0;  ///< data-parallel rank (floor(rank / tp) mod dp)
  double busy_ms = 0;
  double idle_ms = 0;                      ///< pipeline time − busy
  double wait_ms = 0;                      ///< blocked on transfers
  double overhead_ms = 0;                  ///< runtime time outside compute and waits
  double allreduce_ms = 0;                 ///< data-parallel gradient all-reduce
  double start_delay_ms = 0;               ///< Σ of compute ops' starts after they could have started
  std::int64_t peak_activation_bytes = 0;  ///< device memory above the step's start at its peak
  int ops = 0;
  friend bool operator==(const RankMeasurement&, const RankMeasurement&) = default;
};

/// Mean time of each compute op kind of one stage over the measured steps and all replicas.
struct StageOpTimes {
  int stage = 0;
  /// By kComputeKinds (plan/plan.hpp); empty where the kind did not run.
  std::array<std::optional<double>, kComputeKinds.size()> ms;

  [[nodiscard]] std::optional<double> of(OpKind kind) const;
  void set(OpKind kind, double value);
  friend bool operator==(const StageOpTimes&, const StageOpTimes&) = default;
};

/// What the runtime measured (exec/report.hpp describes each figure).
struct Measurement {
  int steps = 0;
  int measured_steps = 0;
  double iteration_time_ms = 0;  ///< step wall time, slowest rank (with all-reduce and optimizer)
  double pipeline_time_ms = 0;   ///< first op start to last op end: the simulator's iteration
  double bubble_ratio = 0;
  double tokens_per_s = 0;
  double overhead_us_per_op = 0;
  double progress_us_per_op = 0;
  double start_delay_ratio = 0;
  std::vector<RankMeasurement> ranks;
  std::vector<StageOpTimes> stage_ms;  ///< one per stage
  std::vector<double> loss;            ///< per step (NaN where it was not finite)
  friend bool operator==(const Measurement&, const Measurement&) = default;
};

/// The plan re-simulated with the measured per-stage op times, or why it could not be.
struct Resimulation {
  struct Device {
    int device = 0;
    double busy_ms = 0;
    double idle_ms = 0;
    friend bool operator==(const Device&, const Device&) = default;
  };
  double iteration_time_ms = 0;
  double bubble_ratio = 0;
  double tokens_per_s = 0;
  std::vector<Device> devices;
  std::string error;  ///< non-empty: the resimulation failed (the figures above are unset)
  friend bool operator==(const Resimulation&, const Resimulation&) = default;
};

/// `octorun --check`: gradients of the first step against the sequential reference.
struct GradientCheckSummary {
  double max_relative_difference = 0;
  int worst_layer = -1;
  std::vector<double> layer_relative_difference;
  double loss = 0;
  double reference_loss = 0;
  double loss_relative_difference = 0;
  double tolerance = 0;
  bool passed = false;
  friend bool operator==(const GradientCheckSummary&, const GradientCheckSummary&) = default;
};

/// One rank's memory: what the executor holds, counted from its tensors, beside the plan's
/// prediction for the rank's pipeline device (every rank of a device holds the same share: the
/// planner's figures are per TP / EP shard). Bytes, at the executor's dtype.
struct RankMemory {
  int rank = 0;
  int device = 0;
  std::int64_t weight_bytes = 0;     ///< Σ the layers' parameter value buffers (its TP / EP shards)
  std::int64_t gradient_bytes = 0;   ///< Σ the layers' gradient buffers (whole also at ZeRO 1)
  std::int64_t optimizer_bytes = 0;  ///< AdamW's moments it holds (its ZeRO-1 shard)
  /// Device memory in use when a step starts beyond the three above (buffers layers keep between
  /// steps, e.g. attention's RoPE tables).
  std::int64_t other_bytes = 0;
  std::int64_t peak_activation_bytes = 0;  ///< high-water mark of the op walk above its start
  std::int64_t peak_bytes = 0;             ///< in use at the start + peak_activation_bytes
  std::int64_t predicted_static_bytes = 0;
  std::int64_t predicted_peak_activation_bytes = 0;
  std::int64_t predicted_peak_bytes = 0;
  [[nodiscard]] std::int64_t static_bytes() const {
    return weight_bytes + gradient_bytes + optimizer_bytes + other_bytes;
  }
  friend bool operator==(const RankMemory&, const RankMemory&) = default;
};

/// The executor's memory per rank and the plan's prediction in the same units.
struct MemoryComparison {
  std::string executor_dtype = "fp32";  ///< what the executor's tensors are (nn/device.hpp)
  std::string plan_dtype;               ///< the model's training dtype the plan was priced at
  /// The prediction was re-priced at the executor's dtype (the dtypes differ): static bytes from the
  /// plan's parameter counts, activations scaled by the ratio of the element sizes.
  bool repriced = false;
  std::vector<RankMemory> ranks;
  friend bool operator==(const MemoryComparison&, const MemoryComparison&) = default;
};

struct RunReport {
  static constexpr const char* kCommand = "octorun";
  std::string plan;  ///< the plan file that ran
  std::string method;
  std::string model;
  std::string backend;
  std::string transport;
  int world_size = 0;
  int devices = 0;
  int dp = 1;
  int stages = 0;
  int microbatches = 0;
  int micro_batch = 1;
  std::int64_t seq = 0;
  std::uint64_t seed = 1;
  double lr = 0;
  int warmup_steps = 0;
  Measurement measured;
  std::optional<Prediction> predicted;  ///< the plan's, as stored in it (null when it had none)
  Resimulation predicted_with_measured_costs;
  std::optional<GradientCheckSummary> check;  ///< with --check
  std::optional<MemoryComparison> memory;     ///< "memory" (optional on reading: older reports)
  friend bool operator==(const RunReport&, const RunReport&) = default;
};

/// The report file's JSON: {"command": "octorun", "plan", "method", "model", "backend",
/// "transport", "world_size", "devices", "dp", "stages", "microbatches", "micro_batch", "seq",
/// "seed", "lr", "warmup_steps", "measured": {...}, "predicted": {...} | null,
/// "predicted_with_measured_costs": {...} | {"error"}, "check"?: {...}, "memory"?: {"executor_dtype",
/// "plan_dtype", "repriced", "ranks": [{"rank", "device", "weight_bytes", "gradient_bytes",
/// "optimizer_bytes", "other_bytes", "static_bytes", "peak_activation_bytes", "peak_bytes",
/// "predicted_static_bytes", "predicted_peak_activation_bytes", "predicted_peak_bytes"}]}}.
[[nodiscard]] nlohmann::json to_json(const RunReport& report);

/// The "measured" and "predicted_with_measured_costs" sections alone (as in the report).
[[nodiscard]] nlohmann::json to_json(const Measurement& measurement);
[[nodiscard]] nlohmann::json to_json(const Resimulation& resimulation);

/// Reads a run report; `source` names the file in messages (octo::InputError with the JSON path).
/// Every key is required except "check" and "memory"; unknown keys are errors; a file of another command
/// (an `octoplan ... --report`) is refused by its "command".
[[nodiscard]] RunReport run_report_from_json(const nlohmann::json& j, const std::string& source);

}  // namespace octo
