// The local search (tune/search.hpp): it stops at the any-plan bound as soon as its best plan
// reaches it, otherwise descends and kicks until it converges or the budget ends; its best plan is
// never worse than a seed and is what re-evaluating its candidate gives; and it reports its
// phases and improvements through the progress callback only.

#include "tune/search.hpp"

#include <catch2/catch.hpp>
#include <limits>
#include <string>
#include <vector>

#include "cost/inputs.hpp"
#include "tune_testing.hpp"

namespace octo {
namespace {

/// A budget that ends by evaluation count, never by the clock.
TuneOptions by_count(std::int64_t evaluations) {
  TuneOptions o;
  o.time_budget_s = 600;
  o.max_evaluations = evaluations;
  o.threads = 2;
  return o;
}

struct Run {
  std::vector<TuneProgress> reports;
  double best_ms = 0;
  double reevaluated_ms = 0;
  int rounds = 0;
  std::string stopped_by;
  std::int64_t evaluations = 0;
};

Run search(const PlannerInputs& in, TuneOptions options, double bound) {
  Run r;
  options.progress = [&](const TuneProgress& p) { r.reports.push_back(p); };
  WorkerPool pool(options.threads);
  Budget budget(options, pool.threads(), Budget::Clock::now());
  Progress progress(options, budget);
  const Evaluator ev(in, in.pp, in.microbatches, in.memory_limit_bytes);
  Search s(in, options, pool, budget, progress, bound);
  s.run(ev, Evaluation{});
  REQUIRE(s.incumbent().has());
  r.best_ms = s.incumbent().best().e.makespan_ms;
  Simulator sim;
  r.reevaluated_ms = ev.evaluate(s.incumbent().best().c, sim).makespan_ms;
  r.rounds = s.stats().rounds;
  r.stopped_by = budget.stopped_by();
  r.evaluations = budget.evaluations();
  return r;
}

}  // namespace

TEST_CASE("the search stops at the bound, otherwise improves on its seeds", "[tune][search]") {
  const PlannerInputs in = tunetest::tiny_hybrid(3, 6);

  // A bound every plan reaches: the search ends after the seeds, without a round of descent.
  const Run at_bound = search(in, by_count(4000), std::numeric_limits<double>::max());
  CHECK(at_bound.stopped_by == "reached the lower bound");
  CHECK(at_bound.rounds == 0);

  // A bound no plan reaches: it descends, and its best is at least as good as the best seed.
  const Run open = search(in, by_count(4000), 0);
  CHECK(open.rounds > 0);
  CHECK(open.stopped_by != "reached the lower bound");
  CHECK(open.best_ms <= at_bound.best_ms * (1 + 1e-9));
  // The incumbent's evaluation is the candidate's own: evaluating it again gives the same time.
  CHECK(open.reevaluated_ms == Approx(open.best_ms).epsilon(1e-12));

  // Progress goes through the callback: the seeds first, and the best time never gets worse.
  REQUIRE(!open.reports.empty());
  CHECK(open.reports.front().step == "seeds");
  double last = std::numeric_limits<double>::max();
  for (const TuneProgress& p : open.reports) {
    if (p.best_iteration_ms > 0) {
      CHECK(p.best_iteration_ms <= last * (1 + 1e-9));
      last = p.best_iteration_ms;
    }
  }
}

TEST_CASE("the search ends when its evaluation budget does", "[tune][search]") {
  const PlannerInputs in = tunetest::tiny_hybrid(3, 6);
  const Run small = search(in, by_count(50), 0);
  CHECK(small.stopped_by.find("evaluation") != std::string::npos);
  const Run large = search(in, by_count(4000), 0);
  CHECK(large.best_ms <= small.best_ms * (1 + 1e-9));
}

TEST_CASE("past the wall-clock cap the search still returns the best of its first seeds", "[tune][search]") {
  const PlannerInputs in = tunetest::tiny_hybrid(3, 6);
  TuneOptions capped = by_count(4000);
  capped.wall_cap_s = 1e-9;  // spent before the seeds are built (a slow machine, a huge model)
  const Run r = search(in, capped, 0);
  CHECK(r.stopped_by == "wall-clock cap");
  CHECK(r.rounds == 0);
  CHECK(r.evaluations > 0);
  CHECK(r.evaluations <= 16);  // run_seeds' kSeedsAlwaysEvaluated, nothing after them
  CHECK(r.reevaluated_ms == Approx(r.best_ms).epsilon(1e-12));
  // Never better than a search with time to spare.
  const Run open = search(in, by_count(4000), 0);
  CHECK(open.best_ms <= r.best_ms * (1 + 1e-9));
}

}  // namespace octo
