#pragma once
/// Baselines: the schedules users run today, on Megatron's uniform split or on a cost-balanced
/// split, turned into complete plans (stages, programs with SEND/RECV, embedded inputs and the
/// simulator's predicted metrics) so every OctoPipe plan can be compared with them on the same
/// costs.

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cost/inputs.hpp"
#include "plan/plan.hpp"

namespace octo {

enum class PartitionKind : std::uint8_t {
  Uniform,   ///< equal block counts, embedding on the first stage, LM head on the last
  Balanced,  ///< contiguous min-max split of F + B + W per layer
};

[[nodiscard]] std::string_view to_string(PartitionKind kind);
/// "uniform" | "balanced"; throws octo::Error otherwise.
[[nodiscard]] PartitionKind parse_partition_kind(std::string_view text);

struct BaselineOptions {
  std::string schedule = "1f1b";  ///< registry name (sched/schedule.hpp)
  PartitionKind partition = PartitionKind::Uniform;
  int chunks = 0;        ///< stages per device; 0: the schedule's default
  int pp = 0;            ///< pipeline devices; 0: inputs.pp
  int microbatches = 0;  ///< 0: inputs.microbatches
};

/// Why `schedule` cannot run `chunks` stages per device ("1f1b runs one stage per device (got
/// --chunks 3; interleaved and zb-v run more)"), or nothing when it can. build_baseline refuses such
/// options with it; `octoplan baseline` reports it as a usage error, since the user chose both.
[[nodiscard]] std::optional<std::string> chunks_problem(std::string_view schedule, int chunks);

/// "<schedule>-<partition>", e.g. "interleaved-uniform", "zb-v-balanced".
[[nodiscard]] std::string method_name(const BaselineOptions& options);

/// The complete plan of one baseline: partition and placement, the schedule's programs (with R
/// before each B/BW when the model's recompute policy is `full`; `auto` recomputes only when the
/// plan would not fit the memory limit otherwise), comm ops inserted by the lowering pass with the
/// boundary bytes and per-stage durations of the costs, the embedded input texts, method
/// method_name(options), and `predicted` = the simulator's prediction (sim/predict.hpp). The plan is
/// validated and deadlock-checked before it is returned. Throws UnsupportedConfig (sched/schedule.hpp) when
/// the schedule or the partition cannot handle the configuration (e.g. more stages than blocks), and
/// octo::Error for anything else.
[[nodiscard]] Plan build_baseline(const PlannerInputs& inputs, const BaselineOptions& options);

/// build_baseline without the lower bounds (`predicted` has no lower_bound_ms, gap or
/// structure bound): for callers that need only the simulation, such as whether a configuration
/// fits the memory (tune/fit.hpp), where the any-plan bound of a large PP would cost far more than
/// the simulation (Nemotron-H-56B at PP 33 ... 64: about 1 s each).
[[nodiscard]] Plan build_baseline_unbounded(const PlannerInputs& inputs, const BaselineOptions& options);

/// The ten baselines of `octoplan compare`: gpipe, 1f1b, interleaved, zb-h1, zb-v, each with the
/// uniform and the balanced partition (in that order; chunks left to the schedule's default).
[[nodiscard]] std::vector<BaselineOptions> baseline_methods();

struct BaselineRun {
  BaselineOptions options;
  std::string method;
  std::optional<Plan> plan;  ///< empty when skipped
  std::string skipped;       ///< why the configuration cannot run (UnsupportedConfig message)
};

/// build_baseline for each of `methods` (default: baseline_methods()); configurations a schedule
/// cannot run are recorded with their reason instead of failing the whole comparison. Once `stop`
/// (when given) returns true after a plan was built, the remaining methods are recorded as not
/// built (a wall-clock cap: 10^6 micro-batches take seconds per baseline).
[[nodiscard]] std::vector<BaselineRun> run_baselines(
    const PlannerInputs& inputs, const std::vector<BaselineOptions>& methods = baseline_methods(),
    const std::function<bool()>& stop = {});

}  // namespace octo
