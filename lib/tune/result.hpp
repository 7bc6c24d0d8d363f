#pragma once
/// The tuned plan as the user gets it: completed with its embedded inputs and method, checked
/// (structure, deadlock freedom), simulated against the user's memory limit, with its prediction,
/// its lower bounds and its row in the comparison table.

#include "cost/inputs.hpp"
#include "sim/lower_bound.hpp"
#include "tune/candidate.hpp"
#include "tune/tuner.hpp"

namespace octo {

/// Fills result.plan's inputs, predicted report and bounds, result.sim, result.bounds,
/// result.summary and the speed-up. result.plan holds the lowered plan (a search result or the
/// baseline kept); `search_limit` is the limit it was made under (check), `inputs` carry the
/// user's. Throws octo::Error (internal error) when the plan does not pass the check.
void complete_result(TuneResult& result, const PlannerInputs& inputs, const Evaluator& evaluator,
                     const LowerBound& any_plan, double search_limit);

}  // namespace octo
