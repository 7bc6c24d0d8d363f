#pragma once
/// Proven lower bounds on the iteration time (the simulated makespan), so that every prediction
/// says how far it is from the best possible plan (README "Lower bounds" has the derivation).
///
/// - any_plan_lower_bound: no plan of these inputs — any partition into contiguous stages, any
///   stage → device map (devices may hold many stages, or none), any op order, fused or split
///   backward, with or without recompute — runs faster. It is the largest of: total work over the
///   devices; the critical path of one micro-batch; the layer granularity (layers are indivisible,
///   so the busiest device carries the best possible packing of whole layers); the warm-up before
///   a device's first forward and the cool-down after its last backward, packed together with the
///   granularity; the wait for the first backward to reach a device; every layer's work inside
///   every window of release and tail times (layer_windows), and one assignment of whole layers to
///   the device ranks for all windows at once, each rank's windows shortened by its ramps
///   (window_ramps, sim/window_assignment.hpp); and one assignment of whole layers to the devices
///   under which every device, as one machine, fits each layer's work inside that layer's window
///   (layer_suffix, sim/suffix_packing.hpp). It is taken at the number of
///   devices actually used that minimises it, so it also holds for plans that leave devices empty.
/// - structure_lower_bound: no schedule of one partition + placement + recompute choice runs
///   faster: the critical path of one micro-batch, and per device a one-machine relaxation of its
///   ops with release times (longest path to them) and tails (longest path after them), each op
///   with those of its rank among its stage's ops of one kind (the k-th to start waits for k + 1
///   micro-batches through the op before it and for the k ops of its stage before it).
///
/// Both ignore memory (a limit only removes plans) and link contention (transfers only delay), so
/// they may be loose, never wrong; test/unit/sim/bound_test.cpp checks them against many plans.

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "plan/plan.hpp"
#include "sim/sim_input.hpp"

namespace octo {

/// One argument of a bound and the time it proves.
struct BoundTerm {
  std::string name;  ///< "work", "granularity", "critical_path", "warm_up", ...
  double ms = 0;
};

struct LowerBound {
  double ms = 0;                 ///< the largest term
  std::string binding;           ///< the name of the largest term
  std::vector<BoundTerm> terms;  ///< every term computed
  /// any_plan_lower_bound: the used-device count the bound is taken at (the minimum over counts);
  /// structure_lower_bound: the device whose one-machine bound is the largest (-1: the path).
  int devices = 0;
};

/// The per-layer view of a plan's inputs: a copy of `plan` with one single-layer stage per model
/// layer (all on device 0, no programs). make_sim_input of it gives the per-layer costs and the
/// link matrix; any_plan_input below is what any_plan_lower_bound reads. The layer count is the
/// end of the last stage.
[[nodiscard]] Plan layer_plan(const Plan& plan);

/// The input of any_plan_lower_bound for the inputs of `plan`: the layer plan built by `make` (one
/// of the make_sim_input overloads) with every layer on each pipeline device in turn, and per layer
/// the least of each time over those positions — forward, backward, weight gradient and recompute
/// (with the EP all-to-alls in them), the bandwidth and latency parts of the DP reduction and of
/// the ZeRO-1 gather — and the least total optimizer step. The all-to-alls and reductions run on
/// the links of the device's EP and DP groups, which differ between devices whose groups straddle
/// nodes and others', and a plan can put a layer anywhere but never where it costs less than at its
/// cheapest position (pricing every layer on device 0 put the bound above simulated plans whose
/// device 0 had the slowest data-parallel link).
[[nodiscard]] SimInput any_plan_input(const Plan& plan, const std::function<SimInput(const Plan&)>& make);
/// any_plan_input with make_sim_input(·, inputs).
[[nodiscard]] SimInput any_plan_input(const Plan& plan, const PlannerInputs& inputs);
/// any_plan_input from the inputs the plan embeds (parsed once), `memory_limit_gib` as in make_sim_input.
[[nodiscard]] SimInput any_plan_input(const Plan& plan, double memory_limit_gib = 0);

/// The bound over every plan with `layers.devices` pipeline devices and `microbatches`
/// micro-batches. `layers.stages` holds one entry per model layer (any_plan_input); links,
/// op overhead and devices come from `layers` too. Throws octo::Error for an empty model.
[[nodiscard]] LowerBound any_plan_lower_bound(const SimInput& layers, int microbatches);

/// The cheap terms of any_plan_lower_bound only — total work, the critical path, the granularity
/// and the warm-up, each at every used-device count — for a search that ranks many inputs and
/// computes the full bound only where the ranking needs it: never above any_plan_lower_bound.
[[nodiscard]] LowerBound quick_lower_bound(const SimInput& layers, int microbatches);

/// The bound over every schedule of `stages` (partition, placement, recompute flags) with costs
/// `in` (in.stages: one per stage) and `microbatches` micro-batches: each of a device's ops has the
/// release and tail of its rank among its stage's ops of that kind (O(ops log ops)).
[[nodiscard]] LowerBound structure_lower_bound(const std::vector<Stage>& stages, int microbatches,
                                               const SimInput& in);

/// The same relaxation with a stage's ops of one kind merged into one job (rank 0's release and
/// tail; O(stages log stages)), for the search's pruning of every candidate: never above
/// structure_lower_bound.
[[nodiscard]] LowerBound quick_structure_lower_bound(const std::vector<Stage>& stages, int microbatches,
                                                     const SimInput& in);

/// Both bounds of one plan.
struct PlanBounds {
  LowerBound any_plan;
  LowerBound structure;
};

/// The bounds of `plan` where its any-plan bound is known (it depends only on the inputs, so a caller
/// that bounds many plans of one model computes it once): `in` is the plan's simulator input. The
/// structure bound is at least the any-plan bound (term "any_plan" where that is larger: the DP tail).
[[nodiscard]] PlanBounds plan_bounds(const Plan& plan, const SimInput& in, const LowerBound& any_plan);
/// The bounds of `plan`: `in` is its simulator input, `layers` any_plan_input(plan, ...).
[[nodiscard]] PlanBounds plan_bounds(const Plan& plan, const SimInput& in, const SimInput& layers);
/// Same, with both inputs built from loaded planner inputs (make_sim_input).
[[nodiscard]] PlanBounds plan_bounds(const Plan& plan, const PlannerInputs& inputs);
/// Same, from the inputs embedded in the plan; `memory_limit_gib` as in make_sim_input.
[[nodiscard]] PlanBounds plan_bounds(const Plan& plan, double memory_limit_gib = 0);

/// What a report says of an any-plan bound: its binding term, and the used-device count it is taken
/// at when that is below the plan's pipeline devices (e.g. "work, at 1 of 34 devices": where the
/// transfers and per-op overheads outweigh the work, fewer devices would be faster, and the gap to
/// a plan on all of them is no search failure).
[[nodiscard]] std::string any_plan_reason(std::string_view binding, int devices_used, int pipeline_devices);

/// The gap iteration_ms / bound_ms − 1 of every report; 0 without a bound (bound_ms <= 0). A plan
/// at its bound within rounding (relative 1e-9 below it) has gap 0, printed 0.0 %, not −0.0 %.
[[nodiscard]] double bound_gap(double iteration_ms, double bound_ms);

/// Sets the bound figures of a prediction (Plan::predicted, and through to_json the --report JSON
/// of simulate / check): lower_bound_ms, gap (= iteration_time_ms / lower_bound_ms − 1),
/// structure_lower_bound_ms, structure_gap and the derivations of both bounds. Reads
/// iteration_time_ms from `prediction`.
void add_lower_bounds(Prediction& prediction, const PlanBounds& bounds);

/// "lower bound 123.4 ms (gap 2.1 %; this partition and placement: 120.0 ms, 3.5 %)", or empty when the
/// prediction has no bound.
[[nodiscard]] std::string describe_lower_bounds(const Prediction& prediction);

}  // namespace octo
