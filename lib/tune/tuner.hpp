#pragma once
/// The iterative, bubble-aware tuner: co-optimises partition, placement and schedule of a
/// pipeline-parallel training iteration with the simulator as its oracle (DESIGN.md, "Tuner").
/// tuner.cpp is the algorithm; its parts live beside it:
///
/// 1. Baselines (tune/baselines.hpp): the ten schedules users run today; the best one that fits
///    the memory limit is the incumbent, so the result is never worse than it.
/// 2. Seeds (tune/seeds.hpp): partitions and placements of p … 12p stages and of one stage per
///    layer (fixed shapes, map-searched, head-run and packed layouts), ranked by their proven
///    structure bound, list-scheduled (sched/list_scheduler.hpp) under a grid of scheduler
///    options, with recompute where memory demands it.
/// 3. Local search (tune/search.hpp) from the best seeds: each round asks every neighbourhood
///    (tune/neighbourhood.hpp, one file each in tune/moves/: partition, schedule options, slack,
///    recompute, placement, structure, layer, reorder of the critical path) for candidates,
///    evaluates them in chunks (tune/batch.hpp) and keeps the best improvement
///    (tune/incumbent.hpp); candidates whose bound cannot beat the current plan are pruned unseen.
///    Seeded random kicks (tune/kick.hpp) restart the descent from the best plan until no step
///    helps, the budget ends (tune/budget.hpp) or the plan reaches the lower bound for any plan
///    (sim/lower_bound.hpp).
/// 4. Polish (tune/polish.hpp): the order search, the shifting bottleneck and the forward–backward
///    justification of the best plan and of an elite of others, on the work budget set aside for it; one
///    search round (tune/round.hpp) is steps 2–4 under one seed.
/// Candidates are generated deterministically and evaluated on a thread pool in fixed chunks,
/// reduced in candidate order: for a given seed and thread count the result is the same on every
/// run (the budget is counted in work, not seconds) unless the wall-clock cap ends the search on a
/// slow machine (TuneStats::stopped_by tells). With max_evaluations alone it does not even depend
/// on the thread count. Progress goes to TuneOptions::progress only; the library prints nothing.

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cost/inputs.hpp"
#include "plan/plan.hpp"
#include "sched/baseline.hpp"
#include "sim/lower_bound.hpp"
#include "sim/simulator.hpp"

namespace octo {

/// What ends a search (TuneStats::stopped_by, as the reports print it).
namespace stop_reason {
inline constexpr std::string_view kConverged = "converged";
inline constexpr std::string_view kReachedBound = "reached the lower bound";
inline constexpr std::string_view kWorkBudget = "work budget";
inline constexpr std::string_view kEvaluationLimit = "evaluation limit";
inline constexpr std::string_view kWallClockCap = "wall-clock cap";
inline constexpr std::string_view kInterrupted = "interrupted";
}  // namespace stop_reason

/// A progress report (once per improvement and phase, and at least every second of search).
struct TuneProgress {
  double elapsed_s = 0;
  std::string step;  ///< e.g. "baselines", "seeds", "local search: partition"
  int round = 0;
  std::int64_t evaluations = 0;
  double best_iteration_ms = 0;  ///< 0 until something was evaluated
  double best_bubble_ratio = 0;
  bool best_fits_memory = false;
};

/// Op-units (compute ops scheduled, lowered and simulated) one thread of the reference machine
/// (a 2-core cloud VM) evaluates per second; TuneOptions::time_budget_s is converted to a work
/// budget with it.
inline constexpr double kUnitsPerSecondPerThread = 2.5e6;
/// The most independent searches TuneOptions::searches takes.
inline constexpr int kMaxSearches = 64;
/// The wall-clock cap is this multiple of time_budget_s.
inline constexpr double kWallCapFactor = 2.5;

struct TuneOptions {
  int pp = 0;                     ///< pipeline devices; 0: inputs.pp
  int microbatches = 0;           ///< 0: inputs.microbatches
  double memory_limit_bytes = 0;  ///< per device; 0: inputs.memory_limit_bytes
  /// Search effort in seconds of the reference machine: a deterministic work budget of
  /// time_budget_s × threads × kUnitsPerSecondPerThread op-units (so the result depends only on
  /// the seed and the thread count), with a hard wall-clock cap of kWallCapFactor × time_budget_s
  /// (baselines included; × searches) on slower machines.
  double time_budget_s = 10;
  std::uint64_t seed = 1;
  /// Independent searches (tune/round.hpp), from seeds seed, seed + 1, …: each gets the whole
  /// work budget (and the wall-clock cap grows with them), and the fastest plan wins — N times the
  /// work, the plan of the best of N runs with those seeds.
  int searches = 1;
  int threads = 0;  ///< 0: std::thread::hardware_concurrency()
  /// Stop after this many candidate evaluations (0: no limit): a budget that, unlike the wall
  /// clock, gives the same result on any machine.
  std::int64_t max_evaluations = 0;
  /// Wall-clock cap in seconds, baselines included (0: kWallCapFactor × time_budget_s × searches). A large
  /// cap makes a loaded machine spend the whole work budget, for comparisons at equal work.
  double wall_cap_s = 0;
  /// Called with progress reports (tune/report.hpp format_progress makes them a line); the first
  /// one says what the budget amounts to.
  std::function<void(const TuneProgress&)> progress;
  /// When set and raised (core/interrupt.hpp: SIGINT, SIGTERM), the search stops at once and
  /// the best plan found so far is the result (TuneStats::stopped_by "interrupted").
  const std::atomic<bool>* stop = nullptr;
};

/// "10 s", "4.2 min", "3.1 h", "12.5 days", "31.7 years": a duration for the progress line.
[[nodiscard]] std::string human_duration(double seconds);

/// One row of the comparison: a baseline or the tuned plan.
struct MethodSummary {
  std::string name;
  bool ran = false;
  std::string skipped;  ///< why a baseline could not run
  double iteration_time_ms = 0;
  double bubble_ratio = 0;
  std::int64_t peak_memory_bytes = 0;  ///< max over devices
  bool fits_memory = false;
  double tokens_per_s = 0;
  bool recompute = false;     ///< the plan recomputes some stage
  double lower_bound_ms = 0;  ///< the any-plan lower bound of the inputs (sim/lower_bound.hpp)
  double gap = 0;             ///< iteration_time_ms / lower_bound_ms − 1
  /// For a baseline that recomputes only to fit (TuneResult::baselines_recompute_to_fit): the
  /// same baseline without recompute, as its framework would run it if memory allowed.
  std::optional<double> without_recompute_ms;
  std::int64_t without_recompute_peak_bytes = 0;
};

struct TuneStats {
  std::int64_t evaluations = 0;  ///< candidates scheduled and simulated
  std::int64_t infeasible = 0;   ///< candidates the scheduler rejected (memory)
  std::int64_t pruned = 0;       ///< candidates whose lower bound could not beat the current plan
  double work_units = 0;         ///< effort spent, in op-units (see kUnitsPerSecondPerThread)
  int rounds = 0;                ///< local search rounds
  int improvements = 0;          ///< accepted steps
  int kicks = 0;                 ///< random restarts from the best plan
  int searches = 1;  ///< independent searches run: TuneOptions::searches, fewer once one reached the bound
  std::uint64_t seed = 1;  ///< the seed of the search whose plan won
  double elapsed_s = 0;
  double baselines_s = 0;  ///< time spent building the baselines
  /// One of stop_reason: converged, reached the lower bound, work budget, evaluation limit (all
  /// deterministic), wall-clock cap or interrupted (TuneOptions::stop).
  std::string stopped_by;
  std::string start;     ///< the incumbent the search started from (a baseline or "none")
  std::string origin;    ///< what the best plan is: "search" or the baseline it kept
  std::string schedule;  ///< Candidate::describe() of the best plan, or the baseline name
  /// Accepted steps per source: "seed", each neighbourhood ("partition", "schedule", "recompute",
  /// "placement", "structure", "layer", "reorder") and "kick".
  std::vector<std::pair<std::string, int>> accepted;
};

struct TuneResult {
  /// The tuned plan: method "octopipe", lowered (SEND/RECV placed), inputs embedded, `predicted`
  /// = the prediction of its simulation. It passes check_plan under `memory_limit_bytes`.
  Plan plan;
  SimResult sim;                         ///< its simulation (with the critical path)
  PlanBounds bounds;                     ///< its lower bounds (any plan; its partition and placement)
  MethodSummary summary;                 ///< the tuned plan as a table row
  std::vector<MethodSummary> baselines;  ///< the ten baselines, in baseline_methods() order
  std::vector<BaselineRun> baseline_runs;
  /// The best baseline that fits the limit (else the fastest one; empty when none ran).
  std::string best_baseline;
  bool best_baseline_fits = false;
  double best_baseline_ms = 0;
  double speedup_vs_best_baseline = 0;  ///< best_baseline_ms / tuned iteration time
  double memory_limit_bytes = 0;        ///< the limit the plan was made for
  /// Set when no plan can fit the limit (e.g. static memory alone exceeds it): the search then
  /// kept every plan within `memory_limit_bytes`, the peak of the fastest baseline, and says so.
  std::string memory_note;
  bool baselines_recompute_to_fit = false;  ///< baselines were allowed to recompute to fit
  TuneStats stats;
};

/// Tunes the plan for `inputs`. Throws octo::Error for unusable inputs (e.g. more devices than
/// layers); never returns a plan slower than the best baseline that fits.
[[nodiscard]] TuneResult tune(const PlannerInputs& inputs, const TuneOptions& options = {});

/// A table row from a plan's `predicted` report.
[[nodiscard]] MethodSummary summarize(const std::string& name, const Plan& plan);

}  // namespace octo
