#pragma once
/// One search round of the tuner (tuner.hpp steps 2–4) under one seed: the seeds and local
/// search (tune/search.hpp) under the memory limit the baselines allow, once more under the peak
/// of the fastest baseline when nothing fits although the static memory would, then the polish
/// (tune/polish.hpp) of the best plan and the elite. `tune` runs TuneOptions::searches rounds from
/// seeds seed, seed + 1, … with a fresh work budget each (Budget::next_round), so a round gives the
/// plan a run with its seed alone would, and keeps the fastest.

#include <memory>
#include <optional>

#include "cost/inputs.hpp"
#include "tune/baselines.hpp"
#include "tune/budget.hpp"
#include "tune/candidate.hpp"
#include "tune/incumbent.hpp"
#include "tune/memory_policy.hpp"
#include "tune/progress.hpp"
#include "tune/tuner.hpp"
#include "tune/worker_pool.hpp"

namespace octo {

struct Round {
  SearchLimit limit;                           ///< the memory limit the round searched under
  std::shared_ptr<const Evaluator> evaluator;  ///< under `limit`
  Evaluation incumbent_eval;                   ///< the incumbent baseline under `limit` (not ok: none)
  std::optional<Scored> top;                   ///< the best plan found (polished); empty: none
  /// The search's rounds, improvements and kicks, the accepted steps per source and what stopped
  /// the round (the budget's counters are the caller's).
  TuneStats stats;
};

/// One round with `options.seed`, from `start` (the limit the baselines allow, its evaluator and the
/// incumbent's evaluation under it, shared by every round; its `top` and `stats` are ignored).
/// `any_plan_ms`: the lower bound for any plan (the search stops there); `field`: the baselines;
/// `can_fit`: static memory allows a plan that fits.
[[nodiscard]] Round search_round(const Round& start, const PlannerInputs& inputs, const TuneOptions& options,
                                 WorkerPool& pool, Budget& budget, Progress& progress,
                                 const BaselineField& field, bool can_fit, double any_plan_ms);

}  // namespace octo
