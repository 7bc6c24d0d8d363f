#include "tune/tuner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>

#include "core/error.hpp"
#include "core/random.hpp"
#include "sched/partition.hpp"
#include "sim/sim_input.hpp"
#include "tune/baselines.hpp"
#include "tune/batch.hpp"
#include "tune/budget.hpp"
#include "tune/incumbent.hpp"
#include "tune/kick.hpp"
#include "tune/memory_policy.hpp"
#include "tune/neighbourhood.hpp"
#include "tune/polish.hpp"
#include "tune/progress.hpp"
#include "tune/result.hpp"
#include "tune/seeds.hpp"

namespace octo {
namespace {

constexpr int kMaxFailedKicks = 200;
/// The share of the work budget set aside for the polish (tune/polish.hpp).
constexpr double kPolishShare = 0.02;

/// One search under one memory limit: seeds, steepest descent over the neighbourhoods from the
/// best seeds, then random kicks from the best plan, until no step helps, the budget ends or the
/// plan reaches the lower bound for any plan.
class Search {
 public:
  Search(const PlannerInputs& inputs, const TuneOptions& options, WorkerPool& pool, Budget& budget,
         Progress& progress, double any_plan_bound)
      : inputs_(inputs),
        budget_(budget),
        progress_(progress),
        batch_(pool, budget),
        bound_(any_plan_bound),
        rng_(options.seed * 0x2545f4914f6cdd1dULL + 1),
        work_(layer_work_ms(inputs.costs)),
        incumbent_(sources()) {}

  /// `baseline`: the evaluation of the incumbent baseline under `ev`'s limit (progress only).
  void run(const Evaluator& ev, const Evaluation& baseline) {
    ev_ = &ev;
    baseline_ = baseline;
    incumbent_.reset();
    report("seeds", true);
    const std::vector<Scored> starts =
        run_seeds(inputs_, ev, work_, batch_, budget_, [&](const Scored& s) { offer(s, 0, "seeds"); });
    for (std::size_t i = 0; i < starts.size() && i < 6 && !done(); ++i)
      descend(starts[i], i == 0 ? "local search" : fmt::format("local search (start {})", i + 1), 0);
    for (int failed = 0; !done() && failed < kMaxFailedKicks && incumbent_.has();) {
      ++stats_.kicks;
      const Candidate k = kick(incumbent_.best().c, ev.devices(), ev.layers(), rng_);
      const std::vector<Evaluation> e = batch_.run(ev, std::span(&k, 1));
      const Evaluation before = incumbent_.best().e;
      if (e[0].ok) descend({k, e[0]}, "kick + local search", kick_source());
      failed = improves(incumbent_.best().e, before) ? 0 : failed + 1;
    }
    budget_.stop("converged");
  }

  [[nodiscard]] const Incumbent& incumbent() const { return incumbent_; }
  [[nodiscard]] const TuneStats& stats() const { return stats_; }

 private:
  static std::vector<std::string> sources() {
    std::vector<std::string> names{"seed"};
    for (const auto& n : neighbourhoods()) names.emplace_back(n->name());
    names.emplace_back("kick");
    return names;
  }
  [[nodiscard]] static int kick_source() { return static_cast<int>(neighbourhoods().size()) + 1; }

  /// The budget is spent, or no plan can be faster than the best one.
  bool done() {
    if (incumbent_.has() && incumbent_.best().e.fits_memory &&
        incumbent_.best().e.makespan_ms <= bound_ * (1 + 1e-6))
      budget_.stop("reached the lower bound");
    return budget_.stopped();
  }

  void report(std::string_view step, bool force) {
    const Evaluation* shown = incumbent_.has() && !improves(baseline_, incumbent_.best().e)
                                  ? &incumbent_.best().e
                              : baseline_.ok ? &baseline_
                                             : nullptr;
    progress_.report(step, force, shown, stats_.rounds);
  }

  void offer(const Scored& s, int source, std::string_view step) {
    if (incumbent_.offer(s, source)) report(step, true);
  }

  /// Every neighbourhood's candidates near `cur`, with the index of the source that proposed them.
  void propose(const Scored& cur, bool wide, std::vector<Candidate>& out, std::vector<int>& from) {
    SearchContext ctx{inputs_, *ev_, work_, rng_};
    for (std::size_t i = 0; i < neighbourhoods().size(); ++i) {
      std::vector<Candidate> v;
      neighbourhoods()[i]->propose(cur, wide, ctx, v);
      for (Candidate& c : v)
        if (well_formed(c, ev_->devices(), ev_->layers()) && !same_schedule(c, cur.c)) {
          out.push_back(std::move(c));
          from.push_back(static_cast<int>(i) + 1);
        }
    }
  }

  /// (3) Steepest descent in chunks: the first chunk (in candidate order) holding an improvement
  /// decides the step; its best candidate (lowest index on ties) is kept, everything else rolled
  /// back. When the narrow neighbourhoods hold none, the wide ones are tried once per round.
  void descend(Scored current, const std::string& step, int source) {
    offer(current, source, step);
    while (!done()) {
      ++stats_.rounds;
      std::vector<Candidate> cands;
      std::vector<int> from;
      propose(current, false, cands, from);
      const std::size_t chunk = small_problem(current.c.stages(), ev_->microbatches()) ? 32 : 8;
      int found = -1;
      Evaluation found_e;
      bool wide = false;
      for (std::size_t begin = 0; begin < cands.size() && !done();) {
        const std::size_t n = std::min(cands.size() - begin, chunk);
        // A candidate that cannot beat a fitting current plan is pruned unseen.
        const std::vector<Evaluation> e = batch_.run(*ev_, std::span(cands).subspan(begin, n),
                                                     current.e.fits_memory ? current.e.makespan_ms : 0);
        for (std::size_t i = 0; i < n; ++i)
          if (improves(e[i], found >= 0 ? found_e : current.e)) {
            found = static_cast<int>(begin + i);
            found_e = e[i];
          }
        if (found >= 0) break;
        begin += n;
        if (begin >= cands.size() && !wide) {
          wide = true;
          std::vector<Candidate> more;
          std::vector<int> more_from;
          propose(current, true, more, more_from);
          const std::vector<Candidate> narrow = std::move(cands);
          cands.clear();
          from.clear();
          for (std::size_t i = 0; i < more.size(); ++i)
            if (std::none_of(narrow.begin(), narrow.end(),
                             [&](const Candidate& c) { return same_schedule(c, more[i]); })) {
              cands.push_back(std::move(more[i]));
              from.push_back(more_from[i]);
            }
          begin = 0;
        }
        report(step, false);
      }
      if (found < 0) return;
      current = {cands[static_cast<std::size_t>(found)], found_e};
      ++stats_.improvements;
      const int src = from[static_cast<std::size_t>(found)];
      offer(current, src,
            fmt::format("{}: {}", step, neighbourhoods()[static_cast<std::size_t>(src) - 1]->name()));
    }
  }

  const PlannerInputs& inputs_;
  Budget& budget_;
  Progress& progress_;
  BatchEvaluator batch_;
  double bound_;
  SplitMix64 rng_;
  std::vector<double> work_;
  Incumbent incumbent_;
  TuneStats stats_;
  const Evaluator* ev_ = nullptr;
  Evaluation baseline_;
};

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
  BaselineField field = run_baseline_field(inputs, can_fit);
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
  const LowerBound any =
      any_plan_lower_bound(make_sim_input(layer_plan(evaluator->skeleton(whole)), inputs), m);

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
  // 3b. The order search on the best plan, kept when the simulator confirms it.
  std::optional<Scored> polished;
  if (search.incumbent().has() && !budget.interrupted() && !budget.past_wall_cap()) {
    Polish pol = polish(search.incumbent().best(), *evaluator, inputs,
                        std::min(kMaxPolishOps, static_cast<std::int64_t>(polish_units)), options.seed);
    budget.charge_serial(static_cast<double>(pol.timed_ops + 3 * pol.evaluated_ops));
    polished = std::move(pol.better);
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
