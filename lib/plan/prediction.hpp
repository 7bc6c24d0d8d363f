#pragma once
/// The typed prediction of a plan: what the simulator says one iteration takes and needs, stored
/// in the plan file as "predicted" (written by octoplan, checked by `octoplan check` and octorun,
/// copied into octorun's run report, compared with the measurement by `octoplan accuracy`).
/// One to_json / prediction_from_json pair reads and writes it; a new figure is a member plus one
/// line in each. Units: times in ms, sizes in bytes (core/units.hpp).

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/json_reader.hpp"

namespace octo {

/// One pipeline device's share of the prediction.
struct DevicePrediction {
  int device = 0;
  double busy_ms = 0;                      ///< Σ compute op durations
  double idle_ms = 0;                      ///< iteration time − busy
  double comm_ms = 0;                      ///< Σ SEND/RECV durations (overlaps compute)
  std::int64_t static_bytes = 0;           ///< weights, gradients, optimizer state
  std::int64_t peak_activation_bytes = 0;  ///< activations at their peak
  std::int64_t peak_memory_bytes = 0;      ///< static + peak activations
  std::int64_t memory_limit_bytes = 0;     ///< the limit the plan was made for; 0 = none
  /// Most (stage, micro-batch) activation sets alive at once (a device holding several stages
  /// counts each of them: this can exceed the number of micro-batches).
  int peak_live_microbatches = 0;
  friend bool operator==(const DevicePrediction&, const DevicePrediction&) = default;
};

/// How one lower bound was derived: its largest term, where it was taken and every term (ms).
struct BoundDerivation {
  std::string binding;  ///< the name of the largest term ("work", "critical_path", ...)
  /// Any-plan bound: the used-device count it is taken at ("devices_used" in the file);
  /// structure bound: the device of the largest one-machine bound ("device"; -1: the path).
  int devices = 0;
  std::map<std::string, double> terms;  ///< every term computed, by name
  friend bool operator==(const BoundDerivation&, const BoundDerivation&) = default;
};

/// The derivations of a plan's two lower bounds (sim/lower_bound.hpp).
struct LowerBoundDerivations {
  BoundDerivation any_plan;   ///< over every plan of the inputs
  BoundDerivation structure;  ///< over every schedule of this partition + placement
  friend bool operator==(const LowerBoundDerivations&, const LowerBoundDerivations&) = default;
};

/// What the parallelism around the pipeline costs (sim/simulator.hpp DeviceMetrics), the largest
/// figure over the pipeline devices; present only when the plan has DP or EP > 1.
struct ParallelFigures {
  double pipeline_end_ms = 0;  ///< end of the op lists; iteration_time_ms adds the DP tail
  double dp_comm_ms = 0;       ///< gradient reductions (+ ZeRO-1 all-gathers) of one device
  double optimizer_ms = 0;     ///< optimizer step of one device
  double ep_comm_ms = 0;       ///< EP all-to-alls inside one device's compute ops
  friend bool operator==(const ParallelFigures&, const ParallelFigures&) = default;
};

struct Prediction {
  double iteration_time_ms = 0;
  double bubble_ratio = 0;  ///< 1 − Σ busy / (devices × iteration time)
  double tokens_per_s = 0;
  bool fits_memory = true;  ///< every device's peak within its limit
  std::int64_t max_peak_memory_bytes = 0;
  std::int64_t ops = 0;  ///< ops simulated (compute + comm)
  std::vector<DevicePrediction> devices;
  std::vector<std::string> critical_path;  ///< its first ops, "dev 1: F mb3 s5"
  std::int64_t critical_path_length = 0;   ///< ops on the whole critical path
  /// A lower bound of the iteration time (ms), when the planner computed one (optional in the
  /// file: written only when set; the plot shows it and the gap to it).
  std::optional<double> lower_bound_ms;
  /// The bound figures sim/lower_bound.hpp add_lower_bounds sets (all of them or none; optional
  /// in the file): iteration_time_ms / lower_bound_ms − 1, the bound of this partition and
  /// placement and the gap to it, and how both bounds were derived.
  std::optional<double> gap;
  std::optional<double> structure_lower_bound_ms;
  std::optional<double> structure_gap;
  std::optional<LowerBoundDerivations> lower_bound;
  /// "parallel" in the file: {"pipeline_end_ms", "dp_comm_ms", "optimizer_ms", "ep_comm_ms"}.
  std::optional<ParallelFigures> parallel;
  friend bool operator==(const Prediction&, const Prediction&) = default;
};

/// {"iteration_time_ms", "bubble_ratio", "tokens_per_s", "fits_memory", "max_peak_memory_bytes",
/// "ops", "devices": [{"device", "busy_ms", "idle_ms", "comm_ms", "static_bytes",
/// "peak_activation_bytes", "peak_memory_bytes", "memory_limit_bytes", "peak_live_microbatches"}],
/// "critical_path", "critical_path_length", and when set "lower_bound_ms", "gap",
/// "structure_lower_bound_ms", "structure_gap", "lower_bound": {"binding", "devices_used", "terms":
/// {name: ms}, "structure": {"binding", "device", "terms"}}} — the plan file's "predicted" section.
[[nodiscard]] nlohmann::json to_json(const Prediction& prediction);

/// Reads a prediction at `path` (e.g. "predicted"); every key but the bound figures is required,
/// unknown keys are errors (octo::InputError naming the reader's file and the JSON path).
[[nodiscard]] Prediction prediction_from_json(const nlohmann::json& j, const JsonReader& reader,
                                              const std::string& path);

}  // namespace octo
