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
#include "tune/fewer_devices.hpp"
#include "tune/memory_policy.hpp"
#include "tune/progress.hpp"
#include "tune/result.hpp"
#include "tune/round.hpp"

namespace octo {

TuneResult tune(const PlannerInputs& inputs_in, const TuneOptions& options) {
  const auto start = Budget::Clock::now();
  PlannerInputs inputs = inputs_in;
  if (options.pp > 0) inputs.pp = options.pp;
  if (options.microbatches > 0) inputs.microbatches = options.microbatches;
  if (options.memory_limit_bytes > 0) inputs.memory_limit_bytes = options.memory_limit_bytes;
  if (!(options.time_budget_s > 0) || !std::isfinite(options.time_budget_s))
    fail_usage("--time-budget: {} (expected a finite number of seconds > 0)", options.time_budget_s);
  if (!(options.wall_cap_s >= 0) || !std::isfinite(options.wall_cap_s))
    fail_usage("--wall-cap: {} (expected a finite number of seconds; 0: the default cap)",
               options.wall_cap_s);
  if (options.searches < 1 || options.searches > kMaxSearches)
    fail_usage("--searches: {} (expected 1 to {})", options.searches, kMaxSearches);
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
      fmt::format("search budget {} of work on the reference machine ({} threads){}, wall clock "
                  "capped at {}; Ctrl-C (SIGINT) or SIGTERM stops the search and keeps the best "
                  "plan found so far",
                  human_duration(options.time_budget_s), pool.threads(),
                  options.searches > 1 ? fmt::format(" for each of {} searches", options.searches) : "",
                  human_duration(budget.wall_cap_s())),
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
  // Every round starts under the limit the baselines allow, with the incumbent evaluated under it.
  Round initial;
  initial.limit = SearchLimit{inputs.memory_limit_bytes, ""};
  if (!can_fit) initial.limit = limit_when_static_exceeds(inputs, field.fastest_run());
  initial.evaluator = std::make_shared<const Evaluator>(inputs, p, m, initial.limit.bytes);
  Simulator sim;
  if (incumbent) initial.incumbent_eval = initial.evaluator->evaluate_plan(*incumbent->plan, sim);
  Candidate whole;
  whole.ends = {layers};
  whole.device = {0};
  const LowerBound any = any_plan_lower_bound(any_plan_input(initial.evaluator->skeleton(whole), inputs), m);

  // 2./3. One round (tune/round.hpp: seeds, local search, polish) per search seed; the fastest
  //       plan wins. No further round once one reached the bound or the time is up.
  std::optional<Round> best;
  TuneStats effort;
  int searches = 0;        // the rounds run: a round that reached the bound, or the time, ends them
  std::string stopped_by;  // what ended the last round
  for (int k = 0; k < options.searches; ++k) {
    if (k > 0) {
      if (budget.out_of_time() || stopped_by == stop_reason::kReachedBound) break;
      budget.next_round();
    }
    TuneOptions seeded = options;
    seeded.seed = options.seed + static_cast<std::uint64_t>(k);
    Round round = search_round(initial, inputs, seeded, pool, budget, progress, field, can_fit, any.ms);
    ++searches;
    effort.rounds += round.stats.rounds;
    effort.improvements += round.stats.improvements;
    effort.kicks += round.stats.kicks;
    round.stats.seed = seeded.seed;
    stopped_by = round.stats.stopped_by;
    if (!best || (round.top && (!best->top || improves(round.top->e, best->top->e)))) best = std::move(round);
  }
  const Scored* top = best->top ? &*best->top : nullptr;
  const Evaluator& evaluator = *best->evaluator;
  // 3b. Where the bound of any plan lies at fewer devices, the usual shapes on that many
  //     (tune/fewer_devices.hpp): the search keeps every device busy.
  std::optional<Scored> fewer;
  if (any.devices > 0 && any.devices < p && !budget.interrupted())
    fewer = fewer_devices_plan(inputs, evaluator, any.devices, [&] { return budget.out_of_time(); });
  const bool on_fewer = fewer && (!top || improves(fewer->e, top->e));
  if (on_fewer) top = &*fewer;
  const Evaluation& incumbent_eval = best->incumbent_eval;
  result.memory_limit_bytes = best->limit.bytes;
  result.memory_note = best->limit.note;
  const double baselines_s = result.stats.baselines_s;
  result.stats = best->stats;
  result.stats.rounds = effort.rounds;
  result.stats.improvements = effort.improvements;
  result.stats.kicks = effort.kicks;
  result.stats.searches = searches;
  result.stats.stopped_by = stopped_by;
  budget.add_to(result.stats);
  result.stats.baselines_s = baselines_s;
  result.stats.start = incumbent ? incumbent->method : "none";

  // 4. The result: the best candidate unless the incumbent baseline is at least as good.
  if (top && (!incumbent || !incumbent_eval.ok || improves(top->e, incumbent_eval))) {
    (void)evaluator.evaluate(top->c, sim, &result.plan);
    result.stats.origin = on_fewer ? fmt::format("{} of the {} pipeline devices", any.devices, p) : "search";
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
  complete_result(result, inputs, evaluator, any, best->limit.bytes);
  result.stats.elapsed_s = budget.elapsed_s();
  const Evaluation final_eval = evaluation_of(result.sim);
  progress.report("done", true, &final_eval, result.stats.rounds);
  return result;
}

}  // namespace octo
