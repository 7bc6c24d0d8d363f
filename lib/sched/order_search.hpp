#pragma once
/// Order search: a tabu search over the per-device op orders of a complete compute-only schedule,
/// job-shop style, instead of list scheduling from a fixed priority. Each iteration times the
/// current order (sched/op_graph.hpp, ideal transfers), takes one critical path and its critical
/// blocks (runs of consecutive ops on one device, each starting the moment the one before it
/// ends), and proposes moving an op of a block to the block's front or past its end (the N5 / N7
/// neighbourhoods of Nowicki–Smutnicki and Balas–Vazacopoulos: in a job shop, moves inside a
/// block cannot shorten that path). Every move is first estimated from the old heads and tails of the moved
/// segment (Taillard's estimate), the most promising few are timed exactly (incrementally: only the ops
/// downstream of the moved segment are re-timed), and the best of those is
/// taken even when it is worse (the tabu list keeps the search from undoing recent moves unless
/// that beats the best order). After a while without a new best the search restarts from the best
/// order with a small random perturbation. Deterministic for a given seed; its work is counted in
/// timed ops and limited.
///
/// Memory: a move is rejected when it raises a device's activation bytes (plan/semantics.hpp's
/// memory rules: F allocates, B / BW / W free) above the device's cap, by default its peak in the
/// start order, so the searched order needs no more activation memory than the start (the
/// simulator, which applies the same rules, confirms it).

#include <cstdint>
#include <vector>

#include "sched/list_scheduler.hpp"
#include "sched/schedule.hpp"

namespace octo {

struct OrderSearchOptions {
  /// Work limit: ops timed, exactly (the ops a move re-times, or a whole order on a restart) or in
  /// a move's estimate (its segment).
  std::int64_t max_timed_ops = 4'000'000;
  /// Per device, the most activation bytes the order may hold (e.g. memory limit − static bytes);
  /// a device's cap is never below its peak in the start order. Empty: those peaks.
  std::vector<std::int64_t> activation_cap;
  std::uint64_t seed = 1;
  /// Stop once the makespan reaches this (e.g. a proven lower bound); 0: never.
  double target_ms = 0;
  int tenure = 4;           ///< base tabu tenure in iterations (a random 0..tenure is added)
  int candidates = 2;       ///< moves timed exactly per iteration, best estimates first
  int restart_after = 40;   ///< iterations without a new best before a restart from the best
  int max_block_moves = 3;  ///< ops of a block, from each end, that may move to the other end
  int runners_up = 3;       ///< earlier best orders to return besides the best
};

struct OrderSearchResult {
  /// The best order found, re-timed with ideal transfers, or `start` itself with its own timing
  /// when nothing was better; `infeasible` names a problem only for a malformed start.
  ListSchedule schedule;
  /// The orders that were the best before the final one, newest first (at most
  /// OrderSearchOptions::runners_up): nearly as fast with ideal transfers, they may be faster
  /// where links are shared, which only the caller's simulator sees.
  std::vector<Programs> runners_up;
  std::int64_t timed_ops = 0;
  int iterations = 0;
  int improvements = 0;  ///< new best orders
};

/// Searches from `start` (comm ops, if any, are ignored). Throws octo::Error for a malformed
/// problem (as list_schedule).
[[nodiscard]] OrderSearchResult order_search(const ListScheduleProblem& problem, const Programs& start,
                                             const OrderSearchOptions& options = {});

}  // namespace octo
