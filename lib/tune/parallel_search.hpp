#pragma once
/// The factorization search (`octoplan plan|compare --search-parallel`): which TP × PP × DP (× EP)
/// split of the cluster, which micro-batch size and count for the model's fixed global batch, and
/// then the partition, placement and schedule of the winner.
///
/// 1. Enumerate (enumerate_factorizations): TP a divisor of the NVLink domain that the model's
///    heads (and every other TP-sharded size) divide; PP × DP × TP = the world, PP at most the
///    layers; EP a divisor of DP and of the routed experts (MoE models only); ZeRO 0 and 1 when
///    DP > 1 (unless fixed); a micro-batch size b with global_batch divisible by b × DP, giving
///    M = global_batch / (b × DP) micro-batches.
/// 2. Prune without simulating: a factorization whose static memory (weights, gradients and
///    optimizer state, perfectly balanced over the PP devices) already exceeds a device cannot fit;
///    the others are ranked by the any-plan lower bound (sim/lower_bound.hpp) of their inputs,
///    split by split (a split's best bound over its micro-batch sizes, a ZeRO-0 row's taken as the
///    larger of its own and its ZeRO-1 twin's; within a split ascending micro-batch size). The full bound
///    packs layers for every used-device count (seconds at PP 64), so each row starts with a quick bound
///    below it (work over the devices, one micro-batch's path) and gets the full one only when the order or a
///    pruning decision needs it: the order and the decisions are those of the full bounds, rows never reached
///    show the quick one.
/// 3. Tune in that order (tune/tuner.hpp, time_budget_s / max_tuned of work each, never cut by
///    the wall clock), at most `max_tuned` of them (up to twice as many until one fits); a
///    factorization whose bound is not below the best fitting iteration time found so far is
///    pruned unseen (it cannot win, so pruning never drops the best of the tuned ones). Then the
///    next 4 x `max_tuned` rows in bound order are tuned too (up to twice max_tuned tunes in all) where
///    their fastest fitting baseline beats that of every tuned row: the bound ranks a split by what
///    no plan of it can beat, a baseline by what one plan does, and the extra tunes can only make
///    the winner faster. The winner is the fastest tuned plan that fits. TuneOptions::wall_cap_s,
///    when set, caps the whole search.
/// Deterministic for a seed and thread count whatever the machine's load (unless a wall cap
/// binds): candidates are visited in a fixed order and each tune ends on its work budget.
/// Progress goes to the tune options' progress callback only.

#include <string>
#include <vector>

#include "cost/inputs.hpp"
#include "tune/tuner.hpp"

namespace octo {

/// One way of laying the model over the cluster.
struct Factorization {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  int ep = 1;
  int zero = 0;
  int micro_batch = 1;   ///< sequences per micro-batch
  int microbatches = 1;  ///< per iteration and DP replica
  friend bool operator==(const Factorization&, const Factorization&) = default;
};

/// "tp 2 pp 4 dp 1 ep 1 zero 0 mb 1 x 64".
[[nodiscard]] std::string describe(const Factorization& f);

/// What became of one factorization.
enum class FactorizationStatus {
  Tuned,          ///< tuned; its figures are the tuned plan's
  TooBig,         ///< static memory alone exceeds the device: cannot fit
  PrunedByBound,  ///< its lower bound is not below the best fitting plan found
  NotTuned,       ///< beyond max_tuned in bound order (and its baselines no faster than the tuned rows')
  /// Not tuned for memory: no baseline fits (tuned only if nothing else fits), or a split of the
  /// same TP and PP with at most its static memory and activations did not fit (`note` says which).
  SkippedForMemory,
  Failed,  ///< the planner refused it (the reason is in `note`)
};

[[nodiscard]] std::string_view to_string(FactorizationStatus status);

struct FactorizationRow {
  Factorization f;
  FactorizationStatus status = FactorizationStatus::NotTuned;
  std::string note;
  double static_bytes = 0;    ///< static memory per device at a perfect balance over PP
  double lower_bound_ms = 0;  ///< any-plan bound of its inputs (the quick one while bound_is_quick)
  /// lower_bound_ms is only the quick bound (work, one micro-batch's path): the search never needed
  /// the full one, for this row was ranked beyond the tuned ones or pruned by the quick one.
  bool bound_is_quick = false;
  bool fits = false;  ///< tuned: its plan fits the device memory
  /// The fastest baseline that fits (ms), for the rows whose baselines the search ran; 0 otherwise.
  double baseline_ms = 0;
  int tuned_order = 0;  ///< 1, 2, ...: the order in which the search tuned the rows; 0: not tuned
  double iteration_ms = 0;
  double tokens_per_s = 0;
  double bubble_ratio = 0;
  double dp_share = 0;  ///< DP reduction + optimizer step + ZeRO all-gather, of the iteration time
  double ep_share = 0;  ///< EP all-to-alls inside the ops, of the iteration time
  double tp_share = 0;  ///< TP collectives inside the ops (estimator's model), of the iteration time
};

struct ParallelSearchOptions {
  TuneOptions tune;     ///< time_budget_s is the whole search's; each tuned factorization gets a share
  int max_tuned = 4;    ///< factorizations tuned at most (in bound order)
  int zero = -1;        ///< fixed ZeRO stage; -1 tries 0 and 1 when DP > 1
  int ep = 0;           ///< fixed EP; 0 tries every valid one
  int micro_batch = 0;  ///< fixed micro-batch size (--micro-batch); 0 tries 1, 2, 4, 8
};

/// The global batch (sequences per step) every factorization trains, and where it comes from:
/// training.global_batch; else training.micro_batch x training.microbatches (the batch of the
/// model's own micro-batch settings); else micro_batch x 2 x the world (a default, said so).
struct GlobalBatch {
  int sequences = 0;
  std::string source;
};

struct ParallelSearchResult {
  GlobalBatch global_batch;            ///< what every row trains
  std::vector<FactorizationRow> rows;  ///< in enumeration order
  int winner = -1;                     ///< index into rows; -1: nothing fits
  TuneResult best;                     ///< the winner's tuned plan (valid when winner >= 0)
  PlannerInputs best_inputs;           ///< the inputs the winner was made from
  /// Set when no factorization can fit: the arithmetic and the smallest cluster that would.
  std::string no_fit;
};

[[nodiscard]] GlobalBatch search_global_batch(const ModelSpec& model, const ClusterSpec& cluster);

/// Every factorization of `cluster`'s world for `model` that trains its global batch
/// (search_global_batch), at micro-batch sizes 1, 2, 4, 8 or only `micro_batch` when positive.
/// Order: TP, PP, EP, ZeRO, micro-batch size ascending.
[[nodiscard]] std::vector<Factorization> enumerate_factorizations(const ModelSpec& model,
                                                                  const ClusterSpec& cluster, int zero = -1,
                                                                  int ep = 0, int micro_batch = 0);

/// `base` with the factorization applied: cluster sizes, micro-batch size and count, and costs
/// estimated at its TP (base's costs must be estimated: measured costs fix one shape).
[[nodiscard]] PlannerInputs apply_factorization(const PlannerInputs& base, const Factorization& f);

/// The search (see the top of this file). Throws octo::Error when the model or the cluster
/// admits no factorization at all.
[[nodiscard]] ParallelSearchResult search_parallel(const PlannerInputs& base,
                                                   const ParallelSearchOptions& options);

/// The table of alternatives, the winner marked, one line per factorization.
[[nodiscard]] std::string format_factorizations(const ParallelSearchResult& result);

/// The comm shares of a simulated plan: DP tail, EP all-to-alls, TP collectives, each the largest
/// over the pipeline devices, as fractions of the iteration time.
struct CommShares {
  double dp = 0, ep = 0, tp = 0;
};
[[nodiscard]] CommShares comm_shares(const PlannerInputs& inputs, const Plan& plan, const SimResult& sim);

}  // namespace octo
