#include "tune/tuner.hpp"

#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <optional>

#include "core/error.hpp"
#include "sched/partition.hpp"
#include "sim/sim_input.hpp"
#include "tune/baselines.hpp"
#include "tune/budget.hpp"
#include "tune/memory_policy.hpp"
#include "tune/polish.hpp"
#include "tune/progress.hpp"
#include "tune/result.hpp"
#include "tune/search.hpp"

namespace octo {
namespace {

/// The share of the work budget set aside for the polish (tune/polish.hpp).
constexpr double kPolishShare = 0.02;

}  // namespace

TuneResult tune(const PlannerInputs& inputs_in, const TuneOptions& options) {
  const auto start = Budget::Clock::now();
  PlannerInputs inputs = inputs_in;
  if (options.pp > 0) inputs.pp = options.pp;
  if (options.microbatches > 0) inputs.microbatches = options.microbatches;
  if (options.memory_limit_bytes > 0) inputs.memory_limit_bytes = options.memory_limit_bytes;
  if (!(options.time_budget_s > 0) || !std::isfinite(options.time_budget_s))
    fail_usage("--time-budget: {} (expected a finite number of seconds > 0)", options.time_budget_s);
  if (!(options.wall_cap_s >= 0) || !std::isfinite(options.wall_cap_s))
    fail_usage("--wall-cap: {} (expected a finite number of seconds > 0)", options.wall_cap_s);
  const int p = inputs.pp, m = inputs.microbatches;
  const int layers = static_cast<int>(inputs.costs.layers.size());
  if (p < 1) fail("tuner: {} pipeline devices (expected at least 1)", p);
  if (m < 1) fail("tuner: {} micro-batches (expected at least 1)", m);
  if (layers != static_cast<int>(inputs.model.layers.size()))
    fail("tuner: the costs have {} layers but model {} has {}", layers, inputs.model.name,
         inputs.model.layers.size());
  if (p > layers)
    fail("tuner: {} pipeline devices but model {} has only {} layers (expected pp <= {})", p,
         inputs.model.name, layers, layers);

  TuneResult result;
  WorkerPool pool(options.threads);
  Budget budget(options, pool.threads(), start);
  Progress progress(options, budget);
  // What the budget amounts to (any budget is accepted), and how to end the search early.
  progress.report(
      fmt::format("search budget {} of work on the reference machine ({} threads), wall clock "
                  "capped at {}; Ctrl-C (SIGINT) or SIGTERM stops the search and keeps the best "
                  "plan found so far",
                  human_duration(options.time_budget_s), pool.threads(), human_duration(budget.wall_cap_s())),
      true, nullptr, 0);

  // 1. Baselines (the incumbent), and the bound of any plan (the search stops when it gets there).
  const bool can_fit = static_memory_can_fit(inputs);
  progress.report("building the baselines", true, nullptr, 0);
  BaselineField field = run_baseline_field(inputs, can_fit, [&] { return budget.out_of_time(); });
  result.stats.baselines_s = budget.elapsed_s();
  const BaselineRun* incumbent = field.incumbent();
  result.baselines_recompute_to_fit = field.recompute_to_fit;
  result.baselines = field.summaries;
  if (incumbent) {
    result.best_baseline = incumbent->method;
    result.best_baseline_fits = field.best >= 0;
    result.best_baseline_ms = iteration_ms(*incumbent);
  }
  SearchLimit limit{inputs.memory_limit_bytes, ""};
  if (!can_fit) limit = limit_when_static_exceeds(inputs, field.fastest_run());
  auto evaluator = std::make_unique<Evaluator>(inputs, p, m, limit.bytes);
  Candidate whole;
  whole.ends = {layers};
  whole.device = {0};
  const LowerBound any = any_plan_lower_bound(any_plan_input(evaluator->skeleton(whole), inputs), m);

  // 2./3. Seeds and local search; when nothing fits although the static memory would, once more
  //       under the peak of the fastest baseline.
  Simulator sim;
  Evaluation incumbent_eval;
  if (incumbent) incumbent_eval = evaluator->evaluate_plan(*incumbent->plan, sim);
  Search search(inputs, options, pool, budget, progress, any.ms);
  const double polish_units = budget.reserve(kPolishShare);
  search.run(*evaluator, incumbent_eval);
  if (can_fit && inputs.memory_limit_bytes > 0 && field.best < 0 &&
      !(search.incumbent().has() && search.incumbent().best().e.fits_memory)) {
    limit = limit_when_nothing_fits(inputs, field.fastest_run());
    evaluator = std::make_unique<Evaluator>(inputs, p, m, limit.bytes);
    if (incumbent) incumbent_eval = evaluator->evaluate_plan(*incumbent->plan, sim);
    budget.resume();
    search.run(*evaluator, incumbent_eval);
  }
  // 3b. The order search on the best plan, and the elite justified, kept when the simulator confirms it.
  std::optional<Scored> polished;
  if (search.incumbent().has() && !budget.out_of_time()) {
    const std::int64_t polish_ops = std::min(kMaxPolishOps, static_cast<std::int64_t>(polish_units));
    Polish pol = polish(search.incumbent().best(), *evaluator, polish_ops, options.seed);
    budget.charge_serial(static_cast<double>(pol.timed_ops + 3 * pol.evaluated_ops));
    polished = std::move(pol.better);
    const Polish elite = justify_elite(search.incumbent().elite(),
                                       polished ? *polished : search.incumbent().best(), *evaluator);
    budget.charge_serial(static_cast<double>(elite.timed_ops + 3 * elite.evaluated_ops));
    if (elite.better) {
      // The winner of another structure order-searched too (its own polish: it had none).
      Polish again = polish(*elite.better, *evaluator, polish_ops, options.seed);
      budget.charge_serial(static_cast<double>(again.timed_ops + 3 * again.evaluated_ops));
      polished = again.better ? std::move(again.better) : elite.better;
    }
  }
  const Scored* top = polished ? &*polished : search.incumbent().has() ? &search.incumbent().best() : nullptr;
  result.memory_limit_bytes = limit.bytes;
  result.memory_note = limit.note;
  const double baselines_s = result.stats.baselines_s;
  result.stats = search.stats();
  budget.add_to(result.stats);
  result.stats.accepted = search.incumbent().accepted();
  result.stats.baselines_s = baselines_s;
  result.stats.stopped_by = budget.stopped_by();
  result.stats.start = incumbent ? incumbent->method : "none";

  // 4. The result: the best candidate unless the incumbent baseline is at least as good.
  if (top && (!incumbent || !incumbent_eval.ok || improves(top->e, incumbent_eval))) {
    (void)evaluator->evaluate(top->c, sim, &result.plan);
    result.stats.origin = "search";
    result.stats.schedule = top->c.describe();
  } else if (incumbent) {
    result.plan = *incumbent->plan;
    result.stats.origin = incumbent->method;
    result.stats.schedule = fmt::format("baseline {} (no candidate improved on it)", incumbent->method);
  } else {
    fail(
        "tuner: no baseline could run and no candidate schedule was feasible for {} on {} devices with {} "
        "micro-batches",
        inputs.model.name, p, m);
  }
  result.baseline_runs = std::move(field.runs);
  complete_result(result, inputs, *evaluator, any, limit.bytes);
  result.stats.elapsed_s = budget.elapsed_s();
  const Evaluation final_eval = evaluation_of(result.sim);
  progress.report("done", true, &final_eval, result.stats.rounds);
  return result;
}

}  // namespace octo
