#include "tune/round.hpp"

#include <algorithm>
#include <utility>

#include "sim/simulator.hpp"
#include "tune/polish.hpp"
#include "tune/search.hpp"

namespace octo {
namespace {

/// The share of the work budget set aside for the polish (tune/polish.hpp).
constexpr double kPolishShare = 0.02;

}  // namespace

Round search_round(const Round& start, const PlannerInputs& inputs, const TuneOptions& options,
                   WorkerPool& pool, Budget& budget, Progress& progress, const BaselineField& field,
                   bool can_fit, double any_plan_ms) {
  const BaselineRun* incumbent = field.incumbent();
  Round round{start.limit, start.evaluator, start.incumbent_eval, std::nullopt, {}};

  // Seeds and local search; when nothing fits although the static memory would, once more under
  // the peak of the fastest baseline.
  Search search(inputs, options, pool, budget, progress, any_plan_ms);
  const double polish_units = budget.reserve(kPolishShare);
  search.run(*round.evaluator, round.incumbent_eval);
  if (can_fit && inputs.memory_limit_bytes > 0 && field.best < 0 &&
      !(search.incumbent().has() && search.incumbent().best().e.fits_memory)) {
    round.limit = limit_when_nothing_fits(inputs, field.fastest_run());
    round.evaluator =
        std::make_shared<const Evaluator>(inputs, inputs.pp, inputs.microbatches, round.limit.bytes);
    Simulator sim;
    if (incumbent) round.incumbent_eval = round.evaluator->evaluate_plan(*incumbent->plan, sim);
    budget.resume();
    search.run(*round.evaluator, round.incumbent_eval);
  }
  // The order search on the best plan, and the elite justified, kept when the simulator confirms it.
  std::optional<Scored> polished;
  const Evaluator& ev = *round.evaluator;
  if (search.incumbent().has() && !budget.out_of_time()) {
    const std::int64_t polish_ops = std::min(kMaxPolishOps, static_cast<std::int64_t>(polish_units));
    Polish pol = polish(search.incumbent().best(), ev, polish_ops, options.seed);
    budget.charge_serial(static_cast<double>(pol.timed_ops + 3 * pol.evaluated_ops));
    polished = std::move(pol.better);
    const Polish elite =
        justify_elite(search.incumbent().elite(), polished ? *polished : search.incumbent().best(), ev);
    budget.charge_serial(static_cast<double>(elite.timed_ops + 3 * elite.evaluated_ops));
    if (elite.better) {
      // The winner of another structure order-searched too (its own polish: it had none).
      Polish again = polish(*elite.better, ev, polish_ops, options.seed);
      budget.charge_serial(static_cast<double>(again.timed_ops + 3 * again.evaluated_ops));
      polished = again.better ? std::move(again.better) : elite.better;
    }
  }
  if (polished)
    round.top = std::move(polished);
  else if (search.incumbent().has())
    round.top = search.incumbent().best();
  round.stats = search.stats();
  round.stats.accepted = search.incumbent().accepted();
  round.stats.stopped_by = budget.stopped_by();
  return round;
}

}  // namespace octo
