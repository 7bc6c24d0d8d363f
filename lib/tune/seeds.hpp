#pragma once
/// The search's starting points (DESIGN.md "Tuner" (1) and (2)): partitions and placements for
/// S = k·p stages (k = 1, 2, 3, 4, 6, 8: sequential, interleaved and wave maps with per-device
/// balanced partitions — plain, warm-up aware, under static memory caps, re-placed for balance —
/// and warm-up ramps), for one stage per layer (cyclic and greedily balanced maps, and around a
/// heavy last layer the head run of lowest structure bound, tune/head_run.hpp) and, for every
/// multiple of p up to 12·p, the maps of lowest map bound (descend_map from the sequential, wave and
/// interleaved maps, tune/map_search.hpp) whose structure bound is below that of every fixed shape
/// of as many or fewer stages (their seeds start the local search after the others'),
/// ranked within each stage count by their structure bound (sim/lower_bound.hpp: no schedule of the structure
/// is faster) after the static memory over the limit; then the list-scheduler settings the seeds start with.

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "cost/inputs.hpp"
#include "tune/batch.hpp"
#include "tune/candidate.hpp"
#include "tune/incumbent.hpp"

namespace octo {

/// A partition + placement + recompute choice.
struct Structure {
  std::vector<int> ends, device;
  std::vector<std::uint8_t> recompute;
  double bound_ms = 0;        ///< its structure bound (no recompute)
  bool map_searched = false;  ///< found by the map search (descend_map), not a fixed shape
};

/// The most promising structures of every stage count, best first within each count, the stage
/// counts in ascending order; once `stop` (when given) returns true, no further stage count is
/// started (the first is always built).
[[nodiscard]] std::vector<Structure> seed_structures(const PlannerInputs& inputs, const Evaluator& evaluator,
                                                     std::span<const double> layer_work,
                                                     const std::function<bool()>& stop = {});

/// Recompute flags for `st`: everywhere when `all`; else on the stages of the devices whose free
/// memory under the evaluator's limit holds fewer than two micro-batches of activations.
[[nodiscard]] std::vector<std::uint8_t> recompute_where_needed(const Structure& st, bool all,
                                                               const PlannerInputs& inputs,
                                                               const Evaluator& evaluator);

/// The candidate of a structure, with the list scheduler's default options.
[[nodiscard]] Candidate candidate_of(const Structure& st);

/// `st` and, under a memory limit, its recompute variants: where needed (when that differs from
/// `st`) and everywhere.
[[nodiscard]] std::vector<Structure> recompute_variants(const Structure& st, const PlannerInputs& inputs,
                                                        const Evaluator& evaluator);

/// Phase A of the seeds: every structure (with the recompute variants memory calls for) under five
/// scheduler presets (split or fused backward, reserve or greedy admission; fused forward-first
/// reserve when without_w), and as the explicit
/// op order of every registered schedule (sched/schedule.hpp) written for its placement.
/// `owner[i]` is the index of candidate i's variant.
[[nodiscard]] std::vector<Candidate> preset_candidates(const std::vector<Structure>& structures,
                                                       const PlannerInputs& inputs,
                                                       const Evaluator& evaluator, std::vector<int>& owner);

/// Phase B: the full grid of scheduler options (split, F order, admission, in-flight limit, B
/// order; forward-first when `forward_first`) for one partition + placement + recompute choice.
[[nodiscard]] std::vector<Candidate> option_grid(const Candidate& c, int devices, bool forward_first = false);

/// True when no layer has weight-gradient (W) time: profiles with B and W fused (w_ms 0), where no
/// W can fill bubbles and the search also tries forward-first list schedules.
[[nodiscard]] bool without_w(const PlannerInputs& inputs);

/// The seed phase: evaluates phase A (preset_candidates of seed_structures), then, unless the
/// budget is spent, phase B (option_grid) for the best four variants of A, offering every
/// evaluated seed to `offer`. Returns the evaluated seeds, best first, one per partition +
/// placement (none when the budget ended after phase A).
[[nodiscard]] std::vector<Scored> run_seeds(const PlannerInputs& inputs, const Evaluator& evaluator,
                                            std::span<const double> layer_work, BatchEvaluator& batch,
                                            Budget& budget, const std::function<void(const Scored&)>& offer);

}  // namespace octo
