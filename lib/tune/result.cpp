#include "tune/result.hpp"

#include <cmath>

#include "core/error.hpp"
#include "sim/check.hpp"
#include "sim/predict.hpp"
#include "sim/sim_input.hpp"

namespace octo {

void complete_result(TuneResult& result, const PlannerInputs& inputs, const Evaluator& evaluator,
                     const LowerBound& any_plan, double search_limit) {
  const auto devices = static_cast<std::size_t>(inputs.pp);
  evaluator.complete(result.plan, "octopipe");
  result.plan.predicted.reset();
  SimInput sim_input = make_sim_input(result.plan, inputs);
  sim_input.memory_limit_bytes.assign(devices, static_cast<std::int64_t>(std::llround(search_limit)));
  const CheckResult check = check_plan(result.plan, sim_input);
  if (!check.structure_ok || !check.deadlock_free)
    fail("tuner: internal error: the tuned plan does not pass the check: {}",
         check.problems.empty() ? std::string("?") : check.problems.front());
  // Metrics against the user's limit (the plan file reports what the user will see).
  sim_input.memory_limit_bytes.assign(devices,
                                      static_cast<std::int64_t>(std::llround(inputs.memory_limit_bytes)));
  result.sim = simulate(result.plan, sim_input);
  result.plan.predicted = predict(result.sim, result.plan);
  result.bounds = plan_bounds(result.plan, sim_input, any_plan);
  add_lower_bounds(*result.plan.predicted, result.bounds);
  result.summary = summarize("octopipe", result.plan);
  if (result.best_baseline_ms > 0 && result.sim.makespan_ms > 0)
    result.speedup_vs_best_baseline = result.best_baseline_ms / result.sim.makespan_ms;
}

}  // namespace octo
