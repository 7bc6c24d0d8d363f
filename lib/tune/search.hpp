#pragma once
/// One search under one memory limit (DESIGN.md "Tuner" (2) and (3)): the seeds (tune/seeds.hpp),
/// steepest descent over the neighbourhoods (tune/neighbourhood.hpp) from the best seeds, then
/// seeded random kicks (tune/kick.hpp) from the best plan, until no step helps, the budget
/// (tune/budget.hpp) ends or the plan reaches the lower bound for any plan. The best plan is kept by
/// the incumbent (tune/incumbent.hpp); progress goes through tune/progress.hpp only.

#include <string>
#include <string_view>
#include <vector>

#include "core/random.hpp"
#include "cost/inputs.hpp"
#include "tune/batch.hpp"
#include "tune/budget.hpp"
#include "tune/candidate.hpp"
#include "tune/incumbent.hpp"
#include "tune/progress.hpp"
#include "tune/tuner.hpp"
#include "tune/worker_pool.hpp"

namespace octo {

class Search {
 public:
  /// `any_plan_bound`: no plan is faster (sim/lower_bound.hpp); the search stops there.
  Search(const PlannerInputs& inputs, const TuneOptions& options, WorkerPool& pool, Budget& budget,
         Progress& progress, double any_plan_bound);

  /// Searches under `ev`'s memory limit from a fresh incumbent. `baseline`: the evaluation of the
  /// incumbent baseline under that limit (shown by the progress until the search beats it).
  void run(const Evaluator& ev, const Evaluation& baseline);

  [[nodiscard]] const Incumbent& incumbent() const { return incumbent_; }
  [[nodiscard]] const TuneStats& stats() const { return stats_; }

 private:
  /// The budget is spent, or no plan can be faster than the best one.
  bool done();
  void report(std::string_view step, bool force);
  void offer(const Scored& s, int source, std::string_view step);
  /// Every neighbourhood's candidates near `cur`, with the index of the source that proposed them.
  void propose(const Scored& cur, bool wide, std::vector<Candidate>& out, std::vector<int>& from);
  /// Steepest descent from `current` until no neighbour improves on it.
  void descend(Scored current, const std::string& step, int source);

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

}  // namespace octo
